// kernelzero verify: one (task, candidate) pair, or a batch of jobs.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "common/files.h"
#include "verify/batch.h"
#include "verify/sources.h"
#include "verify/farm.h"
#include "verify/verifier.h"

namespace kz::cli {

namespace {

struct VerifyArgs {
    std::string task, candidate, backend, device = "auto", policy = "strict", jobs, out, compile_baseline = "auto";
    std::string cache_dir, python, verifier;
    int trials = kVerifyDefaults.trials, timing_iters = 0, warmup = kVerifyDefaults.warmup, workers = 0,
        compile_workers = 0, in_flight = 0, spares = kVerifyDefaults.spare_children;
    double timeout = kVerifyDefaults.timeout_s, compile_timeout = kVerifyDefaults.compile_timeout_s,
           atol = kVerifyDefaults.atol, rtol = kVerifyDefaults.rtol,
           min_kernel_share = kVerifyDefaults.min_kernel_share;
    bool json = false, no_progress = false;
};

void print_human(const Verdict& v) {
    auto j = v.to_json();
    std::printf("status:   %s\n", j["status"].get<std::string>().c_str());
    std::printf("reason:   %s\n", v.reason.c_str());
    std::printf("trials:   %d/%d passed", v.trials_passed, v.trials_run);
    if (v.max_abs_err) std::printf(" (max abs err %.3g, max rel err %.3g)", *v.max_abs_err, v.max_rel_err.value_or(0));
    std::printf("\n");
    if (v.runtime_ms)
        std::printf("runtime:  median %.4f ms (min %.4f, max %.4f, n %d) [%s]\n", v.runtime_ms->median,
                    v.runtime_ms->min, v.runtime_ms->max, v.runtime_ms->n, v.timing_source.c_str());
    if (v.ref_eager_ms) {
        std::printf("baseline: eager %.4f ms", *v.ref_eager_ms);
        if (v.ref_compile_ms) std::printf(", torch.compile %.4f ms", *v.ref_compile_ms);
        if (v.speedup_eager) std::printf("; speedup %.2fx vs eager", *v.speedup_eager);
        if (v.speedup_compile) std::printf(", %.2fx vs compile", *v.speedup_compile);
        std::printf("\n");
    }
    if (v.custom_kernel_time_fraction)
        std::printf("kernels:  %.0f%% of %s time in the candidate's own kernels\n",
                    *v.custom_kernel_time_fraction * 100, v.device.rfind("cpu", 0) == 0 ? "forward" : "GPU");
    std::string fails;
    for (auto& [k, s] : v.checks)
        if (s == "fail") fails += " " + k;
    std::printf("checks:   %zu run, failed:%s\n", v.checks.size(), fails.empty() ? " none" : fails.c_str());
    std::printf("time:     compile %.2f s, total %.2f s on %s (%s)\n", v.compile_s, v.total_s, v.device.c_str(),
                v.backend.c_str());
    if (!v.log.empty() && v.status != Status::correct) std::printf("log:\n%s\n", v.log.c_str());
}

VerifyOptions verify_options(const VerifyArgs& a, const std::string& device, bool batch) {
    VerifyOptions o;
    o.device = device;
    o.trials = a.trials;
    o.timing_iters = a.timing_iters;
    o.warmup = a.warmup;
    o.strict = a.policy == "strict";
    o.timeout_s = a.timeout;
    o.compile_timeout_s = a.compile_timeout;
    o.atol = a.atol;
    o.rtol = a.rtol;
    o.min_kernel_share = a.min_kernel_share;
    o.compile_baseline = a.compile_baseline == "auto" ? -1 : a.compile_baseline == "on" ? 1 : 0;
    o.lanes = batch ? a.workers : 1;
    o.compile_workers = a.compile_workers;  // 0: as many as lanes
    o.cache_dir = a.cache_dir;
    o.spare_children = a.spares;
    if (!a.python.empty()) o.worker_command = {a.python, "-m", "kernelzero.worker"};
    return o;
}

// One job, its verdict printed; a stop signal shuts the verifier down mid-job.
int verify_one(VerifyService& verifier, const Job& job, bool as_json) {
    std::atomic<bool> finished{false};
    std::thread watcher([&] {
        while (!finished) {
            if (g_stop) {
                verifier.shutdown();
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
    Verdict v = verifier.verify(job);
    finished = true;
    watcher.join();
    if (g_stop) {
        std::fprintf(stderr, "kernelzero verify: interrupted\n");
        return 130;
    }
    print_human(v);
    if (as_json) std::cout << v.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << std::endl;
    return 0;
}

// A batch on a started verifier; `started_s`: how long its start took. The start is reported apart
// from the batch: a trainer starts its verifier once and then runs batch after batch on it.
int verify_batch(VerifyService& verifier, const VerifyArgs& a, double started_s) {
    // Lanes counted by the verifier itself (auto) are known once it started.
    const VerifyOptions& started = verifier.options();
    BatchOptions bo{a.jobs, a.out, a.in_flight > 0 ? a.in_flight : default_in_flight(started), !a.no_progress};
    const auto t_batch = std::chrono::steady_clock::now();
    BatchSummary s;
    try {
        s = run_batch(verifier, bo, g_stop);
    } catch (const std::exception& e) {
        return usage_error("verify", e.what());
    }
    const double batch_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_batch).count();
    const nlohmann::json start_stages = verifier.start_stages();
    std::string parts;  // where the start went, in the order of its parts
    for (const std::string name : {"probe_s", "workers_s", "warm_up_s", "capacity_s"}) {
        const nlohmann::json secs = start_stages.value(name, nlohmann::json());
        if (!secs.is_number()) continue;
        char buf[64];
        std::snprintf(buf, sizeof buf, "%s%s %.1f", parts.empty() ? "" : ", ", name.substr(0, name.rfind("_s")).c_str(),
                      secs.get<double>());
        parts += buf;
    }
    std::string counts;
    for (auto& [k, n] : s.by_status) counts += " " + k + "=" + std::to_string(n);
    std::printf("verified %d of %d jobs (%d already in %s)%s%s\n", s.done, s.total, s.skipped, a.out.c_str(),
                counts.c_str(), s.interrupted ? "; interrupted, re-run to finish" : "");
    std::printf(
        "verifier started in %.1f s (%d lanes, %d compile workers%s%s); the batch took %.1f s = %.1f verdicts "
        "per minute\n",
        started_s, started.lanes, started.compile_workers, parts.empty() ? "" : "; ", parts.c_str(), batch_s,
        batch_s > 0 ? s.done * 60.0 / batch_s : 0.0);
    if (a.json) {
        nlohmann::json j = {{"done", s.done},         {"total", s.total},
                            {"skipped", s.skipped},   {"interrupted", s.interrupted},
                            {"started_s", started_s}, {"start_stages", start_stages},
                            {"batch_s", batch_s},     {"by_status", s.by_status}};
        std::cout << j.dump() << std::endl;
    }
    return s.interrupted ? 130 : 0;
}

int run_verify(const VerifyArgs& a) {
    const bool batch = !a.jobs.empty();
    if (batch && (!a.task.empty() || !a.candidate.empty()))
        return usage_error("verify", "use either --jobs/--out or --task/--candidate, not both");
    if (batch && a.out.empty()) return usage_error("verify", "--jobs needs --out RESULTS.jsonl");
    if (!batch && (a.task.empty() || a.candidate.empty() || a.backend.empty()))
        return usage_error("verify", "needs --task, --candidate and --backend (or --jobs and --out)");

    const std::string device = verifier_device(a.device);
    if (device.empty())
        return usage_error("verify", "--device must be cpu, cuda, cuda:N or auto, not '" + a.device + "'");
    if (!batch && a.backend == "cuda" && device == "cpu")
        return usage_error("verify", "backend cuda needs a GPU: CUDA candidates cannot run on --device cpu");

    Job job;
    if (!batch) {
        std::string err;
        auto t = load_source(a.task, "", err);
        if (!t) return usage_error("verify", "task: " + err);
        auto c = load_source(a.candidate, "", err);
        if (!c) return usage_error("verify", "candidate: " + err);
        job = {"single", t->text, c->text, a.backend};
    } else {
        try {
            read_file(a.jobs);
        } catch (const std::exception& e) {
            return usage_error("verify", e.what());
        }
    }

    catch_stop_signals();
    const auto t_start = std::chrono::steady_clock::now();
    std::unique_ptr<VerifyService> verifier = start_verifier("verify", a.verifier, verify_options(a, device, batch));
    if (!verifier) return 3;
    if (!batch) return verify_one(*verifier, job, a.json);
    return verify_batch(*verifier, a,
                        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
}

}  // namespace

Runner add_verify(CLI::App& app) {
    auto a = std::make_shared<VerifyArgs>();
    auto* cmd = app.add_subcommand("verify", "Verify candidate kernels against their reference tasks");
    cmd->add_option("--task", a->task, "Task file (KernelBench format)");
    cmd->add_option("--candidate", a->candidate, "Candidate file defining ModelNew");
    cmd->add_option("--backend", a->backend, "cuda or triton")->check(CLI::IsMember({"cuda", "triton"}));
    cmd->add_option("--device", a->device, "cpu, cuda, cuda:N or auto (cuda when a GPU is visible)");
    cmd->add_option("--trials", a->trials, "Correctness trials with fresh inputs")->check(CLI::Range(1, 1000));
    cmd->add_option(
           "--timing-iters", a->timing_iters,
           "Timed iterations (default 100 on CUDA, 10 on the CPU interpreter, whose timings are only indicative)")
        ->check(CLI::Range(1, 100000));
    cmd->add_option("--warmup", a->warmup, "Untimed warm-up iterations")->check(CLI::Range(0, 10000));
    cmd->add_option("--policy", a->policy, "strict: torch compute in forward is rejected; lenient: reported")
        ->check(CLI::IsMember({"strict", "lenient"}));
    cmd->add_option("--timeout", a->timeout, "Seconds for one candidate run")->check(CLI::PositiveNumber);
    cmd->add_option("--compile-timeout", a->compile_timeout, "Seconds for one ahead-of-time build")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--atol", a->atol, "fp32 absolute tolerance")->check(CLI::NonNegativeNumber);
    cmd->add_option("--rtol", a->rtol, "fp32 relative tolerance")->check(CLI::NonNegativeNumber);
    cmd->add_option("--min-kernel-share", a->min_kernel_share,
                    "strict, CUDA: least share of GPU time in the candidate's own kernels")
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--compile-baseline", a->compile_baseline, "Time torch.compile too: on, off or auto (on for CUDA)")
        ->check(CLI::IsMember({"on", "off", "auto"}));
    cmd->add_option("--jobs", a->jobs, "JSONL batch: {\"id\", \"task\", \"candidate\", \"backend\"} per line");
    cmd->add_option("--out", a->out, "JSONL results of a batch (appended; finished ids are skipped)");
    add_workers_option(cmd, a->workers, "Parallel lanes of a batch (a reference and a candidate worker each)");
    cmd->add_option("--compile-workers", a->compile_workers, "Parallel compile workers (default: as many as lanes)")
        ->check(CLI::Range(0, 256));
    cmd->add_option("--in-flight", a->in_flight,
                    "Jobs in flight in a batch (default: lanes + compile workers, so compiling overlaps running)")
        ->check(CLI::Range(0, 4096));
    cmd->add_option("--spares", a->spares, "Warm candidate children kept ready per lane")->check(CLI::Range(1, 16));
    cmd->add_option("--cache-dir", a->cache_dir, "Build cache and baseline database (default ~/.cache/kernelzero)");
    cmd->add_option("--verifier", a->verifier,
                    "local (the in-process pool, default) or redis://host:port/db: queue the jobs for a farm of "
                    "verifier daemons (which must verify with the same settings)");
    cmd->add_option("--python", a->python, "Python interpreter for the workers (default: the project's .venv)");
    cmd->add_flag("--json", a->json, "Print the verdict as JSON on the last line");
    cmd->add_flag("--no-progress", a->no_progress, "No progress bar");

    return [a, cmd]() -> int {
        if (!cmd->parsed()) return 2;
        return run_verify(*a);
    };
}

}  // namespace kz::cli
