#include "engine/device_memory.h"

#include <c10/cuda/CUDACachingAllocator.h>

namespace kz {

int64_t peak_allocated_bytes(torch::Device device) {
    if (!device.is_cuda()) return 0;
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].peak;
}

void reset_peak_allocated(torch::Device device) {
    if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
}

}  // namespace kz
