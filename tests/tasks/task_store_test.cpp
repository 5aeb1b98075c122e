#include "tasks/task_store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/files.h"
#include "tasks/similarity.h"
#include "common/hash.h"

namespace fs = std::filesystem;

namespace {

struct StoreTest : ::testing::Test {
    std::string dir = kz::make_temp_dir(fs::temp_directory_path().string(), "kz-store-test-");
    std::string db = dir + "/tasks.db";
    ~StoreTest() override { fs::remove_all(dir); }
};

kz::TaskRecord record(int i) {
    kz::TaskRecord t;
    t.source = "import torch\n# task " + std::to_string(i) + "\nclass Model: pass\n";
    t.hash = kz::sha256_hex(t.source);
    t.norm_hash = kz::normalised_hash(t.source);
    t.apis = {"relu", i % 2 ? "softmax" : "sum"};
    t.origin = i % 3 ? "symbolic" : "proposer";
    t.valid = i % 4 != 0;
    t.validation = {{"valid", t.valid}};
    t.eager_ms = 0.5 * i;
    return t;
}

}  // namespace

TEST_F(StoreTest, RoundTripStatsAndDuplicates) {
    kz::TaskStore s(db);
    EXPECT_EQ(s.schema_version(), kz::TaskStore::kSchemaVersion);
    for (int i = 0; i < 8; ++i) s.add_task(record(i));
    EXPECT_EQ(s.add_task(record(3)), 4);  // the same source again: the existing id, nothing added
    auto t = s.task(4);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->source, record(3).source);
    EXPECT_EQ(t->apis, record(3).apis);
    EXPECT_DOUBLE_EQ(*t->eager_ms, 1.5);
    auto st = s.stats();
    EXPECT_EQ(st.tasks, 8);
    EXPECT_EQ(st.valid, 6);
    EXPECT_EQ(st.by_origin["proposer"], 3);
    EXPECT_EQ(st.api_coverage["relu"], 6);
    // Comments alone do not make a new normalised source.
    EXPECT_EQ(st.distinct_norm_hashes, 1);
    s.add_attempt({1, "v0", "triton", "correct", true, 1.3});
    EXPECT_EQ(s.stats().attempts, 1);
}

TEST_F(StoreTest, NewerSchemaAndForeignFilesAreNamedErrors) {
    { kz::TaskStore s(db); }
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_exec(h, "PRAGMA user_version = 99", nullptr, nullptr, nullptr);
    sqlite3_close(h);
    try {
        kz::TaskStore s(db);
        FAIL() << "a newer schema opened";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("schema version 99"), std::string::npos) << e.what();
    }
    kz::write_file_atomic(dir + "/junk.db", std::string(4096, 'x'));
    try {
        kz::TaskStore s(dir + "/junk.db");
        FAIL() << "junk opened";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("not an SQLite database"), std::string::npos) << e.what();
    }
}

// A writer killed with SIGKILL in the middle of its inserts leaves a store that opens, passes
// SQLite's integrity check and holds every insert that returned (a prefix of the sequence).
TEST_F(StoreTest, SurvivesKillDuringWrites) {
    std::string progress = dir + "/progress";
    pid_t pid = fork();
    if (pid == 0) {
        kz::TaskStore s(db);
        for (int i = 0;; ++i) {
            s.add_task(record(1000 + i));
            kz::write_file_atomic(progress, std::to_string(i + 1));
        }
    }
    for (int tries = 0; tries < 400 && !fs::exists(progress); ++tries)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    const int acknowledged = std::stoi(kz::read_file(progress));
    ASSERT_GT(acknowledged, 0);
    kz::TaskStore s(db);
    sqlite3* h = nullptr;
    ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(h, "PRAGMA integrity_check", -1, &st, nullptr);
    ASSERT_EQ(sqlite3_step(st), SQLITE_ROW);
    EXPECT_STREQ(reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), "ok");
    sqlite3_finalize(st);
    sqlite3_close(h);
    auto tasks = s.tasks();
    EXPECT_GE(static_cast<int>(tasks.size()), acknowledged);
    for (size_t i = 0; i < tasks.size(); ++i) EXPECT_EQ(tasks[i].source, record(1000 + static_cast<int>(i)).source);
}

TEST(Similarity, NormalisationIgnoresLayoutCommentsAndDocstrings) {
    std::string a =
        "class Model:\n    \"\"\"Doc.\"\"\"\n    def forward(self, x):\n        return torch.relu(x)  # hi\n";
    std::string b = "class Model:\n\n    def forward(self,x):\n        return torch.relu( x )\n";
    std::string c = "class Model:\n    def forward(self, x):\n        return torch.sigmoid(x)\n";
    EXPECT_EQ(kz::normalised_hash(a), kz::normalised_hash(b));
    EXPECT_NE(kz::normalised_hash(a), kz::normalised_hash(c));
    EXPECT_DOUBLE_EQ(kz::jaccard(kz::shingles(a), kz::shingles(b)), 1.0);
    double j = kz::jaccard(kz::shingles(a), kz::shingles(c));
    EXPECT_GT(j, 0.3);
    EXPECT_LT(j, 1.0);
    // A string literal that is an argument is code, not a docstring.
    EXPECT_NE(kz::normalised_hash("f('a')\n"), kz::normalised_hash("f('b')\n"));
}
