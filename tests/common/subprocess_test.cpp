#include "common/subprocess.h"

#include <cstdlib>

#include <gtest/gtest.h>

// Every child that may touch a GPU gets NVLink multicast off, unless the user's environment says
// otherwise (then the child inherits the user's value).
TEST(MulticastOff, AddsAllThreeUnlessTheEnvironmentSetsThem) {
    const char* vars[] = {"NCCL_NVLS_ENABLE", "TORCH_SYMM_MEM_DISABLE_MULTICAST", "NVSHMEM_DISABLE_NVLS"};
    for (const char* v : vars) unsetenv(v);
    std::map<std::string, std::string> env;
    kz::set_multicast_off(env);
    EXPECT_EQ(
        env, (std::map<std::string, std::string>{
                 {"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"}}));

    setenv("NCCL_NVLS_ENABLE", "1", 1);
    env.clear();
    kz::set_multicast_off(env);
    EXPECT_EQ(env.count("NCCL_NVLS_ENABLE"), 0u);
    EXPECT_EQ(env.size(), 2u);
    unsetenv("NCCL_NVLS_ENABLE");
}
