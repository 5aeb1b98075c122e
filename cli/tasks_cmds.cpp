// Task-generation subcommands: tasks validate | list | show | stats | export | import, and propose.
#include <algorithm>
#include <thread>
#include <optional>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <memory>
#include <random>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "common/files.h"
#include "engine/chat.h"
#include "engine/generate.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "tasks/api_catalog.h"
#include "tasks/proposer.h"
#include "tasks/frontier.h"
#include "tasks/pipeline.h"
#include "tasks/symbolic.h"
#include "tasks/task_store.h"
#include "tasks/validation.h"

namespace kz::cli {

namespace {

std::string file_stem(const TaskRecord& t) {
    char id[16];
    std::snprintf(id, sizeof id, "%05lld", static_cast<long long>(t.id));
    std::string name = id;
    for (const auto& a : t.apis) name += "_" + a;
    return name.substr(0, 120);
}

}  // namespace

Runner add_tasks_store(CLI::App& app);

Runner add_tasks(CLI::App& app) {
    struct Args {
        std::string file, device = "cpu", catalog;
        std::vector<std::string> apis;
        double max_runtime_ms = 1000, min_runtime_ms = 0, max_memory_mb = 4096;
        bool compile = false, as_json = false;
    };
    auto a = std::make_shared<Args>();
    auto* tasks =
        app.add_subcommand("tasks", "Task modules: validate, and the task store (list, show, stats, export, import)");
    tasks->require_subcommand(1);
    auto store_cmds = add_tasks_store(*tasks);
    auto* val = tasks->add_subcommand("validate", "Validate a task module, every check by name");
    val->add_option("file", a->file, "Task file (KernelBench format)")->required();
    val->add_option("--apis", a->apis, "Comma-separated catalog APIs the module must use")->delimiter(',');
    val->add_option("--device", a->device, "cpu, cuda or cuda:N");
    val->add_option("--max-runtime-ms", a->max_runtime_ms, "Upper end of the runtime band")->check(CLI::PositiveNumber);
    val->add_option("--min-runtime-ms", a->min_runtime_ms, "Lower end of the runtime band")
        ->check(CLI::NonNegativeNumber);
    val->add_option("--max-memory-mb", a->max_memory_mb, "Upper end of the memory band")->check(CLI::PositiveNumber);
    val->add_flag("--compile", a->compile,
                  "Also run torch.compile (check \"compile\"; always on a GPU, where "
                  "compiling is fast enough to be routine)");
    val->add_option("--catalog", a->catalog, "API catalog (default: the repository's tasks/api_catalog.json)");
    val->add_flag("--json", a->as_json, "Last line: {\"valid\", \"checks\", \"reason\", ...}");
    return [=]() -> int {
        if (!tasks->parsed()) return -1;
        if (!val->parsed()) return store_cmds();
        auto usage = [](const std::string& why) { return usage_error("tasks validate", why); };
        std::string source;
        try {
            source = read_file(a->file);
        } catch (const std::exception& e) {
            return usage(e.what());
        }
        try {
            ApiCatalog catalog = ApiCatalog::load(ApiCatalog::path_or_default(a->catalog));
            ValidationOptions o;
            o.device = a->device;
            o.max_runtime_ms = a->max_runtime_ms, o.min_runtime_ms = a->min_runtime_ms,
            o.max_memory_mb = a->max_memory_mb;
            o.compile = a->compile || a->device.rfind("cuda", 0) == 0;
            TaskValidator validator(catalog, o);
            TaskValidation v = validator.validate(source, a->apis);
            if (a->as_json) {
                std::cout << v.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
            } else {
                std::cout << (v.valid ? "valid" : "invalid") << "\n";
                for (const auto& name : validation_checks()) {
                    std::cout << "  " << name << ": " << v.checks[name];
                    if (v.reasons.count(name)) std::cout << " (" << v.reasons[name] << ")";
                    std::cout << "\n";
                }
            }
            return 0;
        } catch (const std::exception& e) {
            return usage(e.what());
        }
    };
}

// tasks list | show | stats | export | import, registered on the `tasks` command.
namespace {

struct StoreArgs {
    std::string store, out, dir, origin, validations;
    int64_t id = 0, limit = 50;
    bool as_json = false, valid_only = false, no_validate = false;
    std::string device = "cpu";
    int workers = 1;
};

int usage_tasks(const std::string& why) { return usage_error("tasks", why); }

int tasks_list(TaskStore& store, const StoreArgs& a) {
    for (const auto& t : store.tasks(a.valid_only, a.limit)) {
        if (a.as_json) {
            std::cout << nlohmann::json{{"id", t.id},
                                        {"apis", t.apis},
                                        {"level", t.level},
                                        {"origin", t.origin},
                                        {"valid", t.valid},
                                        {"reason", t.reason},
                                        {"eager_ms", t.eager_ms ? nlohmann::json(*t.eager_ms) : nlohmann::json()}}
                             .dump()
                      << "\n";
        } else {
            std::string apis;
            for (const auto& x : t.apis) apis += (apis.empty() ? "" : ",") + x;
            std::printf("%6lld  %-7s  L%d  %-12s  %s%s\n", static_cast<long long>(t.id), t.valid ? "valid" : "invalid",
                        t.level, t.origin.c_str(), apis.c_str(),
                        t.valid ? "" : ("  (" + t.reason.substr(0, 80) + ")").c_str());
        }
    }
    return 0;
}

int tasks_show(TaskStore& store, const StoreArgs& a) {
    auto t = store.task(a.id);
    if (!t) return usage_tasks("no task " + std::to_string(a.id) + " in " + a.store);
    if (a.as_json)
        std::cout << nlohmann::json{{"id", t->id},         {"apis", t->apis},   {"level", t->level},
                                    {"origin", t->origin}, {"valid", t->valid}, {"validation", t->validation},
                                    {"source", t->source}}
                         .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                  << "\n";
    else
        std::cout << "# task " << t->id << " (" << (t->valid ? "valid" : "invalid: " + t->reason) << ")\n" << t->source;
    return 0;
}

int tasks_export(TaskStore& store, const StoreArgs& a) {
    std::filesystem::create_directories(a.out);
    int n = 0;
    for (const auto& t : store.tasks(a.valid_only)) {
        write_file_atomic(a.out + "/" + file_stem(t) + ".py", t.source);
        ++n;
    }
    std::cout << "exported " << n << " tasks to " << a.out << "\n";
    return 0;
}

// A directory's manifest.jsonl, when it has one: {"file", "apis", "level"} per task file (what
// `kernelzero corpus` writes), so that imported tasks keep their API sets (the frontier's keys, and
// validation's uses_api_set check) and levels.
std::map<std::string, std::pair<std::vector<std::string>, int>> import_manifest(const std::string& dir) {
    std::map<std::string, std::pair<std::vector<std::string>, int>> by_file;
    const std::string path = dir + "/manifest.jsonl";
    if (!std::filesystem::is_regular_file(path)) return by_file;
    int n = 0;
    for (const nlohmann::json& j : read_json_lines(path)) {
        ++n;
        if (!j.is_object() || !j.contains("file") || !j["file"].is_string() || !j.contains("apis") ||
            !j["apis"].is_array())
            throw std::runtime_error(path + ":" + std::to_string(n) + ": needs \"file\" and \"apis\"");
        by_file[j["file"].get<std::string>()] = {j["apis"].get<std::vector<std::string>>(), j.value("level", 0)};
    }
    return by_file;
}

// Validations recorded by another run (teach's validation.jsonl) by validation_key; records without a
// whole validation (an older teach run's) are left out.
std::map<std::string, TaskValidation> recorded_validations(const std::string& path) {
    std::map<std::string, TaskValidation> by_key;
    if (path.empty()) return by_key;
    if (!std::filesystem::is_regular_file(path)) throw std::runtime_error("--validations: no file " + path);
    for (const auto& [key, record] : read_validation_records(path))
        if (record.contains("validation")) by_key[key] = TaskValidation::from_json(record["validation"]);
    return by_key;
}

int tasks_import(TaskStore& store, const StoreArgs& a) {
    std::error_code ec;
    if (!std::filesystem::is_directory(a.dir, ec)) return usage_tasks(a.dir + " is not a directory");
    const auto recorded = recorded_validations(a.validations);
    std::vector<std::string> files;
    for (const auto& e : std::filesystem::directory_iterator(a.dir))
        if (e.is_regular_file() && e.path().extension() == ".py") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    const auto manifest = import_manifest(a.dir);
    std::string origin = a.origin.empty() ? "import:" + std::filesystem::path(a.dir).filename().string() : a.origin;
    ApiCatalog catalog = ApiCatalog::load(ApiCatalog::default_path());
    PipelineOptions po;
    po.validation.device = a.device;
    po.validation.workers = a.workers;
    std::unique_ptr<TaskPipeline> pipe;
    if (!a.no_validate) pipe = std::make_unique<TaskPipeline>(catalog, store, po);
    std::vector<std::string> sources;
    std::vector<std::pair<std::vector<std::string>, int>> sets;
    for (const auto& f : files) {
        sources.push_back(read_file(f));
        auto it = manifest.find(std::filesystem::path(f).filename().string());
        sets.push_back(it == manifest.end() ? std::pair<std::vector<std::string>, int>{} : it->second);
    }
    // Validated `workers` at once, then stored one by one in file order: the same store whatever the
    // timing (novelty is judged against what is stored before each).
    std::vector<std::optional<TaskValidation>> validated(files.size());
    std::atomic<int> reused{0};
    if (pipe) {
        std::atomic<size_t> next{0};
        auto validate_some = [&] {
            for (size_t i = next++; i < files.size(); i = next++) {
                validated[i] = pipe->screen(sources[i]);  // a near-duplicate of a stored task: no worker needed
                if (validated[i]) continue;
                auto it = recorded.find(validation_key(a.device, sets[i].first, sources[i]));
                if (it != recorded.end()) {
                    validated[i] = it->second;
                    ++reused;
                } else {
                    validated[i] = pipe->validate(sources[i], sets[i].first);
                }
            }
        };
        std::vector<std::thread> threads;
        for (int t = 0; t < a.workers; ++t) threads.emplace_back(validate_some);
        for (auto& t : threads) t.join();
    }
    int valid = 0;
    for (size_t i = 0; i < files.size(); ++i) {
        const auto& [apis, level] = sets[i];
        if (pipe) {
            valid += pipe->submit(sources[i], apis, level, origin, "", validated[i] ? &*validated[i] : nullptr).valid;
        } else {
            store.add_task(unvalidated_task(sources[i], apis, level, origin, "not validated"));
        }
    }
    std::cout << "imported " << files.size() << " files (" << valid << " valid";
    if (!a.validations.empty()) std::cout << "; " << reused << " validations taken from " << a.validations;
    std::cout << ") into " << a.store << "\n";
    return 0;
}

}  // namespace

Runner add_tasks_store(CLI::App& tasks) {
    auto a = std::make_shared<StoreArgs>();
    auto with_store = [&](CLI::App* c) { c->add_option("--store", a->store, "Task store (SQLite)")->required(); };
    auto* list = tasks.add_subcommand("list", "Stored tasks, one line each");
    with_store(list);
    list->add_option("--limit", a->limit, "Most tasks shown");
    list->add_flag("--valid", a->valid_only, "Valid tasks only");
    list->add_flag("--json", a->as_json, "One JSON object per task");
    auto* show = tasks.add_subcommand("show", "One stored task: source and validation");
    with_store(show);
    show->add_option("id", a->id, "Task id")->required();
    show->add_flag("--json", a->as_json, "JSON");
    auto* stats =
        tasks.add_subcommand("stats", "Counts by origin and validity, distinct normalised hashes, API coverage");
    with_store(stats);
    stats->add_flag("--json", a->as_json, "JSON");
    auto* exp = tasks.add_subcommand("export", "Write tasks as a KernelBench-format directory");
    with_store(exp);
    exp->add_option("--out", a->out, "Directory")->required();
    exp->add_flag("--valid", a->valid_only, "Valid tasks only");
    auto* imp = tasks.add_subcommand("import", "Store every .py file of a KernelBench-format directory");
    with_store(imp);
    imp->add_option("dir", a->dir, "Directory")->required();
    imp->add_option("--origin", a->origin, "Origin recorded (default import:DIRNAME)");
    imp->add_option("--device", a->device, "Validation device");
    imp->add_option("--workers", a->workers, "Validations at once (one reference worker each)")
        ->capture_default_str()
        ->check(CLI::Range(1, 64));
    auto* no_validate =
        imp->add_flag("--no-validate", a->no_validate, "Store without validating (recorded as not valid)");
    imp->add_option("--validations", a->validations,
                    "A validation.jsonl of kernelzero teach: a module it validated (the same source, API set and "
                    "device) is stored with that validation instead of being validated again")
        ->excludes(no_validate);
    return [=]() -> int {
        try {
            TaskStore store(a->store);
            if (list->parsed()) return tasks_list(store, *a);
            if (show->parsed()) return tasks_show(store, *a);
            if (stats->parsed()) {
                auto s = store.stats().to_json();
                std::cout << (a->as_json ? s.dump() : s.dump(2)) << "\n";
                return 0;
            }
            if (exp->parsed()) return tasks_export(store, *a);
            if (imp->parsed()) return tasks_import(store, *a);
            return usage_tasks("no subcommand");
        } catch (const std::exception& e) {
            return usage_tasks(e.what());
        }
    };
}

namespace {

struct ProposeArgs {
    bool symbolic = false, as_json = false, from_frontier = false;
    std::string store, device = "cpu", model, model_device = "auto", catalog;
    std::vector<std::string> apis;
    int64_t max_new_tokens = 1024;
    double temperature = 1.0;
    std::vector<std::string> benchmarks;
    int n = 10, level = 0;
    uint64_t seed = 0;
    double max_runtime_ms = 1000;
};

// The LLM Proposer: a model, its tokenizer and chat format, sampling one module per API set.
struct LlmProposer {
    std::unique_ptr<Model> model;
    std::unique_ptr<Tokenizer> tok;
    ChatFormat chat;
    std::vector<int64_t> stops;

