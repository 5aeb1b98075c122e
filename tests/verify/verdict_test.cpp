// The verdict rules, one by one, on hand-made worker replies.
#include "verify/verdict.h"

#include <gtest/gtest.h>

using kz::Status;
using nlohmann::json;

namespace {

json passing_checks() {
    json c = json::object();
    for (const char* n : {"syntax", "defines_model_new", "custom_kernel", "forbidden_imports", "forbidden_calls",
                          "exception_handling", "monkey_patching", "introspection", "file_io", "environment",
                          "process_control", "threads_and_streams", "model_tampering"})
        c[n] = "pass";
    return c;
}

json trial(bool ok, double err = 0.001) {
    return {{"ok", ok},
            {"reason", ok ? "" : "3 of 10 elements outside atol"},
            {"max_abs_err", err},
            {"max_rel_err", err * 2},
            {"meta", true}};
}

kz::JobReplies good(const std::string& device = "cuda") {
    kz::JobReplies r;
    r.device = device;
    r.backend = "triton";
    r.compile = {{"ok", true},       {"checks", passing_checks()},   {"reasons", json::array()},
                 {"compile_s", 0.1}, {"library_ops", json::array()}, {"compile_error", nullptr}};
    r.run = {{"ok", true},
             {"launches", 5},
             {"custom_fraction", 0.9},
             {"cpu_custom_fraction", 0.4},
             {"library_ops", json::object()},
             {"checks", {{"output_meta", "pass"}, {"inputs_unchanged", "pass"}}},
             {"compile_s", 0.5},
             {"timing",
              {{"event_ms", {{"median", 2.0}, {"min", 1.9}, {"max", 2.5}, {"n", 100}}},
               {"host_ms", {{"median", 2.1}, {"min", 2.0}, {"max", 2.6}, {"n", 100}}},
               {"outside_stream_ms", {{"median", 0.01}, {"min", 0.0}, {"max", 0.05}, {"n", 100}}}}}};
    r.compare = {{"ok", true},
                 {"trials", {trial(true), trial(true, 0.004), trial(true), trial(true), trial(true)}},
                 {"recheck", trial(true)},
                 {"timing", {trial(true), trial(true), trial(true)}},
                 {"ablation_matches", false}};
    r.baseline = {{"eager", {{"event_ms", {{"median", 4.0}}}}}, {"compiled", {{"event_ms", {{"median", 3.0}}}}}};
    return r;
}

kz::AssemblyPolicy strict() { return {}; }

}  // namespace

TEST(Verdict, CorrectWithSpeedupsAndErrors) {
    auto v = kz::assemble_verdict(good(), strict());
    EXPECT_EQ(v.status, Status::correct) << v.reason;
    EXPECT_EQ(v.trials_passed, 5);
    EXPECT_EQ(v.trials_run, 5);
    EXPECT_DOUBLE_EQ(*v.max_abs_err, 0.004);
    EXPECT_DOUBLE_EQ(*v.speedup_eager, 2.0);
    EXPECT_DOUBLE_EQ(*v.speedup_compile, 1.5);
    EXPECT_DOUBLE_EQ(v.runtime_ms->median, 2.0);
    EXPECT_EQ(v.timing_source, "cuda_events");
    EXPECT_DOUBLE_EQ(*v.custom_kernel_time_fraction, 0.9);
    EXPECT_DOUBLE_EQ(v.compile_s, 0.6);
    auto j = v.to_json();
    EXPECT_EQ(j["status"], "correct");
    EXPECT_EQ(j["correct"], true);
    EXPECT_EQ(j["trials"]["passed"], 5);
    for (const char* key :
         {"max_rel_err", "runtime_ms", "ref_eager_ms", "ref_compile_ms", "speedup_compile",
          "custom_kernel_time_fraction", "checks", "compile_s", "total_s", "device", "backend", "log"})
        EXPECT_TRUE(j.contains(key)) << key;
}

