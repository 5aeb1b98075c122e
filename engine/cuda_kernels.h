// The engine's own CUDA kernels for generation (compiled by nvcc when the build has CUDA): what
// ATen would do in several kernels per decoder layer, done in one. No torch headers here: tensors
// travel as raw pointers, in the element type `dtype` (bf16 or fp16), on `stream`. Every pointer is
// to contiguous memory unless its stride is given. fused_ops.h wraps these for tensors.
#pragma once

#include <cstdint>
#include <initializer_list>

typedef struct CUstream_st* cudaStream_t;

namespace kz::cuda {

enum class Half { bf16, fp16 };

// Whether 16-byte loads and stores may start at every one of these (a view can begin mid-vector).
bool aligned16(std::initializer_list<const void*> ptrs);

// Per row r of (rows, C): h[r] += x[r] (rounded to the element type, as a bf16 residual add is),
// then out[r] = weight * rms_norm(h[r]) computed as transformers does (fp32 statistics, the
// normalised value rounded before scaling). x may be null (plain RMSNorm of h).
void add_rms_norm(Half dtype, void* h, const void* x, const void* weight, void* out, int64_t rows, int64_t C, float eps,
                  cudaStream_t stream);

// RoPE and the KV-cache write of one attention call. qkv (N, H+2G, D) with N = B*T (row n of batch
// row n / T), plus bias ((H+2G)*D) when not null; positions (N) int64, also the cache slot of token
// n; inv_freq (D/2) fp32. Writes rotated q to q_out (N, H, D), rotated k and plain v to
// cache (B, S, 2G, D) at [n / T, positions[n]].
void rope_qkv_to_cache(Half dtype, const void* qkv, const void* bias, const int64_t* positions, const float* inv_freq,
                       void* q_out, void* cache, int64_t N, int64_t T, int64_t H, int64_t G, int64_t D, int64_t S,
                       cudaStream_t stream);

// out (N, I) = silu(gu[:, :I]) * gu[:, I:], gu (N, 2I), rounded after each op as transformers does.
void silu_mul(Half dtype, const void* gu, void* out, int64_t N, int64_t I, cudaStream_t stream);
// Its gradient: dgu (N, 2I) from grad (N, I) and gu, rounded where ATen's mul and silu_backward round.
void silu_mul_backward(Half dtype, const void* grad, const void* gu, void* dgu, int64_t N, int64_t I,
                       cudaStream_t stream);

// One decode step's attention over the cache, split over key chunks (flash-decoding). q (B, H, D);
// cache (B, S, 2G, D); row b attends slots 0..lens[b], in `splits` key chunks
// (decode_attention_splits); `partial` holds B*H*splits*(D+2) floats (none for one chunk).
// out (B, H, D). D must be 64 or 128 and H / G at most 8 (decode_attention_supported). On tensor
// cores (mma), probabilities rounded to the element type before the value product, as flash
// attention does.
bool decode_attention_supported(int64_t H, int64_t G, int64_t D);
// Key chunks per (row, KV head) for B rows of G KV heads over S cache slots on the current device:
// enough for a block per SM, at most 32 of at least 128 keys; or the number in
// KZ_DECODE_ATTENTION_SPLITS (a tuning knob, read once; at most S). With one chunk the kernel writes
// `out` itself; with more it writes `partial` and a combine pass writes `out`.
int64_t decode_attention_splits(int64_t B, int64_t G, int64_t S);
void decode_attention(Half dtype, const void* q, const void* cache, const int64_t* lens, float* partial, int64_t splits,
                      void* out, int64_t B, int64_t H, int64_t G, int64_t D, int64_t S, float scale,
                      cudaStream_t stream);

// One token per row of logits (rows, V), drawn from softmax(logits / temperature) (temperature > 0)
// by the exponential race: the argmax over v of logits[v] / temperature - log(E_v), E_v ~ Exp(1)
// independent, is a draw from that softmax (the Gumbel-max trick). One pass over the logits does the
// race and the row's log-sum-exp, where ATen's sampling casts, divides, normalises, draws
// exponentials, divides and takes the argmax in separate passes. E_v comes from Philox (seed,
// offset): each 4 logits of a row share one Philox output, counter (offset / 4, row * ceil(V/4) + v / 4),
// so a call consumes 4 of a generator's offsets. tokens (rows) int64; logprobs (rows) fp32, the
// chosen token's log-probability under the whole softmax (as log_softmax computes it in fp32).
// Each row is raced in `chunks` blocks (sample_chunks: about 8 blocks an SM in all, each of at least
// 2048 logits); `partial` holds 4 * rows * chunks floats. A row with no finite logit gets token 0
// and a NaN log-probability.
int64_t sample_chunks(int64_t rows, int64_t V);
void sample_rows(Half dtype, const void* logits, int64_t rows, int64_t V, float temperature, uint64_t seed,
                 uint64_t offset, int64_t chunks, float* partial, int64_t* tokens, float* logprobs,
                 cudaStream_t stream);

}  // namespace kz::cuda
