// kernelzero teach: the teacher's candidates for the symbolic generator's draws, verified.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>

#include "cli/commands.h"
#include "common/files.h"
#include "teach/corpus.h"
#include "teach/proposer_pairs.h"
#include "teach/teach_run.h"
#include "verify/batch.h"
#include "verify/service.h"

namespace kz::cli {

namespace {

struct TeachArgs {
    std::string out, device = "auto", sizes = "typical", verifier, cache_dir, catalog;
    std::vector<int> levels = {1, 2};
    std::vector<std::string> qualities = {"naive", "fused"};
    int count = 200, workers = 0, validation_workers = 2;
    double fused_share = -1;
    uint64_t seed = 0;
    bool no_verify = false, as_json = false, no_progress = false, each_api = false, supported_only = false;
};

void print_summary(const nlohmann::json& s) {
    for (const auto& [level, l] : s["levels"].items()) {
        std::printf("level %s: %d drawn, %d in the teacher's families, %d valid\n", level.c_str(),
                    l["drawn"].get<int>(), l["teacher_families"].get<int>(), l["valid"].get<int>());
        for (const auto& [quality, q] : l.items()) {
            if (!q.is_object()) continue;
            char geomean[32] = "-";
            if (q["geomean_speedup"].is_number())
                std::snprintf(geomean, sizeof geomean, "%.3gx", q["geomean_speedup"].get<double>());
            std::printf("  %-6s %d written, %d verified, %d correct (coverage %.0f%%), fast_1 %d, geomean %s\n",
                        quality.c_str(), q["written"].get<int>(), q["verified"].get<int>(), q["correct"].get<int>(),
                        100 * q["coverage"].get<double>(), q["fast_1"].get<int>(), geomean);
        }
    }
    std::string unsupported;
    for (const auto& [api, n] : s["unsupported"].items())
        unsupported += (unsupported.empty() ? "" : ", ") + api + " " + std::to_string(n.get<int>());
    if (!unsupported.empty()) std::printf("not written (first unsupported operator, draws): %s\n", unsupported.c_str());
}

int run_teach(const TeachArgs& a) {
    auto usage = [](const std::string& why) { return usage_error("teach", why); };
    TeachOptions o;
    o.out_dir = a.out;
    o.count = a.count;
    o.seed = a.seed;
    o.levels = a.levels;
    o.each_api = a.each_api;
    o.supported_only = a.supported_only;
    o.fused_share = a.fused_share;
    o.sizes = a.sizes == "small" ? SizeProfile::small : SizeProfile::typical;
    o.qualities.clear();
    try {
        for (const auto& q : a.qualities) o.qualities.push_back(parse_quality(q));
    } catch (const std::exception& e) {
        return usage(e.what());
    }
    const std::string device = verifier_device(a.device);
    if (device.empty()) return usage("--device must be cpu, cuda, cuda:N or auto, not '" + a.device + "'");
    catch_stop_signals();
    std::vector<TeachDraw> draws;
    try {
        ApiCatalog catalog = ApiCatalog::load(ApiCatalog::path_or_default(a.catalog));
        ValidationOptions vo;
        vo.device = device;
        vo.workers = a.validation_workers;
        TaskValidator validator(catalog, vo);
        draws = write_teacher_candidates(catalog, o, validator, g_stop);
    } catch (const std::exception& e) {
        return usage(e.what());
    }
    if (g_stop) return 130;
    const std::string verdicts = a.out + "/verdicts.jsonl";
    if (!a.no_verify) {
        VerifyOptions vo;
        vo.device = device;
        vo.lanes = a.workers;
        vo.compile_workers = 0;
        // The summary and the corpus read correctness and the speedup over eager, never over
        // torch.compile: its baseline would only add a compilation and a timing to every task.
        vo.compile_baseline = 0;
        vo.cache_dir = a.cache_dir;
        auto verifier = start_verifier("teach", a.verifier, vo);
        if (!verifier) return 3;
        BatchOptions bo{a.out + "/jobs.jsonl", verdicts, default_in_flight(verifier->options()), !a.no_progress};
        BatchSummary s = run_batch(*verifier, bo, g_stop);
        verifier->shutdown();
        if (s.interrupted) return 130;
    }
    nlohmann::json summary = teach_summary(draws, o.qualities, verdicts);
    write_file_atomic(a.out + "/summary.json", summary.dump(1) + "\n");
    print_summary(summary);
    if (a.as_json) std::cout << summary.dump() << "\n";
    return 0;
}

}  // namespace

Runner add_teach(CLI::App& app) {
    auto a = std::make_shared<TeachArgs>();
    auto* cmd = app.add_subcommand(
        "teach", "The teacher's Triton candidates (naive, fused) for symbolic tasks, verified (teach/teach_run.h)");
    cmd->add_option("--out", a->out, "Output directory (tasks/, naive/, fused/, draws, jobs, verdicts, summary)")
        ->required();
    cmd->add_option("--count", a->count, "Draws of the symbolic generator, levels in turn")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000000));
    cmd->add_option("--seed", a->seed, "Seed of the draws")->capture_default_str();
    cmd->add_option("--levels", a->levels, "Levels to draw, in turn")
        ->delimiter(',')
        ->check(CLI::IsMember({1, 2}))
        ->capture_default_str();
    cmd->add_option("--sizes", a->sizes, "Task sizes")
        ->check(CLI::IsMember({"typical", "small"}))
        ->capture_default_str();
    auto* quality = cmd->add_option("--quality", a->qualities, "Qualities to write")
                        ->delimiter(',')
                        ->check(CLI::IsMember({"naive", "fused"}))
                        ->capture_default_str();
    cmd->add_option("--fused-share", a->fused_share,
                    "One candidate per task instead, the fused one for this share of the tasks (by a hash of the "
                    "seed and the task's name), the naive one for the rest: a corpus run, which trains on one")
        ->check(CLI::Range(0.0, 1.0))
        ->excludes(quality);
    cmd->add_option("--device", a->device, "cpu, cuda, cuda:N or auto (validation and verification)")
        ->capture_default_str();
    add_workers_option(cmd, a->workers, "Verifier lanes");
    cmd->add_option("--validation-workers", a->validation_workers, "Task validations at once")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    cmd->add_option("--verifier", a->verifier, "Verifier URL (redis://... for a farm; default: in-process)");
    cmd->add_option("--cache-dir", a->cache_dir, "Verifier build cache and baselines");
    cmd->add_option("--catalog", a->catalog, "API catalog (default: the repository's tasks/api_catalog.json)");
    cmd->add_flag("--supported-only", a->supported_only,
                  "Draw API sets from the operators the teacher writes only (a corpus run)");
    cmd->add_flag("--each-api", a->each_api,
                  "One level-1 task per API the teacher supports, instead of --count sampled draws");
    cmd->add_flag("--no-verify", a->no_verify, "Write the candidates and jobs only");
    cmd->add_flag("--no-progress", a->no_progress, "No progress bar");
    cmd->add_flag("--json", a->as_json, "Last line: the summary as JSON");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        return run_teach(*a);
    };
}