TEST(Verdict, SyntaxAndMissingModelNewAreFormatErrors) {
    auto r = good();
    r.compile["checks"]["syntax"] = "fail";
    r.compile["reasons"] = {"syntax: candidate is not valid Python"};
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::format_error);
    r = good();
    r.compile["checks"]["defines_model_new"] = "fail";
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::format_error);
}

TEST(Verdict, AnyStaticFailureRejects) {
    auto r = good();
    r.compile["checks"]["monkey_patching"] = "fail";
    r.compile["reasons"] = {"monkey_patching: assigns into torch (line 3)"};
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::rejected);
    EXPECT_NE(v.reason.find("assigns into torch"), std::string::npos);
}

TEST(Verdict, BuildFailureIsCompileErrorWithLog) {
    auto r = good();
    r.compile["compile_error"] = "NVRTC compilation failed:\nkernel.cu(3): error: identifier \"y\" is undefined";
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::compile_error);
    EXPECT_NE(v.log.find("undefined"), std::string::npos);
}

TEST(Verdict, RunFailureKindsMapToStatuses) {
    for (auto [kind, st] : {std::pair{"timeout", Status::timeout},
                            {"runtime_error", Status::runtime_error},
                            {"compile_error", Status::compile_error},
                            {"incorrect", Status::incorrect},
                            {"format_error", Status::format_error},
                            {"infra_error", Status::infra_error}}) {
        auto r = good();
        r.run = {{"ok", false}, {"kind", kind}, {"reason", "because"}, {"check", "output_meta"}};
        auto v = kz::assemble_verdict(r, strict());
        EXPECT_EQ(v.status, st) << kind;
        EXPECT_EQ(v.checks["output_meta"], "fail");
    }
}

TEST(Verdict, NoOwnKernelLaunchedRejects) {
    auto r = good();
    r.run["launches"] = 0;
    r.run["custom_fraction"] = 0.0;
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::rejected);
    EXPECT_EQ(v.checks["custom_kernel_launched"], "fail");
}

TEST(Verdict, LoadInlineKernelsCountThroughTheProfiler) {
    auto r = good();
    r.run["launches"] = 0;  // C++ launches are invisible to the Python launch hooks
    r.run["custom_fraction"] = 0.95;
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::correct);
}

TEST(Verdict, LoadInlineRunStoppedBeforeTheProfilerIsIncorrectNotRejected) {
    // The profiler measures after the trials; a wrong first output stops the run before it.
    auto r = good();
    r.compile["extensions_dir"] = "/cache/inline/abc";
    r.run["launches"] = 0;
    r.run["custom_fraction"] = nullptr;
    r.run["stopped"] = "trial 0";
    r.run.erase("timing");
    r.compare["decided"] = "trial 0";
    r.compare["trials"] = {trial(false), nullptr, nullptr, nullptr, nullptr};
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::incorrect) << v.reason;
    EXPECT_EQ(v.checks["custom_kernel_launched"], "skip");
    // Launches the hooks see (Triton, NVRTC) are known however early the run stopped.
    r.compile["extensions_dir"] = nullptr;
    v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::rejected);
    EXPECT_EQ(v.checks["custom_kernel_launched"], "fail");
}

TEST(Verdict, LibraryOpsRejectedUnderStrictOnlyUnlessDeclared) {
    auto r = good();
    r.run["library_ops"] = {{"mm", 5}};
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::rejected);
    EXPECT_NE(v.reason.find("mm"), std::string::npos);
    kz::AssemblyPolicy lenient;
    lenient.strict = false;
    EXPECT_EQ(kz::assemble_verdict(r, lenient).status, Status::correct);
    r.compile["library_ops"] = {"mm"};
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::correct);
}

