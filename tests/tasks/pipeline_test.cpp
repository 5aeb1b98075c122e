// TaskPipeline::screen: what the store and the benchmarks decide before any validation. A near-duplicate
// of a stored task is turned down without starting a reference worker, and submit() stores it with the
// reason it would have got after validation.
#include "tasks/pipeline.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/files.h"

namespace fs = std::filesystem;

namespace {

const char* kModule =
    "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x) * 2\n\n\n"
    "def get_inputs():\n    return [torch.randn(8, 32)]\n\n\ndef get_init_inputs():\n    return []\n";
const char* kOther =
    "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x, y):\n        return torch.softmax(x @ "
    "y, -1)\n\n\n"
    "def get_inputs():\n    return [torch.randn(16, 64), torch.randn(64, 8)]\n\n\ndef get_init_inputs():\n    return "
    "[]\n";

// What the reference worker reports for a module that passes every check it runs.
kz::TaskValidation passed() {
    kz::TaskValidation v;
    for (const char* c : {"format", "runs", "compile", "deterministic", "no_randomness", "non_degenerate",
                          "input_dependent", "well_conditioned", "uses_api_set", "runtime_band", "memory_band"})
        v.checks[c] = "pass";
    v.settle();
    return v;
}

}  // namespace

TEST(TaskPipeline, ScreenTurnsDownNearDuplicatesWithoutAWorker) {
    const std::string dir = kz::make_temp_dir(fs::temp_directory_path().string(), "kz-pipeline-test-");
    {
        auto catalog = kz::ApiCatalog::load(kz::ApiCatalog::default_path());
        kz::TaskStore store(dir + "/tasks.db");
        kz::PipelineOptions opts;
        opts.validation.work_dir = dir + "/validation";
        fs::create_directories(opts.validation.work_dir);
        kz::TaskPipeline pipeline(catalog, store, opts);

        EXPECT_FALSE(pipeline.screen(kModule)) << "nothing is stored yet";
        const kz::TaskValidation ok = passed();
        kz::TaskRecord first = pipeline.submit(kModule, {"relu"}, 1, "symbolic", "run/iter-1", &ok);
        ASSERT_TRUE(first.valid) << first.reason;

        // The same module with a comment and other spacing: the same normalised source.
        const std::string again = std::string("# a copy\n") + kModule + "\n\n";
        auto s = pipeline.screen(again);
        ASSERT_TRUE(s);
        EXPECT_FALSE(s->valid);
        EXPECT_EQ(s->checks.at("novel"), "fail");
        EXPECT_NE(s->reason.find("stored task " + std::to_string(first.id)), std::string::npos) << s->reason;
        EXPECT_EQ(s->checks.at("runs"), "skip") << "the worker's checks were not run";
        EXPECT_FALSE(pipeline.screen(kOther)) << "a different module is not screened out";

        kz::TaskRecord dup = pipeline.submit(again, {"relu"}, 1, "symbolic", "run/iter-2", &*s);
        EXPECT_FALSE(dup.valid);
        EXPECT_EQ(dup.reason.rfind("novel: ", 0), 0u) << dup.reason;
        EXPECT_EQ(dup.validation["checks"]["novel"], "fail");

        // Within one batch: the later of two near-duplicates names the earlier one.
        auto dups = pipeline.earlier_near_duplicates({kOther, kModule, again, kOther});
        ASSERT_EQ(dups.size(), 4u);
        EXPECT_TRUE(dups[0].empty());
        EXPECT_TRUE(dups[1].empty());
        EXPECT_EQ(dups[2], std::vector<size_t>{1});
        EXPECT_EQ(dups[3], std::vector<size_t>{0});

        // A source this submission stored before is the caller's to recognise (resubmitted), not a duplicate.
        ASSERT_TRUE(pipeline.resubmitted(kModule, "run/iter-1"));
        EXPECT_EQ(pipeline.submit(kModule, {"relu"}, 1, "symbolic", "run/iter-1", &*s).id, first.id);
    }
    // No validation ran: the reference worker was never started (it is started lazily and logs there).
    EXPECT_FALSE(fs::exists(dir + "/validation/reference.log"));
    fs::remove_all(dir);
}
