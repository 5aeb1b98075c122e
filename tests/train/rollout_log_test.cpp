// Rollout records: round trip, durability across a torn last line, refusal of malformed records.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/files.h"
#include "train/rollout_log.h"

namespace {

kz::RolloutRecord record(int sample) {
    kz::RolloutRecord r;
    r.run_id = "run-1";
    r.iteration = 3;
    r.role = "coder";
    r.task_hash = "abc123";
    r.sample = sample;
    r.prompt_tokens = {1, 2, 3};
    r.completion_tokens = {7, 8};
    r.completion = "```python\nclass ModelNew: ...\n```  \xe2\x9c\x93";
    r.logprobs = {-0.5f, -1.25f};
    r.verdict = {{"status", "correct"}, {"speedup_eager", 1.5}};
    r.reward = 1.25;
    r.advantage = -0.5;
    r.model_version = "coder@iter-3";
    return r;
}

TEST(RolloutLog, RoundTripAndTornLastLine) {
    const std::string dir = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-rollouts-");
    const std::string path = dir + "/rollouts.jsonl";
    kz::append_rollouts(path, {record(0), record(1)});
    {  // a crash in the middle of the next write
        std::ofstream f(path, std::ios::app);
        f << R"({"run_id": "run-1", "iteration": 3, "ro)";
    }
    int skipped = -1;
    auto back = kz::read_rollouts(path, &skipped);
    EXPECT_EQ(skipped, 0);
    ASSERT_EQ(back.size(), 2u);
    EXPECT_EQ(back[1].to_json(), record(1).to_json());
    EXPECT_EQ(back[0].key(), record(0).key());
    EXPECT_NE(back[0].key(), back[1].key());
    // Appending after the torn line starts on a clean line.
    kz::append_rollouts(path, {record(2)});
    EXPECT_EQ(kz::read_rollouts(path).size(), 3u);
    std::filesystem::remove_all(dir);
}

TEST(RolloutLog, MalformedRecordsAreNamed) {
    auto j = record(0).to_json();
    j.erase("advantage");
    try {
        kz::RolloutRecord::from_json(j);
        ADD_FAILURE() << "accepted a record without advantage";
    } catch (const std::invalid_argument& e) {
        EXPECT_NE(std::string(e.what()).find("advantage"), std::string::npos);
    }
    j = record(0).to_json();
    j["role"] = "critic";
    EXPECT_THROW(kz::RolloutRecord::from_json(j), std::invalid_argument);
    j = record(0).to_json();
    j["sample"] = "first";
    EXPECT_THROW(kz::RolloutRecord::from_json(j), std::invalid_argument);
}

}  // namespace
