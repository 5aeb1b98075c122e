#include "verify/baseline_cache.h"

#include "common/hash.h"

#include <gtest/gtest.h>

#include <sqlite3.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/files.h"
#include "tests/open_files.h"

TEST(BaselineCache, PersistsAcrossReopenAndKeysOnEveryField) {
    auto d = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-cache-test-");
    std::string path = d + "/b.sqlite";
    kz::BaselineKey k{"abc", "NVIDIA H200", "2.11.0", "m1", 100, true};
    {
        kz::BaselineCache c(path);
        EXPECT_FALSE(c.get(k).has_value());
        c.put(k, {{"eager", {{"event_ms", {{"median", 1.5}}}}}});
    }
    kz::BaselineCache c(path);
    auto v = c.get(k);
    ASSERT_TRUE(v.has_value());
    EXPECT_DOUBLE_EQ((*v)["eager"]["event_ms"]["median"].get<double>(), 1.5);
    for (auto other : {kz::BaselineKey{"abd", "NVIDIA H200", "2.11.0", "m1", 100, true},
                       kz::BaselineKey{"abc", "NVIDIA H100", "2.11.0", "m1", 100, true},
                       kz::BaselineKey{"abc", "NVIDIA H200", "2.10.0", "m1", 100, true},
                       kz::BaselineKey{"abc", "NVIDIA H200", "2.11.0", "m2", 100, true},
                       kz::BaselineKey{"abc", "NVIDIA H200", "2.11.0", "m1", 10, true},
                       kz::BaselineKey{"abc", "NVIDIA H200", "2.11.0", "m1", 100, false}})
        EXPECT_FALSE(c.get(other).has_value());
    std::filesystem::remove_all(d);
}

TEST(BaselineCache, OpensWhileAnotherProcessHoldsTheWriteLock) {
    // Two daemons sharing a cache directory start at once: while one holds the write lock, the
    // other's switch to WAL is refused at once (SQLite skips the busy handler where waiting could
    // deadlock). The open must wait for the lock, not fail ("database is locked").
    auto d = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-cache-test-");
    std::string path = d + "/b.sqlite";
    sqlite3* other = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &other), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(other, "CREATE TABLE t (x); BEGIN IMMEDIATE; INSERT INTO t VALUES (1);", nullptr, nullptr,
                           nullptr),
              SQLITE_OK);
    std::thread release([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        sqlite3_exec(other, "COMMIT;", nullptr, nullptr, nullptr);
    });
    try {
        kz::BaselineCache c(path);
        kz::BaselineKey k{"abc", "NVIDIA H200", "2.11.0", "m1", 100, true};
        c.put(k, {{"eager", 1}});
        EXPECT_TRUE(c.get(k).has_value());
    } catch (const std::exception& e) {
        ADD_FAILURE() << e.what();
    }
    release.join();
    sqlite3_close(other);
}

TEST(BaselineCache, UnwritableLocationIsAClearError) {
    try {
        kz::BaselineCache c("/proc/kz-no/b.sqlite");
        FAIL();
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("/proc/kz-no"), std::string::npos) << e.what();
    }
}

TEST(Sha256, KnownVector) {
    EXPECT_EQ(kz::sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(BaselineCache, CacheFromBeforeTheTimingMethodKeyOpensAndIsNotReused) {
    auto d = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-cache-test-");
    std::string path = d + "/b.sqlite";
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(db,
                           "CREATE TABLE baselines (task_hash TEXT NOT NULL, device_name TEXT NOT NULL,"
                           " torch_version TEXT NOT NULL, timing_iters INTEGER NOT NULL, with_compile INTEGER NOT NULL,"
                           " value TEXT NOT NULL);"
                           "INSERT INTO baselines VALUES ('abc', 'NVIDIA H200', '2.11.0', 100, 1, '{\"eager\": 1}');",
                           nullptr, nullptr, nullptr),
              SQLITE_OK);
    sqlite3_close(db);
    kz::BaselineCache c(path);
    kz::BaselineKey k{"abc", "NVIDIA H200", "2.11.0", "m1", 100, true};
    EXPECT_FALSE(c.get(k).has_value());
    c.put(k, {{"eager", 2}});
    EXPECT_EQ((*c.get(k))["eager"].get<int>(), 2);
    std::filesystem::remove_all(d);
}

TEST(BaselineCache, AFileThatIsNoDatabaseIsRefusedAndClosed) {
    auto d = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-cache-test-");
    const std::string path = d + "/b.sqlite";
    kz::write_file_atomic(path, std::string(4096, 'x'));
    try {
        kz::BaselineCache c(path);
        ADD_FAILURE() << "a cache file that is not a database was opened";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
    EXPECT_EQ(kz::testing_util::open_descriptors_of(path), 0);
    std::filesystem::remove_all(d);
}
