// Where a GPU's time goes: runs a function under PyTorch's Kineto profiler and sums the device time
// of its kernels (and copies) by name, for bench-engine --profile. The profiler headers stay in
// kernel_profile.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kz {

struct KernelTime {
    std::string name;
    int64_t calls = 0;
    double total_us = 0;
};

// Kernels of `fn` on CUDA devices, most total time first. Throws std::runtime_error when the
// profiler cannot start (a build without Kineto).
std::vector<KernelTime> profile_kernels(const std::function<void()>& fn);

}  // namespace kz
