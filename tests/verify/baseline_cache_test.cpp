#include "verify/baseline_cache.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "common/files.h"

TEST(BaselineCache, PersistsAcrossReopenAndKeysOnEveryField) {
    auto d = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-cache-test-");
    std::string path = d + "/b.sqlite";
    kz::BaselineKey k{"abc", "NVIDIA H200", "2.11.0", 100, true};
    {
        kz::BaselineCache c(path);
        EXPECT_FALSE(c.get(k).has_value());
        c.put(k, {{"eager", {{"event_ms", {{"median", 1.5}}}}}});
    }
    kz::BaselineCache c(path);
    auto v = c.get(k);
    ASSERT_TRUE(v.has_value());
    EXPECT_DOUBLE_EQ((*v)["eager"]["event_ms"]["median"].get<double>(), 1.5);
    for (auto other : {kz::BaselineKey{"abd", "NVIDIA H200", "2.11.0", 100, true},
                       kz::BaselineKey{"abc", "NVIDIA H100", "2.11.0", 100, true},
                       kz::BaselineKey{"abc", "NVIDIA H200", "2.10.0", 100, true},
                       kz::BaselineKey{"abc", "NVIDIA H200", "2.11.0", 10, true},
                       kz::BaselineKey{"abc", "NVIDIA H200", "2.11.0", 100, false}})
        EXPECT_FALSE(c.get(other).has_value());
    std::filesystem::remove_all(d);
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
