// Runs a suite manifest (known-good, adversarial, bad input) through the real verifier and asserts the
// exact verdict of every case on this device:
//   suite_test --manifest M.json --device cpu|cuda [--lanes N] [--timing-iters N] [gtest flags]
// A manifest is {"cases": [{"name", "task", "candidate", "backend", "timeout"?, "repeat"?,
//   "expect": {"cpu"|"cuda": {"status": S, "failed_any": [check, ...]?, "reason_contains": T?,
//   "log_contains": T?}}}],
//   "shared_device"?: true}, paths relative to it. A case with "repeat": N is verified N times (as
//   name#1..N); "shared_device" asserts that some job was admitted beside others on the device.
// Cases without an expectation for the device are not run. The build cache is --cache-dir, else
// $KZ_CACHE_DIR, else a fresh temporary directory.
#include <gtest/gtest.h>

#include <filesystem>
#include <iostream>
#include <mutex>
#include <thread>

#include "common/files.h"
#include "verify/sources.h"
#include "verify/verifier.h"

using nlohmann::json;

namespace {

struct Case {
    std::string name;
    kz::Job job;
    std::string load_error;
    json expect;
    kz::Verdict verdict;
};

class CaseTest : public ::testing::Test {
public:
    explicit CaseTest(const Case* c) : c_(c) {}
    void TestBody() override {
        ASSERT_TRUE(c_->load_error.empty()) << c_->load_error;
        const auto& v = c_->verdict;
        std::string want = c_->expect.value("status", "");
        EXPECT_EQ(kz::to_string(v.status), want) << c_->name << ": " << v.reason << "\n" << v.log;
        if (c_->expect.contains("reason_contains")) {
            EXPECT_NE(v.reason.find(c_->expect["reason_contains"].get<std::string>()), std::string::npos)
                << c_->name << ": " << v.reason;
        }
        if (c_->expect.contains("log_contains")) {
            EXPECT_NE(v.log.find(c_->expect["log_contains"].get<std::string>()), std::string::npos)
                << c_->name << ": the log does not say where it stopped:\n"
                << v.log;
        }
        if (c_->expect.contains("failed_any")) {
            bool any = false;
            std::string listed;
            for (auto& chk : c_->expect["failed_any"]) {
                auto it = v.checks.find(chk.get<std::string>());
                any = any || (it != v.checks.end() && it->second == "fail");
                listed += " " + chk.get<std::string>();
            }
            std::string failed;
            for (auto& [k, s] : v.checks)
                if (s == "fail") failed += " " + k;
            EXPECT_TRUE(any) << c_->name << ": expected one of [" << listed << " ] to fail; failed: [" << failed
                             << " ]; reason: " << v.reason;
        }
    }

private:
    const Case* c_;
};

std::vector<Case> g_cases;

}  // namespace

