// TaskValidator with several workers: validations from several threads at once give the verdicts that
// one worker gives them one by one (each worker has its own reference process and scratch directory);
// with warm_up, every worker is started ahead of its first module; each worker's Inductor compile threads are its share
// of the CPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <unistd.h>

#include "common/files.h"
#include "common/host.h"
#include "common/memory_budget.h"
#include "tasks/symbolic.h"
#include "tasks/validation.h"

namespace {

TEST(TaskValidatorPool, ConcurrentValidationsMatchSerialOnes) {
    auto catalog = kz::ApiCatalog::load(kz::ApiCatalog::default_path());
    std::mt19937_64 rng(7);
    std::vector<kz::GeneratedTask> tasks;
    for (int i = 0; i < 4; ++i) {
        kz::ApiSet set = kz::sample_api_set(catalog, i % 2 ? 2 : 1, rng);
        tasks.push_back(kz::generate_task(catalog, set, kz::SizeProfile::small, rng));
    }
    // A module that fails (it ignores its input): the pool must not mix up whose verdict is whose.
    kz::GeneratedTask ignores_input;
    ignores_input.source =
        "import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.zeros(3)\n"
        "def get_inputs():\n    return [torch.randn(4, 4)]\ndef get_init_inputs():\n    return []\n";
    ignores_input.apis = tasks[0].apis;
    tasks.push_back(ignores_input);
    kz::ValidationOptions one;
    kz::TaskValidator serial(catalog, one);
    std::vector<nlohmann::json> want;
    for (const auto& t : tasks) {
        auto v = serial.validate(t.source, t.apis);
        want.push_back({{"valid", v.valid}, {"checks", v.checks}});
    }
    kz::ValidationOptions three;
    three.workers = 3;
    kz::TaskValidator pool(catalog, three);
    EXPECT_EQ(pool.workers(), 3);
    std::vector<nlohmann::json> got(tasks.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < tasks.size(); ++i)
        threads.emplace_back([&, i] {
            auto v = pool.validate(tasks[i].source, tasks[i].apis);
            got[i] = {{"valid", v.valid}, {"checks", v.checks}};
        });
    for (auto& t : threads) t.join();
    for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(got[i], want[i]) << "module " << i;
    EXPECT_FALSE(want.back()["valid"].get<bool>());
    int valid = 0;
    for (const auto& w : want) valid += w["valid"].get<bool>();
    EXPECT_GE(valid, 1) << "no symbolic module was valid: the comparison would not mean much";
}

}  // namespace

// warm_up: every worker starts when the validator is made, not on its first module. One validation
// runs; both workers' processes were started (each logs from its start), and the verdict is the
// one a cold validator gives.
TEST(TaskValidatorPool, WarmUpStartsEveryWorkerAhead) {
    auto catalog = kz::ApiCatalog::load(kz::ApiCatalog::default_path());
    std::mt19937_64 rng(11);
    kz::ApiSet set = kz::sample_api_set(catalog, 1, rng);
    kz::GeneratedTask task = kz::generate_task(catalog, set, kz::SizeProfile::small, rng);
    const std::string dir = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-warm-test-");
    kz::ValidationOptions cold;
    const auto want = kz::TaskValidator(catalog, cold).validate(task.source, task.apis);
    {
        kz::ValidationOptions warm;
        warm.workers = 2;
        warm.warm_up = true;
        warm.work_dir = dir;
        kz::TaskValidator pool(catalog, warm);
        const auto got = pool.validate(task.source, task.apis);
        EXPECT_EQ(got.valid, want.valid) << got.reason;
        EXPECT_EQ(got.checks, want.checks);
        // The other worker may still be warming; it has been started either way.
        EXPECT_TRUE(std::filesystem::exists(dir + "/reference.log"));
        EXPECT_TRUE(std::filesystem::exists(dir + "/reference-1.log"));
    }
    std::filesystem::remove_all(dir);
}

TEST(TaskValidatorPool, CompileThreadsShareTheCpus) {
    const int all = kz::validation_compile_threads(1, 1);  // every CPU this process may run on
    EXPECT_GE(all, 1);
    EXPECT_LE(all, static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN)));
    EXPECT_EQ(kz::validation_compile_threads(3, 1), std::max(1, all / 3));
    EXPECT_EQ(kz::validation_compile_threads(4, 2), std::max(1, all / 8));  // 2 local ranks, 4 workers each
    EXPECT_EQ(kz::validation_compile_threads(1 << 20, 4), 1);               // never below one
    EXPECT_EQ(kz::validation_compile_threads(2, 0), kz::validation_compile_threads(2, 1));
}

