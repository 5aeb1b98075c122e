// kernelzero: the single controller of KernelZero (design section 2).
#include <cstdio>
#include <iostream>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "engine/torch_info.h"
#include "verify/results_summary.h"

int main(int argc, char** argv) {
    CLI::App app{"KernelZero: train LLMs to write fast, correct GPU kernels"};
    app.require_subcommand(1);
    auto verify = kz::cli::add_verify(app);
    std::vector<kz::cli::Runner> engine_cmds = {
        kz::cli::add_tokenize(app),   kz::cli::add_generate(app),        kz::cli::add_score(app),
        kz::cli::add_init_model(app), kz::cli::add_bench_engine(app),    kz::cli::add_tasks(app),
        kz::cli::add_propose(app),    kz::cli::add_frontier(app),        kz::cli::add_bench(app),
        kz::cli::add_serve(app),      kz::cli::add_train(app),           kz::cli::add_sft(app),
        kz::cli::add_report(app),     kz::cli::add_verifier_daemon(app), kz::cli::add_farm(app),
        kz::cli::add_teach(app),      kz::cli::add_corpus(app),          kz::cli::add_proposer_pairs(app)};

    auto* info_cmd = app.add_subcommand("info", "Show the linked libtorch and the devices it sees");
    bool info_json = false;
    info_cmd->add_flag("--json", info_json, "Print JSON");

    auto* results_cmd = app.add_subcommand("results", "Summarise a verify results file (JSONL)");
    std::string results_path;
    bool results_json = false;
    results_cmd->add_option("file", results_path, "RESULTS.jsonl")->required();
    results_cmd->add_flag("--json", results_json, "Print JSON");
    bool results_stages = false;
    results_cmd->add_flag("--stages", results_stages,
                          "Also print where the jobs' time went, stage by stage, and the host's ceiling");
    int results_cores = static_cast<int>(std::thread::hardware_concurrency());
    results_cmd->add_option("--cores", results_cores, "Cores of the host that ran the jobs (for the ceiling)")
        ->capture_default_str()
        ->check(CLI::PositiveNumber);

    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "kernelzero: %s\n", e.what());
        return 2;
    }
    if (info_cmd->parsed()) {
        kz::TorchInfo t = kz::torch_info();
        nlohmann::json j = {{"libtorch", t.linked ? t.version : "not linked"},
                            {"cuda_available", t.cuda_available},
                            {"cuda_devices", t.cuda_devices}};
        if (info_json)
            std::cout << j.dump() << "\n";
        else
            std::cout << "libtorch " << j["libtorch"].get<std::string>() << ", CUDA "
                      << (t.cuda_available ? std::to_string(t.cuda_devices) + " device(s)" : "not available") << "\n";
        return 0;
    }
    if (results_cmd->parsed()) {
        try {
            const auto summary = kz::summarize_results(results_path);
            auto s = summary.to_json();
            if (results_json) {
                std::cout << s.dump() << "\n";
            } else {
                std::cout << "jobs: " << s["jobs"] << "  by status: " << s["by_status"].dump() << "\n"
                          << "total_s:   " << s["total_s"].dump() << "\n"
                          << "compile_s: " << s["compile_s"].dump() << "\n";
                if (s.contains("geomean_speedup_eager"))
                    std::cout << "geomean speedup vs eager (correct): " << s["geomean_speedup_eager"] << "\n";
                if (results_stages) {
                    std::cout << "stages (seconds summed over jobs):\n" << summary.stage_table();
                    std::cout << "candidate children: " << summary.children_line() << "\n";
                    const auto c = summary.ceiling(results_cores);
                    std::printf(
                        "host ceiling: CPU %.3f s a job (children + compiles) on %d cores = %.0f jobs/min; "
                        "device held exclusively %.4f s a job = %.0f jobs/min\n",
                        c.cpu_s_per_job, results_cores, c.cpu_jobs_per_min, c.exclusive_s_per_job,
                        c.device_jobs_per_min);
                }
            }
        } catch (const std::exception& e) {
            std::fprintf(stderr, "kernelzero results: %s\n", e.what());
            return 2;
        }
        return 0;
    }
    for (auto& run : engine_cmds)
        if (int rc = run(); rc != -1) return rc;
    return verify();
}
