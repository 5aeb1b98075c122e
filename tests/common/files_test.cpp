#include "common/files.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace fs = std::filesystem;

namespace {

std::string tmpdir() { return kz::make_temp_dir(fs::temp_directory_path().string(), "kz-files-test-"); }

}  // namespace

TEST(Files, AtomicWriteReplacesWholeFile) {
    auto d = tmpdir();
    std::string p = d + "/sub/a.txt";
    kz::write_file_atomic(p, "first");
    kz::write_file_atomic(p, "second");
    EXPECT_EQ(kz::read_file(p), "second");
    for (auto& e : fs::directory_iterator(d + "/sub")) EXPECT_EQ(e.path().filename(), "a.txt");  // no temp left
    fs::remove_all(d);
}

TEST(Files, OneFileLockHolderAtATime) {
    auto d = tmpdir();
    const std::string p = d + "/x.lock";
    {
        kz::FileLock first(p, "x is busy");
        try {
            kz::FileLock second(p, "x is busy");
            FAIL() << "a second holder took the lock";
        } catch (const std::runtime_error& e) {
            EXPECT_NE(std::string(e.what()).find("x is busy"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
        }
    }
    kz::FileLock after(p, "x is busy");  // released with its holder
    EXPECT_THROW(kz::FileLock(d + "/missing/x.lock", "y"), std::runtime_error);
    fs::remove_all(d);
}

TEST(Files, ReadMissingNamesTheFile) {
    try {
        kz::read_file("/nonexistent/kz.txt");
        FAIL();
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("/nonexistent/kz.txt"), std::string::npos);
    }
    EXPECT_THROW(kz::read_file("/"), std::runtime_error);
}

TEST(Files, PartialLastLineIsCutBack) {
    auto d = tmpdir();
    std::string p = d + "/r.jsonl";
    kz::append_durable(p, "{\"id\":1}\n");
    kz::append_durable(p, "{\"id\":2}\n{\"id\":3, \"stat");  // a crash in the middle of a record
    kz::truncate_partial_line(p);
    EXPECT_EQ(kz::read_file(p), "{\"id\":1}\n{\"id\":2}\n");
    kz::truncate_partial_line(p);  // idempotent on a clean file
    EXPECT_EQ(kz::read_file(p), "{\"id\":1}\n{\"id\":2}\n");
    fs::remove_all(d);
}

TEST(Files, Utf8Validation) {
    EXPECT_TRUE(kz::valid_utf8("plain ascii"));
    EXPECT_TRUE(kz::valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
    EXPECT_FALSE(kz::valid_utf8("\xff\xfe"));
    EXPECT_FALSE(kz::valid_utf8("\xc3"));      // truncated sequence
    EXPECT_FALSE(kz::valid_utf8("\xc0\xaf"));  // overlong
}
