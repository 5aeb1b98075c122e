// Tensor entry points to the engine's CUDA kernels (engine/cuda_kernels.h), which generation uses on
// a GPU in bf16 or fp16: fewer, fused kernels per decoder layer than ATen's. Each checks its
// arguments and throws std::invalid_argument naming the problem. Shapes as in model.h.
#pragma once

#include <torch/torch.h>

#include "engine/cuda_kernels.h"

namespace kz::fused {

// Whether this build has the kernels (CMake found nvcc: KZ_CUDA_KERNELS).
bool available();
// Whether a model of these dimensions (hidden size C) on `device` in `dtype` can generate with them.
bool usable(torch::Device device, torch::ScalarType dtype, int64_t C, int64_t H, int64_t G, int64_t D);

// h (..., C) += x in place (x may be undefined: plain RMSNorm); returns weight * rms_norm(h).
// C a multiple of 8, at most 32768.
torch::Tensor add_rms_norm_(torch::Tensor& h, const torch::Tensor& x, const torch::Tensor& weight, double eps);

// qkv (B, T, H+2G, D) contiguous, bias ((H+2G)*D) or undefined, positions (B, T) int64 (also the cache
// slots), inv_freq (D/2) fp32: writes rotated keys and values into cache (B, S, 2G, D); returns the
// rotated queries (B, T, H, D).
torch::Tensor rope_qkv_to_cache(const torch::Tensor& qkv, const torch::Tensor& bias, const torch::Tensor& positions,
                                const torch::Tensor& inv_freq, torch::Tensor& cache, int64_t H, int64_t G);

// (..., 2I) -> silu(first half) * second half, (..., I).
torch::Tensor silu_mul(const torch::Tensor& gu);
// The gradient of silu_mul with respect to gu: grad (..., I), gu (..., 2I) -> (..., 2I).
torch::Tensor silu_mul_backward(const torch::Tensor& grad, const torch::Tensor& gu);
// Whether silu_mul and silu_mul_backward take this tensor: a build with the kernels, CUDA, bf16 or fp16.
bool elementwise_usable(const torch::Tensor& t);

// x (..., K) W^T for weight (N, K), one dtype (bf16 or fp16), on the GPU, no bias: a decode step's
// linear layer on cuBLASLt with a timed algorithm (decode_gemm.h); ATen's linear where a pointer is
// not 16-byte aligned. (..., N).
torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& weight);

// q (B, H, D) over cache (B, S, 2G, D), row b attending slots 0..lens[b] (lens (B) int64): (B, H, D).
torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& cache, const torch::Tensor& lens,
                               double scale);

// One token per row of logits (B, V) (bf16 or fp16, on the GPU) drawn from softmax(logits /
// temperature), temperature > 0, and its log-probability under that softmax, fp32: (tokens (B) int64,
// logprobs (B)). Random numbers from `gen` (a CUDA generator), whose Philox offset advances by 4.
// Not inside a CUDA graph capture.
std::pair<torch::Tensor, torch::Tensor> sample(const torch::Tensor& logits, double temperature, at::Generator& gen);

}  // namespace kz::fused