// Declared library operators pass the census and C++ launches hide from it: the share of GPU time is
// enforced whatever measured it (the profiler for load_inline, events around hooked launches).
TEST(Verdict, SmallKernelShareRejectsUnderStrictOnCudaWhateverMeasuredIt) {
    for (const char* source : {"profiler", "events"}) {
        auto r = good();
        r.run["custom_fraction"] = 0.1;
        r.run["share_source"] = source;
        r.run["library_ops"] = {{"mm", 5}};
        r.compile["library_ops"] = {"mm"};
        auto v = kz::assemble_verdict(r, strict());
        EXPECT_EQ(v.status, Status::rejected) << source;
        EXPECT_EQ(v.checks["kernel_time_share"], "fail") << source;
        EXPECT_NE(v.reason.find("10%"), std::string::npos) << v.reason;
        kz::AssemblyPolicy lenient;
        lenient.strict = false;
        v = kz::assemble_verdict(r, lenient);
        EXPECT_EQ(v.status, Status::correct) << source;
        EXPECT_EQ(v.checks["kernel_time_share"], "skip");
        r.device = "cpu";  // the CPU share is informative only
        EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::correct) << source;
    }
}

TEST(Verdict, DeviceWorkAfterForwardReturnedRejects) {
    auto r = good();
    r.run["timing"]["event_ms"]["median"] = 0.05;
    r.run["timing"]["outside_stream_ms"] = {{"median", 3.0}, {"min", 2.9}, {"max", 3.2}, {"n", 100}};
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::rejected);
    EXPECT_EQ(v.checks["timing_consistency"], "fail");
    // A slow host alone (late wake-ups, Python overhead) is not work outside the stream.
    r.run["timing"]["host_ms"]["median"] = 3.0;
    r.run["timing"]["outside_stream_ms"]["median"] = 0.08;
    v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::correct);
    EXPECT_EQ(v.checks["timing_consistency"], "pass");
}

TEST(Verdict, DecoyKernelsRejectedThroughAblation) {
    auto r = good();
    r.compare["ablation_matches"] = true;
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::rejected);
    EXPECT_EQ(v.checks["kernel_ablation"], "fail");
    kz::AssemblyPolicy lenient;
    lenient.strict = false;
    EXPECT_EQ(kz::assemble_verdict(r, lenient).status, Status::rejected);
}

TEST(Verdict, FailedTrialIsIncorrect) {
    auto r = good();
    r.compare["trials"][3] = trial(false, 0.5);
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::incorrect);
    EXPECT_EQ(v.trials_passed, 4);
    EXPECT_NE(v.reason.find("trial 3"), std::string::npos);
}

TEST(Verdict, StaleTimedOutputsAndRecheckAreIncorrect) {
    auto r = good();
    r.compare["timing"][1] = trial(false);
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::incorrect);
    EXPECT_EQ(v.checks["timing_outputs"], "fail");
    r = good();
    r.compare["recheck"] = trial(false);
    v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::incorrect);
    EXPECT_EQ(v.checks["recheck_after_timing"], "fail");
}

TEST(Verdict, RejectionOutranksIncorrect) {
    auto r = good();
    r.compare["trials"][0] = trial(false);
    r.run["library_ops"] = {{"relu", 5}};
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::rejected);
}

TEST(Verdict, HugeSpeedupIsFlaggedNotChanged) {
    auto r = good();
    r.baseline["eager"]["event_ms"]["median"] = 100.0;
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::correct);
    EXPECT_TRUE(v.review);
    EXPECT_EQ(v.checks["speedup_bound"], "fail");
}

TEST(Verdict, CpuTimingsAreMarked) {
    auto r = good("cpu");
    r.run["timing"] = {{"event_ms", nullptr}, {"host_ms", {{"median", 12.0}, {"min", 11.0}, {"max", 13.0}, {"n", 10}}}};
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::correct);
    EXPECT_EQ(v.timing_source, "cpu_interpreter");
    EXPECT_NE(v.reason.find("CPU-interpreter"), std::string::npos);
    EXPECT_DOUBLE_EQ(*v.custom_kernel_time_fraction, 0.4);
}

TEST(Verdict, MissingRepliesAreInfraErrors) {
    auto r = good();
    r.run = nullptr;
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::infra_error);
    r = good();
    r.compare = nullptr;
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::infra_error);
}

TEST(Verdict, UnreadableOutputsAreIncorrect) {
    auto r = good();
    r.compare["trials"][0] = {{"ok", false},
                              {"reason", "the candidate's output cannot be read: bad handle"},
                              {"meta", true},
                              {"unreadable", true}};
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::incorrect);
    EXPECT_NE(v.reason.find("cannot be read"), std::string::npos);
}

