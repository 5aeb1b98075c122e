// Subcommands of the kernelzero binary. Each registers its options on the CLI11 app and returns the
// function that runs it; exit codes: 0 done, 2 usage error (one-line reason on stderr), 130 interrupted.
#pragma once

#include <CLI/CLI.hpp>
#include <atomic>
#include <functional>
#include <memory>
#include <string>

namespace kz {
class VerifyService;
struct VerifyOptions;
}  // namespace kz

namespace kz::cli {

using Runner = std::function<int()>;

// "kernelzero CMD: WHY" on stderr; returns the usage-error exit code, 2.
int usage_error(const std::string& cmd, const std::string& why);

// Set once SIGINT or SIGTERM arrives after catch_stop_signals(): a long command finishes what it
// holds, writes what it has and exits 130. One flag for the process.
extern std::atomic<bool> g_stop;
void catch_stop_signals();

// --device for a verifier: "auto" becomes cuda when a GPU is visible, else cpu. Empty when `asked` is
// none of cpu, cuda, cuda:N or auto.
std::string verifier_device(const std::string& asked);

// The verifier at `url` ("" or local: the in-process pool) with `o`, started; null after "kernelzero
// CMD: cannot start the verifier: WHY" on stderr (the command exits 3).
std::unique_ptr<VerifyService> start_verifier(const std::string& cmd, const std::string& url, const VerifyOptions& o);

// --workers N|auto: the verifier's lanes. auto (stored as 0) lets the verifier count them from the
// host's cores and the device's memory when it starts (verify/service.h, auto_lanes).
inline CLI::Option* add_workers_option(CLI::App* cmd, int& lanes, const std::string& what) {
    return cmd
        ->add_option("--workers", lanes, what + " (a number, or auto: from the host's cores and the device's memory)")
        ->transform([](std::string s) { return s == "auto" ? std::string("0") : s; }, "", "auto")
        ->check(CLI::Range(0, 256))
        ->default_str("auto");
}

// Each runner returns -1 when its subcommand was not the one parsed.
Runner add_verify(CLI::App& app);
Runner add_tokenize(CLI::App& app);
Runner add_generate(CLI::App& app);
Runner add_score(CLI::App& app);
Runner add_init_model(CLI::App& app);
Runner add_bench_engine(CLI::App& app);
Runner add_tasks(CLI::App& app);
Runner add_propose(CLI::App& app);
Runner add_frontier(CLI::App& app);
Runner add_bench(CLI::App& app);
Runner add_serve(CLI::App& app);
Runner add_train(CLI::App& app);
Runner add_sft(CLI::App& app);
Runner add_report(CLI::App& app);
Runner add_verifier_daemon(CLI::App& app);
Runner add_farm(CLI::App& app);
Runner add_teach(CLI::App& app);
Runner add_corpus(CLI::App& app);
Runner add_proposer_pairs(CLI::App& app);

}  // namespace kz::cli