int main(int argc, char** argv) {
    ::testing::InitGoogleTest(&argc, argv);
    std::string manifest, device = "cpu", cache_dir;
    int lanes = 1, timing_iters = 10, compile_workers = 0;
    for (int i = 1; i + 1 < argc; ++i) {
        std::string a = argv[i];
        if (a == "--manifest")
            manifest = argv[++i];
        else if (a == "--device")
            device = argv[++i];
        else if (a == "--lanes")
            lanes = std::stoi(argv[++i]);
        else if (a == "--timing-iters")
            timing_iters = std::stoi(argv[++i]);
        else if (a == "--compile-workers")
            compile_workers = std::stoi(argv[++i]);
        else if (a == "--cache-dir")
            cache_dir = argv[++i];
    }
    if (manifest.empty()) {
        std::cerr << "suite_test: --manifest is required\n";
        return 2;
    }
    json m = json::parse(kz::read_file(manifest));
    std::string base = std::filesystem::path(manifest).parent_path().string();
    const std::string dev_key = device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
    std::string suite = std::filesystem::path(manifest).parent_path().filename().string();
    for (auto& c : m["cases"]) {
        if (!c.contains("expect") || !c["expect"].contains(dev_key)) continue;
        const int repeat = c.value("repeat", 1);
        for (int r = 1; r <= repeat; ++r) {
            Case k;
            k.name = c.value("name", "?") + (repeat > 1 ? "#" + std::to_string(r) : "");
            k.expect = c["expect"][dev_key];
            k.job.id = k.name;
            k.job.backend = c.value("backend", "");
            k.job.timeout_s = c.value("timeout", 0.0);
            std::string err;
            auto t = kz::load_source(c.value("task", ""), base, err);
            if (!t)
                k.load_error = "task: " + err;
            else
                k.job.task_source = t->text;
            auto cand = kz::load_source(c.value("candidate", ""), base, err);
            if (!cand)
                k.load_error = "candidate: " + err;
            else
                k.job.candidate_source = cand->text;
            g_cases.push_back(std::move(k));
        }
    }

    kz::VerifyOptions o;
    o.device = device;
    o.lanes = lanes;
    o.compile_workers = compile_workers > 0 ? compile_workers : lanes;
    if (cache_dir.empty())
        if (const char* env = std::getenv("KZ_CACHE_DIR"); env && *env) cache_dir = env;  // shared across suites
    o.timing_iters = timing_iters;
    o.cache_dir = cache_dir.empty()
                      ? kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-suite-cache-")
                      : cache_dir;
    kz::Verifier verifier(o);
    try {
        verifier.start();
    } catch (const std::exception& e) {
        std::cerr << "suite_test: the verifier cannot start: " << e.what() << "\n";
        return 3;
    }
    // Verify every case up front, with as many jobs in flight as the verifier has lanes (plus one
    // compiling), then assert case by case.
    std::mutex mu;
    size_t next = 0;
    auto t0 = kz::Clock::now();
    std::vector<std::thread> threads;
    for (int i = 0; i < lanes + o.compile_workers; ++i)
        threads.emplace_back([&] {
            for (;;) {
                Case* c;
                {
                    std::lock_guard lock(mu);
                    if (next >= g_cases.size()) return;
                    c = &g_cases[next++];
                }
                if (c->load_error.empty()) c->verdict = verifier.verify(c->job);
            }
        });
    for (auto& t : threads) t.join();
    std::cerr << "suite_test: verified " << g_cases.size() << " cases on " << device << " in "
              << std::chrono::duration<double>(kz::Clock::now() - t0).count() << " s\n";
    for (auto& c : g_cases) {
        const Case* p = &c;
        ::testing::RegisterTest(suite.c_str(), c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                                [p]() -> ::testing::Test* { return new CaseTest(p); });
    }
    if (const auto* budget = verifier.memory_budget()) {
        std::cerr << "suite_test: device memory for jobs " << kz::gib(budget->capacity()) << ", at most "
                  << kz::gib(budget->peak_in_use()) << " admitted at once, " << verifier.lanes() << " lanes\n";
        // Each job's memory, so that a log shows how the device was shared (and any job run again alone).
        for (auto& c : g_cases) {
            const json& m = c.verdict.memory;
            if (!m.is_object()) continue;
            const json cand = m.value("candidate", json::object());
            std::cerr << "suite_test: memory " << c.name << ": " << kz::to_string(c.verdict.status) << ", admitted "
                      << kz::gib(m.value("admitted", int64_t{0})) << " beside "
                      << kz::gib(m.value("beside", int64_t{0})) << ", candidate peak "
                      << kz::gib(cand.is_object() ? cand.value("peak_bytes", int64_t{0}) : 0) << " of cap "
                      << kz::gib(m.value("candidate_cap", int64_t{0}))
                      << (m.contains("first_run") ? "; run again alone after: " +
                                                        m["first_run"].value("reason", std::string()).substr(0, 200)
                                                  : "")
                      << "\n";
        }
    }
    if (m.value("shared_device", false) && dev_key == "cuda") {
        // Jobs must have run beside each other (in their final run, or in a first run that was then
        // repeated alone), or the suite shows nothing about sharing.
        int beside = 0;
        for (auto& c : g_cases) {
            const json& m = c.verdict.memory;
            if (!m.is_object()) continue;
            if (m.value("beside", int64_t{0}) > 0 ||
                (m.contains("first_run") && m["first_run"].value("beside", int64_t{0}) > 0))
                ++beside;
        }
        ::testing::RegisterTest(suite.c_str(), "jobs_shared_the_device", nullptr, nullptr, __FILE__, __LINE__,
                                [beside]() -> ::testing::Test* {
                                    struct T : ::testing::Test {
                                        int n;
                                        explicit T(int k) : n(k) {}
                                        void TestBody() override {
                                            EXPECT_GT(n, 0) << "no job was admitted beside another";
                                        }
                                    };
                                    return new T(beside);
                                });
    }
    return RUN_ALL_TESTS();
}