    LlmProposer(const ProposeArgs& a) {
        torch::Device dev = device_from_name(a.model_device);
        model = std::make_unique<Model>(Model::load(a.model, dev, dtype_from_name("auto", dev)));
        tok = std::make_unique<Tokenizer>(Tokenizer::load(a.model));
        chat = ChatFormat::from_template(tok->chat_template());
        for (const char* s : {"<|im_end|>", "<|endoftext|>"})
            if (auto id = tok->token_id(s)) stops.push_back(*id);
    }

    // The i-th proposal's completion for `apis`.
    std::string propose(const ApiCatalog& catalog, const std::vector<std::string>& apis, const ProposeArgs& a, int i) {
        GenerateRequest req;
        req.prompts = {tok->encode(chat.render(proposer_prompt(catalog, apis), true))};
        req.max_new_tokens = a.max_new_tokens;
        req.stop_ids = stops;
        req.sampling.temperature = a.temperature;
        req.sampling.seed = a.seed * 1000003 + static_cast<uint64_t>(i);
        return tok->decode(generate(*model, req)[0].text_tokens());
    }
};

int run_propose(const ProposeArgs& a) {
    auto usage = [](const std::string& why) { return usage_error("propose", why); };
    if (!a.symbolic && a.model.empty()) return usage("give --symbolic or --model DIR");
    try {
        ApiCatalog catalog = ApiCatalog::load(ApiCatalog::path_or_default(a.catalog));
        std::vector<std::string> fixed;
        for (const auto& n : a.apis) fixed.push_back(catalog.resolve(n).name);
        if (fixed.size() > 5) return usage("an API set holds 1 to 5 APIs");
        std::unique_ptr<LlmProposer> llm;
        if (!a.model.empty()) llm = std::make_unique<LlmProposer>(a);
        TaskStore store(a.store);
        PipelineOptions po;
        po.validation.device = a.device;
        po.validation.max_runtime_ms = a.max_runtime_ms;
        po.validation.compile = a.device.rfind("cuda", 0) == 0;  // torch.compile where it is routine
        po.benchmark_dirs = a.benchmarks;
        TaskPipeline pipe(catalog, store, po);
        std::mt19937_64 rng(a.seed);
        FrontierTracker frontier;
        if (a.from_frontier) {
            if (!fixed.empty()) return usage("--apis and --from-frontier exclude each other");
            frontier.load(store);
        }
        const SizeProfile sizes = a.device.rfind("cuda", 0) == 0 ? SizeProfile::typical : SizeProfile::small;
        int valid = 0;
        std::map<std::string, int> failed;
        for (int i = 0; i < a.n; ++i) {
            ApiSet set;
            if (!fixed.empty()) {
                set.apis = fixed;
                set.level = fixed.size() > 1 ? 2 : 1;
            } else if (a.from_frontier) {
                set = frontier.draw(catalog, a.level ? a.level : 1 + i % 2, rng);
            } else {
                set = sample_api_set(catalog, a.level ? a.level : 1 + i % 2, rng);
            }
            TaskRecord t;
            if (llm) {
                std::string completion = llm->propose(catalog, set.apis, a, i);
                ParsedProposal parsed = parse_proposal(completion);
                if (parsed.ok) {
                    t = pipe.submit(parsed.source, set.apis, set.level, "proposer");
                } else {
                    // Recorded, not repaired: the completion itself, with the reason.
                    t = unvalidated_task(completion, set.apis, set.level, "proposer", "parse: " + parsed.reason);
                    t.id = store.add_task(t);
                }
            } else {
                GeneratedTask g = generate_task(catalog, set, sizes, rng);
                t = pipe.submit(g.source, g.apis, set.level, "symbolic");
            }
            if (t.valid)
                ++valid;
            else
                failed[t.reason.substr(0, t.reason.find(':'))] += 1;
            if (!a.as_json)
                std::printf("%4d  task %lld  %s  %s\n", i + 1, static_cast<long long>(t.id),
                            t.valid ? "valid  " : "invalid", t.valid ? "" : t.reason.substr(0, 100).c_str());
        }
        nlohmann::json summary = {{"proposed", a.n},
                                  {"valid", valid},
                                  {"failed_checks", failed},
                                  {"store", a.store},
                                  {"stats", store.stats().to_json()}};
        if (a.as_json)
            std::cout << summary.dump() << "\n";
        else
            std::cout << "proposed " << a.n << ", valid " << valid << ", failures by check "
                      << nlohmann::json(failed).dump() << "\n";
        return 0;
    } catch (const std::exception& e) {
        return usage(e.what());
    }
}

}  // namespace

Runner add_propose(CLI::App& app) {
    auto a = std::make_shared<ProposeArgs>();
    auto* cmd = app.add_subcommand(
        "propose", "Generate task modules (symbolic generator or LLM Proposer), validate and store them");
    auto* sym = cmd->add_flag("--symbolic", a->symbolic, "Compose tasks with the symbolic generator");
    auto* mdl = cmd->add_option("--model", a->model, "Propose with an LLM (Hugging Face model directory)");
    sym->excludes(mdl);
    cmd->add_option("--model-device", a->model_device, "Device of the LLM: cpu, cuda or auto");
    cmd->add_option("--max-new-tokens", a->max_new_tokens, "LLM: most tokens per proposal")
        ->check(CLI::Range(int64_t{1}, int64_t{32768}));
    cmd->add_option("--temperature", a->temperature, "LLM sampling temperature")->check(CLI::NonNegativeNumber);
    cmd->add_option("--apis", a->apis, "Comma-separated API set (default: sampled per proposal)")->delimiter(',');
    cmd->add_option("--catalog", a->catalog,
                    "API catalog the sets are drawn from and checked against (default: the repository's "
                    "tasks/api_catalog.json)");
    cmd->add_flag("--from-frontier", a->from_frontier,
                  "Draw API sets from the store's frontier statistics (Thompson sampling)");
    cmd->add_option("--level", a->level, "1 or 2 (default: alternate)")->check(CLI::Range(0, 2));
    cmd->add_option("--n", a->n, "Proposals")->check(CLI::Range(1, 1000000));
    cmd->add_option("--store", a->store, "Task store (SQLite)")->required();
    cmd->add_option("--seed", a->seed, "Sampling seed");
    cmd->add_option("--device", a->device, "Validation device: cpu (small sizes) or cuda (KernelBench-like sizes)");
    cmd->add_option("--benchmark", a->benchmarks, "Registered benchmark directory (decontamination); repeatable");
    cmd->add_option("--max-runtime-ms", a->max_runtime_ms, "Upper end of the runtime band")->check(CLI::PositiveNumber);
    cmd->add_flag("--json", a->as_json, "Last line: the summary as JSON");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        return run_propose(*a);
    };
}

