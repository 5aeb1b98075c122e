// Peak device memory of the caching allocator (what torch.cuda.max_memory_allocated reports), for
// benchmarks that compare memory with an anchor. 0 on the CPU.
#pragma once

#include <torch/torch.h>

namespace kz {

int64_t peak_allocated_bytes(torch::Device device);
void reset_peak_allocated(torch::Device device);

}  // namespace kz