Runner add_corpus(CLI::App& app) {
    auto o = std::make_shared<CorpusOptions>();
    auto naive_only = std::make_shared<std::vector<std::string>>();
    auto heldout_levels = std::make_shared<std::vector<int>>(o->heldout_levels.begin(), o->heldout_levels.end());
    auto* cmd =
        app.add_subcommand("corpus", "The SFT corpus and a held-out task set from a teach run (teach/corpus.h)");
    cmd->add_option("--from", o->teach_dir, "A kernelzero teach output directory, verified")->required();
    cmd->add_option("--out", o->out_dir,
                    "Output directory (train.jsonl, proposer.jsonl, train_tasks/, heldout/, corpus.json)")
        ->required();
    cmd->add_option("--heldout", o->heldout_fraction, "Share of API sets held out for evaluation")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--heldout-levels", *heldout_levels, "Levels whose API sets may be held out (the rest all train)")
        ->delimiter(',')
        ->check(CLI::IsMember({1, 2}))
        ->capture_default_str();
    cmd->add_option("--heldout-max-apis", o->heldout_max_apis,
                    "Most distinct operators in a held-out API set (0: any; longer sets all train)")
        ->capture_default_str()
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--fused", o->fused_fraction, "Share of training pairs that take the fused kernel")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--naive-only", *naive_only, "Operators only ever taught naive")->delimiter(',');
    cmd->add_option("--near-duplicate", o->near_duplicate, "Token 3-gram Jaccard at which a task is a near duplicate")
        ->capture_default_str()
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--seed", o->seed, "Seed of the split and of the quality choice")->capture_default_str();
    cmd->add_option("--catalog", o->catalog, "API catalog of the Proposer's prompt (default: the repository's)");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        o->naive_only = std::set<std::string>(naive_only->begin(), naive_only->end());
        o->heldout_levels = std::set<int>(heldout_levels->begin(), heldout_levels->end());
        try {
            const nlohmann::json s = build_corpus(*o);
            std::printf(
                "%d training pairs (naive %d, fused %d) from %d verified tasks; %d held out in %zu API sets; "
                "dropped: %d repeats, %d near duplicates; held-out tasks with an operator no pair teaches: %d\n",
                s["train_pairs"].get<int>(), s["train_by_quality"].value("naive", 0),
                s["train_by_quality"].value("fused", 0), s["verified_tasks"].get<int>(), s["heldout_tasks"].get<int>(),
                s["heldout_api_sets"].size(), s["dropped"]["repeats"].get<int>(),
                s["dropped"]["near_duplicates"].get<int>(), s["heldout_with_unseen_operators"].get<int>());
            return 0;
        } catch (const std::exception& e) {
            return usage_error("corpus", e.what());
        }
    };
}