namespace {

// A module that runs out of memory the first time it runs (a marker file says it did), and after
// that fails unless its validation is the only one under way (the validator's scratch directories
// hold one validate-* directory per validation running).
std::string runs_out_once(const std::string& marker, const std::string& work_dir) {
    return "import glob, os, torch\n"
           "class Model(torch.nn.Module):\n"
           "    def forward(self, x):\n"
           "        if not os.path.exists('" +
           marker +
           "'):\n"
           "            open('" +
           marker +
           "', 'w').close()\n"
           "            raise torch.OutOfMemoryError('CUDA out of memory. Tried to allocate 8.00 GiB (a test)')\n"
           "        running = glob.glob('" +
           work_dir + "/validate-*') + glob.glob('" + work_dir +
           "/scratch-*/validate-*')\n"
           "        if len(running) != 1:\n"
           "            raise RuntimeError(f'{len(running) - 1} validations run beside this one')\n"
           "        return torch.tanh(x) * 2.0 + x\n"
           "def get_inputs():\n    return [torch.randn(64, 64)]\n"
           "def get_init_inputs():\n    return []\n";
}

}  // namespace

// A validation that runs out of memory beside others is run again once every worker is idle, and
// that run's verdict stands; with one worker there is no neighbour to blame, and the failure stands.
TEST(TaskValidatorPool, OutOfMemoryIsValidatedAgainAlone) {
    auto catalog = kz::ApiCatalog::load(kz::ApiCatalog::default_path());
    const std::string dir = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-oom-test-");
    const std::string slow =
        "import time, torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        time.sleep(0.2)\n"
        "        return torch.tanh(x) * 2.0 + x\n"
        "def get_inputs():\n    return [torch.randn(64, 64)]\n"
        "def get_init_inputs():\n    return []\n";
    {
        kz::ValidationOptions two;
        two.workers = 2;
        two.work_dir = dir + "/pool";
        kz::TaskValidator pool(catalog, two);
        kz::TaskValidation neighbour, oom;
        std::thread t([&] { neighbour = pool.validate(slow, {}); });
        std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the neighbour has its worker
        oom = pool.validate(runs_out_once(dir + "/ran-out", two.work_dir), {});
        t.join();
        EXPECT_TRUE(std::filesystem::exists(dir + "/ran-out")) << "the module never ran out of memory";
        EXPECT_TRUE(oom.valid) << oom.reason;
        EXPECT_EQ(oom.info.value("alone", false), true);
        EXPECT_TRUE(neighbour.valid) << neighbour.reason;
        EXPECT_FALSE(neighbour.info.contains("alone"));
    }
    {
        kz::ValidationOptions one;
        one.work_dir = dir + "/one";
        kz::TaskValidator single(catalog, one);
        const auto v = single.validate(runs_out_once(dir + "/ran-out-1", one.work_dir), {});
        EXPECT_FALSE(v.valid);
        EXPECT_EQ(v.checks.at("runs"), "fail");
        EXPECT_NE(v.reason.find("out of memory"), std::string::npos) << v.reason;
        EXPECT_FALSE(v.info.contains("alone"));
    }
    std::filesystem::remove_all(dir);
}

// With the verifier's device budget shared, a validation holds its worker's cap of it while it runs:
// it waits while the jobs beside it leave too little, runs once they leave room, and gives its share
// back when done. A budget smaller than the cap is held whole.
TEST(TaskValidatorPool, AValidationHoldsItsShareOfASharedDeviceBudgetWhileItRuns) {
    auto catalog = kz::ApiCatalog::load(kz::ApiCatalog::default_path());
    const std::string module =
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.tanh(x) * 2.0 + x\n"
        "def get_inputs():\n    return [torch.randn(64, 64)]\n"
        "def get_init_inputs():\n    return []\n";
    kz::ValidationOptions opts;
    opts.max_memory_mb = 64;
    const int64_t cap = 3 * 64 * kz::kMiB + kz::kGiB;
    kz::DeviceMemoryBudget budget(2 * kz::kGiB);
    opts.device_budget = &budget;
    EXPECT_EQ(kz::validation_memory_hold(opts), cap);
    kz::TaskValidator validator(catalog, opts);

    std::atomic<bool> never{false};
    auto job = budget.acquire(kz::kGiB, never);  // leaves less than the cap
    std::atomic<bool> done{false};
    kz::TaskValidation v;
    std::thread t([&] {
        v = validator.validate(module, {});
        done = true;
    });
    for (int i = 0; i < 3000 && budget.waiting() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    ASSERT_EQ(budget.waiting(), 1) << "the validation never asked the budget for its share";
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    EXPECT_FALSE(done.load()) << "the validation ran while the job left it too little";
    job.release();
    t.join();
    EXPECT_TRUE(v.valid) << v.reason;
    EXPECT_EQ(budget.in_use(), 0) << "the validation kept its share";
    EXPECT_EQ(budget.peak_in_use(), cap);  // the job's, then the validation's alone: never both

    kz::DeviceMemoryBudget small(kz::kGiB);
    opts.device_budget = &small;
    EXPECT_EQ(kz::validation_memory_hold(opts), kz::kGiB);
    opts.device_budget = nullptr;
    EXPECT_EQ(kz::validation_memory_hold(opts), 0);
}