Runner add_frontier(CLI::App& app) {
    auto store = std::make_shared<std::string>();
    auto* cmd = app.add_subcommand("frontier", "The Coder's capability map");
    cmd->require_subcommand(1);
    auto* show = cmd->add_subcommand("show", "Per-API pass-rate posterior as a table, and as an SVG next to the store");
    show->add_option("--store", *store, "Task store (SQLite)")->required();
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            TaskStore s(*store);
            FrontierTracker t;
            t.load(s);
            std::vector<std::pair<std::string, BetaStat>> rows;
            for (const auto& [k, v] : t.stats())
                if (k.find('|') == std::string::npos) rows.emplace_back(k, v);
            std::printf("%-28s %8s %8s %8s %8s\n", "api", "p(pass)", "alpha", "beta", "seen");
            for (const auto& [k, v] : rows)
                std::printf("%-28s %8.3f %8.2f %8.2f %8.1f\n", k.c_str(), v.mean(), v.alpha, v.beta, v.seen);
            // The same map as a picture: one bar per API, green inside the frontier band.
            const int bar_h = 16, left = 200, width = 400, h = 30 + bar_h * static_cast<int>(rows.size());
            std::string svg =
                "<svg xmlns='http://www.w3.org/2000/svg' width='" + std::to_string(left + width + 60) + "' height='" +
                std::to_string(h) +
                "' font-family='monospace' font-size='11'>\n"
                "<text x='4' y='14'>Coder pass@1 per API (Beta posterior mean; band 0.2-0.8 in green)</text>\n";
            for (size_t i = 0; i < rows.size(); ++i) {
                const auto& [k, v] = rows[i];
                int y = 24 + bar_h * static_cast<int>(i);
                char buf[512];
                std::snprintf(buf, sizeof buf,
                              "<text x='4' y='%d'>%s</text><rect x='%d' y='%d' width='%d' height='%d' fill='%s'/>"
                              "<text x='%d' y='%d'>%.2f</text>\n",
                              y + 12, k.c_str(), left, y + 2, static_cast<int>(width * v.mean()), bar_h - 4,
                              in_frontier_band(v.mean()) ? "#3a3" : "#aaa",
                              left + static_cast<int>(width * v.mean()) + 4, y + 12, v.mean());
                svg += buf;
            }
            svg += "</svg>\n";
            std::string path = (std::filesystem::path(*store).parent_path() / "frontier.svg").string();
            if (std::filesystem::path(*store).parent_path().empty()) path = "frontier.svg";
            write_file_atomic(path, svg);
            std::printf("%zu APIs; image: %s\n", rows.size(), path.c_str());
            return 0;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "kernelzero frontier: %s\n", e.what());
            return 2;
        }
    };
}

}  // namespace kz::cli