// The reference stops a run once it is decided: the slots after it were never sent.
TEST(Verdict, StoppedRunIsJudgedOnWhatWasCompared) {
    auto r = good();
    r.run["stopped"] = "trial 1";
    r.compare["decided"] = "trial 1";
    r.run.erase("timing");
    r.compare["trials"] = {trial(true), trial(false), nullptr, nullptr, nullptr};
    r.compare["timing"] = {nullptr, nullptr, nullptr};
    r.compare["recheck"] = nullptr;
    r.compare.erase("ablation_matches");
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::incorrect) << v.reason;
    EXPECT_EQ(v.trials_run, 2);
    EXPECT_EQ(v.trials_passed, 1);
    EXPECT_EQ(v.checks["correctness"], "fail");
    EXPECT_EQ(v.checks["timing_outputs"], "skip");
    EXPECT_EQ(v.checks["recheck_after_timing"], "skip");
    EXPECT_NE(v.reason.find("trial 1"), std::string::npos);
    EXPECT_FALSE(v.runtime_ms.has_value());
    // A wrong structure is output_meta's failure.
    r.compare["trials"][1] = {{"ok", false}, {"reason", "output is a tuple, expected a tensor"}, {"meta", false}};
    EXPECT_EQ(kz::assemble_verdict(r, strict()).checks["output_meta"], "fail");
    // Stopped at the ablation: the kernels are decoys.
    r = good();
    r.run["stopped"] = "ablation 0";
    r.compare["decided"] = "ablation 0";
    r.run.erase("timing");
    r.compare["timing"] = {nullptr, nullptr, nullptr};
    r.compare["recheck"] = nullptr;
    r.compare["ablation_matches"] = true;
    v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::rejected);
    EXPECT_EQ(v.checks["kernel_ablation"], "fail");
}

TEST(Verdict, AnOutputMissingFromAnUnstoppedRunIsTheVerifiers) {
    auto r = good();
    r.compare["timing"][2] = nullptr;
    auto v = kz::assemble_verdict(r, strict());
    EXPECT_EQ(v.status, Status::infra_error);
    EXPECT_NE(v.reason.find("timing set 2"), std::string::npos);
    // The child saying it was stopped is not enough: only the reference decides.
    r = good();
    r.run["stopped"] = "trial 0";
    r.run.erase("timing");
    r.compare["trials"] = {trial(true), nullptr, nullptr, nullptr, nullptr};
    r.compare["timing"] = {nullptr, nullptr, nullptr};
    r.compare["recheck"] = nullptr;
    EXPECT_EQ(kz::assemble_verdict(r, strict()).status, Status::infra_error);
}

TEST(Verdict, ReferenceSideFailuresAreTheVerifiers) {
    for (const char* key : {"task_error", "memory_failure", "channel_error"}) {
        auto r = good();
        r.compare[key] = std::string("what happened");
        auto v = kz::assemble_verdict(r, strict());
        EXPECT_EQ(v.status, Status::infra_error) << key;
        EXPECT_NE(v.reason.find("what happened"), std::string::npos);
    }
}

// A verdict that travelled (a farm daemon's, as JSON) reads back as the same verdict.
TEST(Verdict, JsonRoundTripIsExact) {
    auto v = kz::assemble_verdict(good(), strict());
    ASSERT_EQ(v.status, Status::correct);
    EXPECT_EQ(kz::Verdict::from_json(v.to_json()).to_json(), v.to_json());
    auto e = kz::early_verdict(Status::format_error, "no code block", "cpu", "triton");
    EXPECT_EQ(kz::Verdict::from_json(e.to_json()).to_json(), e.to_json());
    EXPECT_THROW(kz::Verdict::from_json(nlohmann::json{{"status", "maybe"}}), std::invalid_argument);
    EXPECT_THROW(kz::Verdict::from_json(nlohmann::json::object()), std::invalid_argument);
}
