// Recorded validations (teach's validation.jsonl): a record written by validation_record reads back
// as the validation it was; a missing file is no records; the last record of a key stands; a line
// without a key is skipped; a record whose validation is malformed is an error naming it.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/files.h"
#include "tasks/validation.h"

namespace {

TEST(ValidationRecords, WrittenRecordsReadBackByKey) {
    const std::string dir = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-records-");
    const std::string path = dir + "/validation.jsonl";
    EXPECT_TRUE(kz::read_validation_records(path).empty());

    kz::TaskValidation bad;
    bad.checks["runs"] = "fail";
    bad.reasons["runs"] = "eager forward failed";
    bad.info["alone"] = true;
    bad.settle();
    kz::TaskValidation good;
    good.settle();
    const std::string k1 = kz::validation_key("cuda", {"relu"}, "a"), k2 = kz::validation_key("cuda", {"relu"}, "b");
    EXPECT_NE(k1, k2);
    kz::write_file_atomic(path, kz::validation_record(k1, good).dump() + "\n" + R"({"valid": true})" + "\n" +
                                    R"({"key": ")" + k2 + R"(", "valid": true, "reason": ""})" + "\n" +
                                    kz::validation_record(k1, bad).dump() + "\n");
    const auto records = kz::read_validation_records(path);
    ASSERT_EQ(records.size(), 2u);
    const auto back = kz::TaskValidation::from_json(records.at(k1).at("validation"));
    EXPECT_FALSE(back.valid);
    EXPECT_EQ(back.reason, "runs: eager forward failed");
    EXPECT_EQ(back.checks, bad.checks);
    EXPECT_EQ(back.info, bad.info);
    EXPECT_FALSE(records.at(k1).at("valid").get<bool>());
    EXPECT_FALSE(records.at(k2).contains("validation"));  // an older run's record: valid and reason only

    kz::write_file_atomic(path, R"({"key": ")" + k1 + R"(", "validation": {"valid": "yes"}})" + "\n");
    try {
        kz::read_validation_records(path);
        ADD_FAILURE() << "a malformed validation was read";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find(path + ", record 1: not a validation"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

}  // namespace
