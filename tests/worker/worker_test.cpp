// Supervision of worker processes, against a fake worker that misbehaves on request.
#include "worker/worker.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/files.h"

using namespace std::chrono_literals;

namespace {

kz::WorkerConfig fake(const std::string& dir, std::map<std::string, std::string> env = {}) {
    kz::WorkerConfig c;
    c.command = {"python3", std::string(KZ_SOURCE_DIR) + "/tests/worker/fake_worker.py"};
    c.role = "reference";
    c.work_root = dir + "/work";
    c.log_path = dir + "/worker.log";
    c.env = std::move(env);
    c.start_timeout = 3s;
    return c;
}

struct WorkerTest : ::testing::Test {
    std::string dir = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-worker-test-");
    ~WorkerTest() override { std::filesystem::remove_all(dir); }
};

}  // namespace

TEST_F(WorkerTest, AnswersAndIsReused) {
    kz::Worker w(fake(dir));
    auto a = w.request({{"op", "echo"}, {"value", 1}}, 5s);
    ASSERT_EQ(a.status, kz::ReplyStatus::ok) << a.detail;
    EXPECT_EQ(a.body["echo"], 1);
    auto b = w.request({{"op", "echo"}, {"value", 2}}, 5s);
    EXPECT_EQ(b.body["pid"], a.body["pid"]);
    EXPECT_EQ(w.starts(), 1);
}

TEST_F(WorkerTest, FailedRequestKeepsTheWorker) {
    kz::Worker w(fake(dir));
    auto r = w.request({{"op", "fail"}}, 5s);
    EXPECT_EQ(r.status, kz::ReplyStatus::failed);
    EXPECT_EQ(r.detail, "asked to fail");
    EXPECT_EQ(w.request({{"op", "echo"}}, 5s).status, kz::ReplyStatus::ok);
    EXPECT_EQ(w.starts(), 1);
}

TEST_F(WorkerTest, HangIsKilledAtTheDeadlineAndReplaced) {
    kz::Worker w(fake(dir));
    auto t0 = kz::Clock::now();
    auto r = w.request({{"op", "hang"}}, 1500ms);
    auto took = kz::Clock::now() - t0;
    EXPECT_EQ(r.status, kz::ReplyStatus::timeout);
    EXPECT_LT(took, 5s);
    auto next = w.request({{"op", "echo"}}, 5s);
    EXPECT_EQ(next.status, kz::ReplyStatus::ok);
    EXPECT_EQ(w.starts(), 2);
}

TEST_F(WorkerTest, CrashIsReportedWithTheLogAndReplaced) {
    kz::Worker w(fake(dir));
    auto r = w.request({{"op", "crash"}}, 5s);
    EXPECT_EQ(r.status, kz::ReplyStatus::crashed);
    EXPECT_NE(r.detail.find("about to crash"), std::string::npos) << r.detail;
    EXPECT_NE(r.detail.find("code 9"), std::string::npos) << r.detail;
    // Callers read optional fields of any reply; a dead worker's reply must allow that.
    EXPECT_FALSE(r.body.value("task_error", false));
    EXPECT_EQ(w.request({{"op", "echo"}}, 5s).status, kz::ReplyStatus::ok);
}

TEST_F(WorkerTest, ProtocolViolationsReplaceTheWorker) {
    kz::Worker w(fake(dir));
    EXPECT_EQ(w.request({{"op", "garbage"}}, 5s).status, kz::ReplyStatus::protocol_error);
    EXPECT_EQ(w.request({{"op", "huge"}}, 5s).status, kz::ReplyStatus::protocol_error);
    EXPECT_EQ(w.request({{"op", "wrong_id"}}, 5s).status, kz::ReplyStatus::protocol_error);
    EXPECT_EQ(w.request({{"op", "echo"}}, 5s).status, kz::ReplyStatus::ok);
    EXPECT_EQ(w.starts(), 4);
}

TEST_F(WorkerTest, StartFailuresAreReportedNotHung) {
    kz::Worker never(fake(dir, {{"FAKE_START", "never_ready"}}));
    auto t0 = kz::Clock::now();
    auto r = never.request({{"op", "echo"}}, 5s);
    EXPECT_EQ(r.status, kz::ReplyStatus::crashed);
    EXPECT_LT(kz::Clock::now() - t0, 10s);
    EXPECT_NE(r.detail.find("did not become ready"), std::string::npos) << r.detail;

    kz::Worker dies(fake(dir, {{"FAKE_START", "exit"}}));
    EXPECT_EQ(dies.request({{"op", "echo"}}, 5s).status, kz::ReplyStatus::crashed);

    auto cfg = fake(dir);
    cfg.command = {"/nonexistent/python"};
    kz::Worker missing(cfg);
    auto m = missing.request({{"op", "echo"}}, 5s);
    EXPECT_EQ(m.status, kz::ReplyStatus::crashed);
    EXPECT_NE(m.detail.find("/nonexistent/python"), std::string::npos) << m.detail;
}
