// The results summary on a hand-made results file: last verdict per id, and where the time went.
#include "verify/results_summary.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace {

TEST(ResultsSummary, StagesAreSummedOverTheLastVerdictOfEveryJob) {
    const auto path = std::filesystem::temp_directory_path() / "kz_results_summary_test.jsonl";
    {
        std::ofstream f(path);
        // "a" was verified twice (a resumed run): only its second verdict counts.
        f << R"({"id":"a","status":"infra_error","total_s":9,"stages":{"wait_lane":100}})"
          << "\n"
          << R"({"id":"a","status":"correct","total_s":1,"speedup_eager":2,"stages":{"wait_lane":1,"candidate":{"timing_s":0.5,"lock_wait_exclusive_s":0.25}}})"
          << "\n"
          << "not json\n"
          << R"({"id":"b","status":"incorrect","total_s":3,"stages":{"compile":0.1,"wait_lane":3,"candidate":{"timing_s":1.5},"note":"x"}})"
          << "\n";
    }
    const auto s = kz::summarize_results(path.string());
    std::filesystem::remove(path);
    EXPECT_EQ(s.jobs, 2);
    EXPECT_EQ(s.by_status.at("correct"), 1);
    ASSERT_EQ(s.stages.count("wait_lane"), 1u);
    EXPECT_DOUBLE_EQ(s.stages.at("wait_lane").sum_s, 4.0);
    EXPECT_EQ(s.stages.at("wait_lane").per_job.n, 2);
    EXPECT_DOUBLE_EQ(s.stages.at("candidate.timing_s").sum_s, 2.0);
    EXPECT_DOUBLE_EQ(s.stages.at("candidate.timing_s").per_job.median, 1.0);
    EXPECT_EQ(s.stages.at("candidate.lock_wait_exclusive_s").per_job.n, 1);
    EXPECT_EQ(s.stages.count("note"), 0u);  // not a number
    const std::string table = s.stage_table();
    EXPECT_LT(table.find("wait_lane"), table.find("candidate.timing_s"));  // largest sum first
    EXPECT_EQ(s.to_json()["stages"]["wait_lane"]["sum_s"], 4.0);
    const auto none = s.ceiling(16);  // no CPU or lock figures in these verdicts (compile times alone say nothing)
    EXPECT_EQ(none.cpu_jobs_per_min, 0.0);
    EXPECT_EQ(none.device_jobs_per_min, 0.0);
}

TEST(ResultsSummary, TheCeilingComesFromWhatTheJobsConsumed) {
    const auto path = std::filesystem::temp_directory_path() / "kz_results_ceiling_test.jsonl";
    {
        std::ofstream f(path);
        f << R"({"id":"a","status":"correct","stages":{"compile":0.5,"candidate":{"child_cpu_s":1.5,"lock_held_exclusive_s":0.1}}})"
          << "\n"
          << R"({"id":"b","status":"incorrect","stages":{"compile":0.5,"candidate":{"child_cpu_s":0.5}}})"
          << "\n";
    }
    const auto s = kz::summarize_results(path.string());
    std::filesystem::remove(path);
    const auto c = s.ceiling(16);
    EXPECT_EQ(s.children.fresh, 0);                 // these verdicts do not say which child ran them
    EXPECT_DOUBLE_EQ(c.cpu_s_per_job, 1.5);         // (2 + 1) s over 2 jobs
    EXPECT_DOUBLE_EQ(c.cpu_jobs_per_min, 640.0);    // 16 cores x 60 s / 1.5 s
    EXPECT_DOUBLE_EQ(c.exclusive_s_per_job, 0.05);  // one job held the device, one was never timed
    EXPECT_DOUBLE_EQ(c.device_jobs_per_min, 1200.0);
}

TEST(ResultsSummary, CountsFreshAndReusedChildrenAndWhyChildrenRetired) {
    const auto path = std::filesystem::temp_directory_path() / "kz_results_children_test.jsonl";
    {
        std::ofstream f(path);
        f << R"({"id":"a","status":"correct","stages":{"candidate":{"child":{"job_index":0,"retired":null}}}})"
          << "\n"
          << R"({"id":"b","status":"correct","stages":{"candidate":{"child":{"job_index":1,"retired":"torch setting x changed"}}}})"
          << "\n"
          << R"({"id":"c","status":"runtime_error","stages":{"candidate":{"child":{"job_index":3,"retired":"torch setting x changed"}}}})"
          << "\n"
          << R"({"id":"d","status":"timeout","stages":{"candidate":{}}})"
          << "\n";
    }
    const auto s = kz::summarize_results(path.string());
    std::filesystem::remove(path);
    EXPECT_EQ(s.children.fresh, 1);
    EXPECT_EQ(s.children.reused, 2);
    EXPECT_EQ(s.children.retired.at("torch setting x changed"), 2);
    EXPECT_EQ(s.stages.count("candidate.child.job_index"), 0u);  // not seconds
    EXPECT_EQ(s.children_line(),
              "1 jobs in a fresh child, 2 in a reused one; retired after: torch setting x changed (2)");
}

}  // namespace
