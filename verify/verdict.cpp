#include "verify/verdict.h"

#include <stdexcept>

#include <cmath>
#include <set>

namespace kz {

using nlohmann::json;

const char* to_string(Status s) {
    switch (s) {
        case Status::correct: return "correct";
        case Status::incorrect: return "incorrect";
        case Status::compile_error: return "compile_error";
        case Status::runtime_error: return "runtime_error";
        case Status::timeout: return "timeout";
        case Status::format_error: return "format_error";
        case Status::rejected: return "rejected";
        case Status::infra_error: return "infra_error";
    }
    return "infra_error";
}

std::optional<Status> status_from_string(const std::string& s) {
    for (Status st : {Status::correct, Status::incorrect, Status::compile_error, Status::runtime_error, Status::timeout,
                      Status::format_error, Status::rejected, Status::infra_error})
        if (s == to_string(st)) return st;
    return std::nullopt;
}

static json opt(const std::optional<double>& v) { return v && std::isfinite(*v) ? json(*v) : json(nullptr); }

json Verdict::to_json() const {
    json j;
    j["status"] = to_string(status);
    j["correct"] = correct();
    j["reason"] = reason;
    j["trials"] = {{"passed", trials_passed}, {"run", trials_run}};
    j["max_abs_err"] = opt(max_abs_err);
    j["max_rel_err"] = opt(max_rel_err);
    if (runtime_ms)
        j["runtime_ms"] = {
            {"median", runtime_ms->median}, {"min", runtime_ms->min}, {"max", runtime_ms->max}, {"n", runtime_ms->n}};
    else
        j["runtime_ms"] = nullptr;
    j["timing_source"] = timing_source.empty() ? json(nullptr) : json(timing_source);
    j["ref_eager_ms"] = opt(ref_eager_ms);
    j["ref_compile_ms"] = opt(ref_compile_ms);
    j["speedup_eager"] = opt(speedup_eager);
    j["speedup_compile"] = opt(speedup_compile);
    j["custom_kernel_time_fraction"] = opt(custom_kernel_time_fraction);
    j["checks"] = checks;
    j["review"] = review;
    j["compile_s"] = compile_s;
    j["total_s"] = total_s;
    j["device"] = device;
    j["backend"] = backend;
    j["attempts"] = attempts;
    j["stages"] = stages;
    j["memory"] = memory;
    j["log"] = log;
    return j;
}

Verdict Verdict::from_json(const json& j) {
    try {
        Verdict v;
        auto st = status_from_string(j.at("status").get<std::string>());
        if (!st) throw std::invalid_argument("unknown status " + j.at("status").dump());
        v.status = *st;
        v.reason = j.value("reason", "");
        if (j.contains("trials") && j["trials"].is_object()) {
            v.trials_passed = j["trials"].value("passed", 0);
            v.trials_run = j["trials"].value("run", 0);
        }
        auto num = [&](const char* key) -> std::optional<double> {
            if (!j.contains(key) || !j[key].is_number()) return std::nullopt;
            return j[key].get<double>();
        };
        v.max_abs_err = num("max_abs_err");
        v.max_rel_err = num("max_rel_err");
        if (j.contains("runtime_ms") && j["runtime_ms"].is_object()) {
            const auto& r = j["runtime_ms"];
            v.runtime_ms = RuntimeStats{r.at("median").get<double>(), r.at("min").get<double>(),
                                        r.at("max").get<double>(), r.at("n").get<int>()};
        }
        v.timing_source =
            j.contains("timing_source") && j["timing_source"].is_string() ? j["timing_source"].get<std::string>() : "";
        v.ref_eager_ms = num("ref_eager_ms");
        v.ref_compile_ms = num("ref_compile_ms");
        v.speedup_eager = num("speedup_eager");
        v.speedup_compile = num("speedup_compile");
        v.custom_kernel_time_fraction = num("custom_kernel_time_fraction");
        v.checks = j.value("checks", std::map<std::string, std::string>());
        v.review = j.value("review", false);
        v.compile_s = j.value("compile_s", 0.0);
        v.total_s = j.value("total_s", 0.0);
        v.device = j.value("device", "");
        v.backend = j.value("backend", "");
        v.attempts = j.value("attempts", 1);
        v.stages = j.value("stages", json::object());
        v.memory = j.value("memory", json());
        v.log = j.value("log", "");
        return v;
    } catch (const json::exception& e) {
        throw std::invalid_argument(std::string("malformed verdict: ") + e.what());
    }
}

Verdict early_verdict(Status s, const std::string& reason, const std::string& device, const std::string& backend) {
    Verdict v;
    v.status = s;
    v.reason = reason;
    v.device = device;
    v.backend = backend;
    return v;
}

namespace {

// Scheduling noise between two synchronises a few microseconds apart, on a loaded host.
constexpr double kOutsideStreamSlackMs = 0.1;

std::optional<double> num(const json& j, const char* key) {
    if (j.is_object() && j.contains(key) && j[key].is_number()) return j[key].get<double>();
    return std::nullopt;
}

std::optional<RuntimeStats> stats(const json& j) {
    if (!j.is_object() || !j.contains("median") || !j["median"].is_number()) return std::nullopt;
    RuntimeStats s;
    s.median = j["median"].get<double>();
    s.min = j.value("min", s.median);
    s.max = j.value("max", s.median);
    s.n = j.value("n", 0);
    return s;
}

// The runtime a verdict reports: CUDA events when present, else the host clock.
std::optional<RuntimeStats> runtime_of(const json& timing) {
    if (!timing.is_object()) return std::nullopt;
    if (auto s = stats(timing.value("event_ms", json()))) return s;
    return stats(timing.value("host_ms", json()));
}

std::string truncate(const std::string& s, size_t n) {
    return s.size() <= n ? s : s.substr(0, n) + "\n[... truncated]";
}

// Each stage of assemble_verdict reads the replies and fills the verdict; one that decides it
// returns true, and the verdict is complete.

// 1. Static checks and the ahead-of-time build.
bool judge_static(Verdict& v, const json& c, const AssemblyPolicy& policy) {
    if (c.is_object() && c.contains("checks") && c["checks"].is_object()) {
        for (auto& [k, val] : c["checks"].items()) v.checks[k] = val.get<std::string>();
        v.compile_s += c.value("compile_s", 0.0);
    }
    std::string static_reasons;
    if (c.is_object() && c.contains("reasons"))
        for (auto& s : c["reasons"]) static_reasons += (static_reasons.empty() ? "" : "; ") + s.get<std::string>();
    if (v.checks["syntax"] == "fail" || v.checks["defines_model_new"] == "fail") {
        v.status = Status::format_error;
        v.reason = static_reasons;
        return true;
    }
    if (auto ck = v.checks.find("custom_kernel");
        !policy.require_custom_kernel && ck != v.checks.end() && ck->second == "fail")
        ck->second = "skip";
    for (auto& [name, val] : v.checks) {
        if (val == "fail") {
            v.status = Status::rejected;
            v.reason = static_reasons;
            return true;
        }
    }
    if (c.is_object() && c.contains("compile_error") && c["compile_error"].is_string()) {
        v.status = Status::compile_error;
        v.reason = "the kernels do not compile";
        v.log = truncate(c["compile_error"].get<std::string>(), 8000);
        return true;
    }
    return false;
}

// 2. The candidate run. Failures on the reference side (the task itself, its memory, the channel)
// are the verifier's, whatever the child said.
bool judge_run(Verdict& v, const json& run, const json& cmp) {
    if (!run.is_object()) {
        v.status = Status::infra_error;
        v.reason = "no result from the candidate worker";
        return true;
    }
    v.log = truncate(run.value("log", std::string()), 4000);
    if (cmp.is_object()) {
        for (const auto& [key, what] : {std::pair<const char*, const char*>{"task_error", "the task is broken: "},
                                        {"memory_failure", ""},
                                        {"channel_error", "the reference could not read the candidate's outputs: "}}) {
            if (cmp.contains(key) && cmp[key].is_string()) {
                v.status = Status::infra_error;
                v.reason = what + cmp[key].get<std::string>();
                return true;
            }
        }
    }
    if (auto cs = num(run, "compile_s")) v.compile_s += *cs;
    if (run.contains("checks") && run["checks"].is_object())
        for (auto& [k, val] : run["checks"].items()) v.checks[k] = val.get<std::string>();
    if (run.contains("sandbox") && run["sandbox"].is_object())
        for (auto& [k, val] : run["sandbox"].items()) v.checks["sandbox_" + k] = val.get<std::string>();
    if (!run.value("ok", false)) {
        std::string kind = run.value("kind", std::string("runtime_error"));
        auto st = status_from_string(kind);
        v.status = st ? *st : Status::runtime_error;
        v.reason = run.value("reason", std::string("the candidate failed"));
        if (run.contains("check") && run["check"].is_string()) v.checks[run["check"].get<std::string>()] = "fail";
        if (run.value("cuda_error", false)) v.reason += " [CUDA error: its process was discarded]";
        return true;
    }
    return false;
}

// 3. Dynamic anti-hack checks of a run that completed: the first rejection found, or "".
std::string judge_dynamic(Verdict& v, const json& run, const json& c, const json& timing, const AssemblyPolicy& policy,
                          bool on_cpu) {
    std::string rejection;
    auto reject = [&](const std::string& why) {
        if (rejection.empty()) rejection = why;
    };
    const int launches = run.value("launches", 0);
    std::optional<double> share = on_cpu ? num(run, "cpu_custom_fraction") : num(run, "custom_fraction");
    v.custom_kernel_time_fraction = share;
    const bool launched = launches > 0 || (!on_cpu && share && *share > 0);
    // Kernels launched from C++ (load_inline) are seen only by the profiler's measurement after the
    // trials: a run the reference stopped before it (a wrong output) leaves that question open.
    const bool from_cpp = c.is_object() && c.contains("extensions_dir") && c["extensions_dir"].is_string();
    const bool unanswered =
        !launched && !on_cpu && from_cpp && !share && run.contains("stopped") && run["stopped"].is_string();
    v.checks["custom_kernel_launched"] = launched                                        ? "pass"
                                         : (policy.require_custom_kernel && !unanswered) ? "fail"
                                                                                         : "skip";
    if (!launched && !unanswered && policy.require_custom_kernel)
        reject("forward launched none of the candidate's own kernels");

    std::set<std::string> declared;
    if (c.is_object() && c.contains("library_ops"))
        for (auto& s : c["library_ops"]) declared.insert(s.get<std::string>());
    std::string undeclared;
    if (run.contains("library_ops") && run["library_ops"].is_object())
        for (auto& [op, cnt] : run["library_ops"].items())
            if (!declared.count(op)) undeclared += (undeclared.empty() ? "" : ", ") + op;
    if (!policy.strict) {
        v.checks["library_ops"] = "skip";
    } else if (!undeclared.empty()) {
        v.checks["library_ops"] = "fail";
        reject("forward computes with torch library operators (" + undeclared +
               "); the strict policy allows only allocation and layout operators");
    } else {
        v.checks["library_ops"] = "pass";
    }
    // The census sees every torch operator called from Python, but declared library operators
    // (KERNELZERO_LIBRARY_OPS) pass it and kernels launched from C++ (load_inline) hide from it: the
    // share of GPU time is enforced for every backend and format, however it was measured.
    if (policy.strict && !on_cpu && share && launched) {
        bool ok = *share >= policy.min_kernel_share;
        v.checks["kernel_time_share"] = ok ? "pass" : "fail";
        if (!ok)
            reject("only " + std::to_string(static_cast<int>(*share * 100)) +
                   "% of GPU time is spent in the candidate's own kernels");
    } else {
        v.checks["kernel_time_share"] = "skip";
    }

    // Measured in the check iterations (run without the spin): once the timed stream's end event has
    // completed, a device-wide synchronise that still waits (beyond the harness's own, measured
    // alongside) waits for other streams. Honest forwards leave nothing there; the bound allows
    // forward's own device time twice over plus the host's noise.
    auto ev = stats(timing.value("event_ms", json()));
    auto outside = stats(timing.value("outside_stream_ms", json()));
    if (ev && outside) {
        bool ok = outside->median <= 2.0 * ev->median + kOutsideStreamSlackMs;
        v.checks["timing_consistency"] = ok ? "pass" : "fail";
        if (!ok)
            reject("after forward returned, the device kept working " + std::to_string(outside->median) +
                   " ms while CUDA events on the current stream measured " + std::to_string(ev->median) +
                   " ms: work runs outside the timed stream");
    } else {
        v.checks["timing_consistency"] = "skip";
    }
    return rejection;
}

// What the comparisons say: the first wrong output, and the first slot that is missing though
// nothing stopped the run.
struct Comparisons {
    std::string incorrect, missing;
};

// 4. Correctness, from the reference side: each output as the child sent it. A run the reference
// stopped (its output was wrong, or its kernels decoys: the reference says which) has the later
// slots empty; a child that stopped without being told has them missing. A decoy found adds to
// `rejection` when it is still empty.
Comparisons judge_outputs(Verdict& v, const json& cmp, std::string& rejection) {
    Comparisons out;
    const bool stopped = cmp.contains("decided") && cmp["decided"].is_string();
    if (cmp.contains("ablation_matches") && cmp["ablation_matches"].is_boolean()) {
        bool matches = cmp["ablation_matches"].get<bool>();
        v.checks["kernel_ablation"] = matches ? "fail" : "pass";
        if (matches && rejection.empty())
            rejection = "the output is still correct when the candidate's kernels do not run: they are decoys";
    } else {
        v.checks["kernel_ablation"] = "skip";
    }

    bool meta_ok = true, meta_seen = false;
    // One slot's comparison: counts its outcome; returns whether it is present.
    auto judge = [&](const json& res, const std::string& label, const std::string& prefix) {
        if (!res.is_object()) {
            if (!stopped && out.missing.empty()) out.missing = label;
            return false;
        }
        if (res.contains("meta")) {
            meta_seen = true;
            meta_ok = meta_ok && res.value("meta", true);
        }
        if (!res.value("ok", false) && out.incorrect.empty())
            out.incorrect = prefix + res.value("reason", std::string());
        return true;
    };
    const json& trials = cmp.value("trials", json::array());
    double max_abs = 0, max_rel = 0;
    bool have_err = false;
    for (size_t i = 0; i < trials.size(); ++i) {
        const json& t = trials[i];
        if (!judge(t, "trial " + std::to_string(i), "trial " + std::to_string(i) + ": ")) continue;
        ++v.trials_run;
        if (t.value("ok", false)) ++v.trials_passed;
        if (auto a = num(t, "max_abs_err")) {
            max_abs = std::max(max_abs, *a);
            have_err = true;
        }
        if (auto b = num(t, "max_rel_err")) max_rel = std::max(max_rel, *b);
    }
    if (have_err) {
        v.max_abs_err = max_abs;
        v.max_rel_err = max_rel;
    }
    v.checks["correctness"] = !trials.empty() && v.trials_passed == static_cast<int>(trials.size()) ? "pass" : "fail";
    bool timing_ok = true, timing_seen = false;
    const json& timed = cmp.value("timing", json::array());
    for (size_t m = 0; m < timed.size(); ++m) {
        if (judge(timed[m], "timing set " + std::to_string(m),
                  "outputs of the timed iterations are wrong (results cached or stale between calls): ")) {
            timing_seen = true;
            timing_ok = timing_ok && timed[m].value("ok", false);
        }
    }
    v.checks["timing_outputs"] = !timing_seen ? "skip" : timing_ok ? "pass" : "fail";
    const json& recheck = cmp.value("recheck", json());
    if (judge(recheck, "the re-check", "wrong on fresh inputs after the timing loop: "))
        v.checks["recheck_after_timing"] = recheck.value("ok", false) ? "pass" : "fail";
    else
        v.checks["recheck_after_timing"] = "skip";
    if (meta_seen) v.checks["output_meta"] = meta_ok ? "pass" : "fail";
    return out;
}

// 5. The candidate's runtime and its speedups over the baselines.
void add_timing(Verdict& v, const json& timing, const json& baseline, bool on_cpu) {
    v.runtime_ms = runtime_of(timing);
    if (v.runtime_ms)
        v.timing_source =
            on_cpu ? "cpu_interpreter" : (stats(timing.value("event_ms", json())) ? "cuda_events" : "host_clock");
    if (baseline.is_object()) {
        if (auto e = runtime_of(baseline.value("eager", json()))) v.ref_eager_ms = e->median;
        if (auto e = runtime_of(baseline.value("compiled", json()))) v.ref_compile_ms = e->median;
    }
    if (v.runtime_ms && v.runtime_ms->median > 0) {
        if (v.ref_eager_ms) v.speedup_eager = *v.ref_eager_ms / v.runtime_ms->median;
        if (v.ref_compile_ms) v.speedup_compile = *v.ref_compile_ms / v.runtime_ms->median;
    }
}

}  // namespace

Verdict assemble_verdict(const JobReplies& r, const AssemblyPolicy& policy) {
    Verdict v;
    v.device = r.device;
    v.backend = r.backend;
    v.stages = r.stages;
    v.memory = r.memory;
    if (v.memory.is_object() && r.run.is_object() && r.run.contains("memory")) v.memory["candidate"] = r.run["memory"];
    if (r.run.is_object() && r.run.contains("stages") && r.run["stages"].is_object())
        v.stages["candidate"] = r.run["stages"];
    const bool on_cpu = r.device.rfind("cpu", 0) == 0;

    if (judge_static(v, r.compile, policy)) return v;
    if (judge_run(v, r.run, r.compare)) return v;
    // A run the reference stopped was never timed.
    const json timing = r.run.contains("timing") && r.run["timing"].is_object() ? r.run["timing"] : json::object();
    std::string rejection = judge_dynamic(v, r.run, r.compile, timing, policy, on_cpu);
    if (!r.compare.is_object()) {
        v.status = Status::infra_error;
        v.reason = "no comparison from the reference worker";
        return v;
    }
    const Comparisons outputs = judge_outputs(v, r.compare, rejection);
    if (!outputs.missing.empty() && outputs.incorrect.empty() && rejection.empty()) {
        v.status = Status::infra_error;
        v.reason = "the reference received no output for " + outputs.missing + " from a run that was not stopped";
        return v;
    }
    add_timing(v, timing, r.baseline, on_cpu);

    if (!rejection.empty()) {
        v.status = Status::rejected;
        v.reason = rejection;
    } else if (!outputs.incorrect.empty()) {
        v.status = Status::incorrect;
        v.reason = outputs.incorrect;
    } else {
        v.status = Status::correct;
        v.reason = "correct on " + std::to_string(v.trials_run) + " trials, after timing, and on the timed iterations";
        if (on_cpu) v.reason += "; timings are Triton CPU-interpreter figures, not GPU performance";
    }
    if (v.speedup_eager && *v.speedup_eager > policy.speedup_review_bound && v.status == Status::correct && !on_cpu) {
        v.review = true;
        v.checks["speedup_bound"] = "fail";
        v.reason += "; speedup above " + std::to_string(policy.speedup_review_bound) + "x: flagged for review";
    } else {
        v.checks["speedup_bound"] = v.speedup_eager ? "pass" : "skip";
    }
    return v;
}

}  // namespace kz