Runner add_proposer_pairs(CLI::App& app) {
    auto o = std::make_shared<ProposerPairsOptions>();
    auto sizes = std::make_shared<std::string>("typical");
    auto as_json = std::make_shared<bool>(false);
    auto* cmd = app.add_subcommand("proposer-pairs",
                                   "The symbolic generator's (API set -> module) pairs for the Proposer's SFT, over a "
                                   "corpus's operators and outside its held-out API sets (teach/proposer_pairs.h)");
    cmd->add_option("--corpus", o->corpus_dir, "A kernelzero corpus output directory")->required();
    cmd->add_option("--out", o->out, "The pairs (JSONL, proposer.jsonl's format)")->required();
    cmd->add_option("--n", o->n, "Pairs")->required()->check(CLI::Range(1, 1000000));
    cmd->add_option("--level", o->level, "Level of the API sets (0: 1 and 2 in turn)")
        ->capture_default_str()
        ->check(CLI::IsMember({0, 1, 2}));
    cmd->add_option("--max-apis", o->max_apis, "Most distinct operators in a set (0: any)")
        ->capture_default_str()
        ->check(CLI::Range(0, 5));
    cmd->add_option("--seed", o->seed, "Seed of the draws")->capture_default_str();
    cmd->add_option("--sizes", *sizes, "Task sizes")->check(CLI::IsMember({"typical", "small"}))->capture_default_str();
    cmd->add_flag("--json", *as_json, "Print the summary as JSON");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        o->small_sizes = *sizes == "small";
        try {
            const nlohmann::json s = write_proposer_pairs(*o);
            if (*as_json) {
                std::cout << s.dump() << "\n";
                return 0;
            }
            std::string by;
            for (const auto& [k, v] : s["by_apis"].items()) by += (by.empty() ? "" : ", ") + k + ": " + v.dump();
            std::printf(
                "%d pairs in %s (by operators: %s); drawn again: %d held out, %d with too many operators, %d "
                "repeats\n",
                s["pairs"].get<int>(), o->out.c_str(), by.c_str(), s["redrawn"]["held_out"].get<int>(),
                s["redrawn"]["too_many_apis"].get<int>(), s["redrawn"]["repeat"].get<int>());
            return 0;
        } catch (const std::exception& e) {
            return usage_error("proposer-pairs", e.what());
        }
    };
}

}  // namespace kz::cli
