#include "worker/framing.h"

#include <gtest/gtest.h>

TEST(Framing, EncodesBigEndianLengthThenJson) {
    std::string f = kz::encode_frame({{"op", "ping"}});
    ASSERT_GE(f.size(), 4u);
    uint32_t n = (uint8_t(f[0]) << 24) | (uint8_t(f[1]) << 16) | (uint8_t(f[2]) << 8) | uint8_t(f[3]);
    EXPECT_EQ(n, f.size() - 4);
    EXPECT_EQ(f.substr(4), R"({"op":"ping"})");
}

TEST(Framing, DecodeRejectsNonObjects) {
    nlohmann::json j;
    std::string err;
    EXPECT_TRUE(kz::decode_payload(R"({"a":1})", j, err));
    EXPECT_FALSE(kz::decode_payload("[1,2]", j, err));
    EXPECT_NE(err.find("not a JSON object"), std::string::npos);
    EXPECT_FALSE(kz::decode_payload("{not json", j, err));
    EXPECT_NE(err.find("not JSON"), std::string::npos);
}

TEST(Framing, InvalidUtf8IsReplacedNotThrown) {
    std::string f = kz::encode_frame({{"s", std::string("\xff\xfe")}});
    EXPECT_GT(f.size(), 4u);
}
