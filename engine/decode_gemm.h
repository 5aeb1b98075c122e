// The decode step's linear layers on cuBLASLt, with the algorithm for each shape chosen by timing
// instead of taken from the heuristic. At a decode step a linear layer is a skinny product (M = the
// batch rows, a few to a few hundred) that streams its weight once, and cuBLAS's first pick leaves
// bandwidth unused for some shapes (7B gate|up and down at M = 64: 7% slower than the fastest of
// the heuristic's candidates on an H200). No torch headers here (as cuda_kernels.h).
//
// Contract: y (M, N) = x (M, K) W^T with W (N, K) row-major, all contiguous, in `dtype`, fp32
// accumulation, on `stream`. Pointers must be 16-byte aligned (aligned16). The first call
// of a (device, dtype, M, N, K) outside a CUDA graph capture times the heuristic's candidates (up
// to 32) on `stream`, each over rotating copies of the weight so that L2 holds none of it (as at a
// real step, where every layer has its own weights), and keeps one for the life of the process: the
// heuristic's first unless another is at least 3% faster. A call during a capture with no choice yet
// takes the heuristic's first; KZ_DECODE_GEMM_TUNING=0 (read once) always does. Because the choice
// is timed, two processes may choose differently for a shape whose candidates time close to the
// margin, and then round differently in the last bit; within a process the choice never changes,
// so seeded generation repeats exactly. The first call on a stream must not be inside a capture:
// it allocates that (device, stream)'s 32 MiB workspace, which lives until the process exits
// (graphs captured on the stream point into it).
// Throws std::runtime_error naming the cuBLASLt or CUDA call that failed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/cuda_kernels.h"

namespace kz::cuda {

// The rule that picks from the timed candidates: `ms` in the heuristic's order (negative: that
// candidate did not run). The first unless another is at least 3% faster; then the first in the
// heuristic's order within 1% of the fastest, so that timing noise rarely changes the choice from
// one process to the next. 0 when nothing ran.
size_t decode_gemm_choice(const std::vector<float>& ms);
void decode_gemm(Half dtype, const void* x, const void* w, void* y, int64_t M, int64_t N, int64_t K,
                 cudaStream_t stream);

}  // namespace kz::cuda
