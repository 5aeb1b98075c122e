#include "engine/cuda_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <curand_kernel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace kz::cuda {

namespace {

template <typename T>
__device__ __forceinline__ float to_f(T x);
template <>
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
template <>
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_f(float x);
template <>
__device__ __forceinline__ __nv_bfloat16 from_f(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_f(float x) { return __float2half_rn(x); }

// x rounded to T and back: what one op in T computes.
template <typename T>
__device__ __forceinline__ float rnd(float x) { return to_f(from_f<T>(x)); }

void check_launch(const char* what) {
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// The current device's SM count.
int64_t sm_count() {
    int device = 0, sms = 0;
    if (cudaGetDevice(&device) != cudaSuccess || cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess)
        throw std::runtime_error("cannot read the GPU's SM count");
    return sms;
}

// 8 elements (16 bytes) per load; a thread keeps up to kNormVecs of them in registers, so h is read
// once and the row needs one block of at most 1024 threads (C <= 32768).
constexpr int kVec = 8;
constexpr int kNormVecs = 4;

template <typename T, int N>
struct alignas(sizeof(T) * N) VecN {
    T v[N];
};
template <typename T>
using Vec8 = VecN<T, kVec>;

__device__ __forceinline__ float block_sum(float v, float* scratch) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    const int warps = (blockDim.x + 31) / 32;
    if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = v;
    __syncthreads();
    float total = 0.f;
    for (int i = 0; i < warps; ++i) total += scratch[i];
    return total;
}

template <typename T>
__global__ void add_rms_norm_kernel(T* h, const T* x, const T* w, T* out, int C, float eps) {
    const size_t row = blockIdx.x;
    const int nvec = C / kVec;
    auto* hr = reinterpret_cast<Vec8<T>*>(h + row * C);
    auto* xr = x ? reinterpret_cast<const Vec8<T>*>(x + row * C) : nullptr;
    auto* wr = reinterpret_cast<const Vec8<T>*>(w);
    auto* outr = reinterpret_cast<Vec8<T>*>(out + row * C);
    float vals[kNormVecs][kVec];
    float ss = 0.f;
#pragma unroll
    for (int j = 0; j < kNormVecs; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i >= nvec) break;
        Vec8<T> hv = hr[i];
        if (xr) {
            const Vec8<T> xv = xr[i];
#pragma unroll
            for (int e = 0; e < kVec; ++e) hv.v[e] = from_f<T>(to_f(hv.v[e]) + to_f(xv.v[e]));
            hr[i] = hv;
        }
#pragma unroll
        for (int e = 0; e < kVec; ++e) {
            vals[j][e] = to_f(hv.v[e]);
            ss += vals[j][e] * vals[j][e];
        }
    }
    __shared__ float scratch[32];
    const float inv = rsqrtf(block_sum(ss, scratch) / static_cast<float>(C) + eps);
#pragma unroll
    for (int j = 0; j < kNormVecs; ++j) {
        const int i = threadIdx.x + j * blockDim.x;
        if (i >= nvec) break;
        const Vec8<T> wv = wr[i];
        Vec8<T> o;
#pragma unroll
        for (int e = 0; e < kVec; ++e) o.v[e] = from_f<T>(to_f(wv.v[e]) * rnd<T>(vals[j][e] * inv));
        outr[i] = o;
    }
}

// Thread t of a block takes rotated pair i = t % (D/2), (i, i + D/2), of head t / (D/2) of the
// block's first group of heads and of every gridDim.y-th group after it, so that the pair's cos and
// sin are computed once for all its heads. A prefill's many tokens take one block each (gridDim.y =
// 1; the kernel before, a block per (token, head) recomputing them per head, ran the 7B prefill's
// RoPE at a quarter of bandwidth); a decode step's few tokens spread over several blocks each.
template <typename T>
__global__ void rope_qkv_kernel(const T* qkv, const T* bias, const int64_t* positions, const float* inv_freq, T* q_out,
                                T* cache, int T_, int H, int G, int D, int S) {
    const int64_t n = blockIdx.x;
    const int half = D / 2, heads = H + 2 * G, per_group = blockDim.x / half;
    const int i = threadIdx.x % half;
    const int64_t b = n / T_, pos = positions[n];
    // As transformers: fp32 tables rounded to T, then x*cos + rotate_half(x)*sin, each op in T.
    const float f = static_cast<float>(pos) * inv_freq[i];
    const float c = rnd<T>(cosf(f)), s = rnd<T>(sinf(f));
    for (int head = blockIdx.y * per_group + threadIdx.x / half; head < heads; head += gridDim.y * per_group) {
        const T* src = qkv + (n * heads + head) * D;
        T* dst = head < H ? q_out + (n * H + head) * D : cache + ((b * S + pos) * (2 * G) + (head - H)) * D;
        float x1 = to_f(src[i]), x2 = to_f(src[i + half]);
        if (bias) {
            const T* bh = bias + static_cast<int64_t>(head) * D;
            x1 = rnd<T>(x1 + to_f(bh[i])), x2 = rnd<T>(x2 + to_f(bh[i + half]));
        }
        if (head < H + G) {
            const float y1 = rnd<T>(rnd<T>(x1 * c) + rnd<T>(-x2 * s));
            x2 = rnd<T>(rnd<T>(x2 * c) + rnd<T>(x1 * s));
            x1 = y1;
        }
        dst[i] = from_f<T>(x1);  // values (head >= H + G) go in unrotated, after the G key heads
        dst[i + half] = from_f<T>(x2);
    }
}

template <typename T>
__device__ __forceinline__ T silu_times(T g, T u) {
    const float gf = to_f(g);
    return from_f<T>(rnd<T>(gf / (1.f + __expf(-gf))) * to_f(u));
}

// 8 outputs per thread when I is a multiple of 8 (16-byte loads), else one.
template <typename T, bool kVectorised>
__global__ void silu_mul_kernel(const T* gu, T* out, int64_t N, int64_t I) {
    const int64_t per = kVectorised ? kVec : 1, total = N * I / per;
    for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = e * per / I, c = e * per % I;
        if constexpr (kVectorised) {
            const auto g = *reinterpret_cast<const Vec8<T>*>(gu + r * 2 * I + c);
            const auto u = *reinterpret_cast<const Vec8<T>*>(gu + r * 2 * I + I + c);
            Vec8<T> o;
#pragma unroll
            for (int k = 0; k < kVec; ++k) o.v[k] = silu_times(g.v[k], u.v[k]);
            *reinterpret_cast<Vec8<T>*>(out + e * per) = o;
        } else {
            out[e] = silu_times(gu[r * 2 * I + c], gu[r * 2 * I + I + c]);
        }
    }
}

// The gradient of silu_mul: d gate = silu'(gate) * rnd(grad * up), d up = grad * rnd(silu(gate)),
// rounded where ATen's ops (mul, silu_backward) round them, into one dgu (N, 2I).
template <typename T>
__device__ __forceinline__ void silu_mul_grad(T grad, T g, T u, T& dg, T& du) {
    const float gf = to_f(g), gr = to_f(grad), e = __expf(-gf), sig = 1.f / (1.f + e);
    du = from_f<T>(gr * rnd<T>(gf / (1.f + e)));  // silu(gate) exactly as silu_times rounds it
    dg = from_f<T>(rnd<T>(gr * to_f(u)) * sig * (1.f + gf * (1.f - sig)));
}

template <typename T, bool kVectorised>
__global__ void silu_mul_backward_kernel(const T* grad, const T* gu, T* dgu, int64_t N, int64_t I) {
    const int64_t per = kVectorised ? kVec : 1, total = N * I / per;
    for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
         e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        const int64_t r = e * per / I, c = e * per % I, gate = r * 2 * I + c, up = gate + I;
        if constexpr (kVectorised) {
            const auto d = *reinterpret_cast<const Vec8<T>*>(grad + e * per);
            const auto g = *reinterpret_cast<const Vec8<T>*>(gu + gate);
            const auto u = *reinterpret_cast<const Vec8<T>*>(gu + up);
            Vec8<T> dg, du;
#pragma unroll
            for (int k = 0; k < kVec; ++k) silu_mul_grad(d.v[k], g.v[k], u.v[k], dg.v[k], du.v[k]);
            *reinterpret_cast<Vec8<T>*>(dgu + gate) = dg;
            *reinterpret_cast<Vec8<T>*>(dgu + up) = du;
        } else {
            silu_mul_grad(grad[e], gu[gate], gu[up], dgu[gate], dgu[up]);
        }
    }
}

// Decode attention, flash-decoding style: one block per (key chunk, KV head, row), on tensor cores
// (mma.sync m16n8k16, bf16/fp16 in, fp32 out). A warp takes tiles of 16 keys, staged in its own
// shared memory (rows padded by 16 bytes so that ldmatrix is free of bank conflicts). Transposed
// products keep every accumulator useful for a group of at most 8 query heads: S^T (16 keys x 8 heads)
// = K (16 x D) Q^T, then O^T (D x 8 heads) += V^T P^T, with P^T's fragment made from S^T's
// accumulators by movmatrix (an in-register 8x8 transpose). The next tile's keys and values are
// loaded into registers while this one is computed. The block's partial (unnormalised output, max,
// sum) goes to `partial` for the combine kernel. On H200 at batch 64 it took 0.76 ms of a decode step
// where a CUDA-core kernel (fp32 scores, value sums by lane) took 1.22 ms (docs/BENCHMARKS.md).
constexpr int kAttnWarps = 4;
constexpr int kMaxGroup = 8;
constexpr int kKeysPerChunk = kAttnWarps * 32;  // two 16-key tiles per warp

// c += a b on tensor cores: m16n8k16, T inputs (bf16 or fp16), fp32 accumulators, fragments as PTX
// lays them out.
template <typename T>
__device__ __forceinline__ void mma_16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#define KZ_MMA_16816(TYPE)                                                                                       \
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32." TYPE "." TYPE ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, " \
                 "{%0,%1,%2,%3};\n"                                                                              \
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                                                 \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))
    if constexpr (std::is_same_v<T, __half>) KZ_MMA_16816("f16");
    else KZ_MMA_16816("bf16");
#undef KZ_MMA_16816
}

// Two values rounded to T, `lo` in the low half: one register of an mma fragment.
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    const T v[2] = {from_f<T>(lo), from_f<T>(hi)};
    uint32_t r;
    memcpy(&r, v, sizeof r);
    return r;
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t r[4], const void* p, bool trans) {
    const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
    if (trans)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(a));
}

__device__ __forceinline__ uint32_t transpose_8x8(uint32_t x) {
    uint32_t y;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(y) : "r"(x));
    return y;
}

// 16 bytes global -> shared without registers; `bytes` 0 fills the 16 bytes with zeros instead.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(static_cast<uint32_t>(__cvta_generic_to_shared(dst))),
                 "l"(src), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Each warp streams its own 16-key tiles of K and V through a ring of kAttnStages shared-memory stages
// filled by cp.async, so that two tiles are in flight while it computes on a third (the kernel is
// bound by the latency of these loads: a row's keys are few, ~6 tiles a warp at 7B batch 64). The
// ring takes ~102 KB a block at D = 128 (2 blocks an SM); the loads do not pass through registers,
// so registers do not limit the occupancy.
constexpr int kAttnStages = 3;

template <typename T, int D>
constexpr int attention_smem_bytes(int group) {
    constexpr int kRow = D + 8;
    const int stage = kAttnWarps * kAttnStages * 2 * 16 * kRow * static_cast<int>(sizeof(T));
    const int combine = kAttnWarps * (group * D + 2 * group) * static_cast<int>(sizeof(float));
    return stage > combine ? stage : combine;
}

template <typename T, int D, int GROUP>
__global__ void __launch_bounds__(kAttnWarps * 32, 2)
decode_attention_kernel(const T* q, const T* cache, const int64_t* lens, float* partial, T* out, int H, int G, int S,
                        int chunk, float scale) {
    constexpr int kTile = 16, kRow = D + 8;             // staged row: D elements + 16 bytes of padding
    constexpr int kRowVecs = D / kVec, kLoads = kTile * kRowVecs / 32;  // 16-byte copies per lane per tile
    constexpr int kTileElems = kTile * kRow;
    const int split = blockIdx.x, g = blockIdx.y, b = blockIdx.z, splits = gridDim.x;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int grp = lane >> 2, quad = lane & 3;  // mma fragment coordinates
    const int start = split * chunk;

    // Staging (per warp and stage: a K tile, then a V tile), reused after the loop for the warps'
    // partial results.
    extern __shared__ __align__(16) unsigned char smem[];
    T* ring = reinterpret_cast<T*>(smem) + warp * kAttnStages * 2 * kTileElems;

    // Q^T as B fragments (k = dims, n = heads): head `grp` (zero past the group), dims 2*quad + {0, 1}
    // and + 8, per 16 dimensions.
    uint32_t qb[D / 16][2];
    {
        const T* qrow = q + (static_cast<int64_t>(b) * H + g * GROUP + grp) * D;
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            qb[kk][0] = grp < GROUP ? *reinterpret_cast<const uint32_t*>(qrow + kk * 16 + 2 * quad) : 0u;
            qb[kk][1] = grp < GROUP ? *reinterpret_cast<const uint32_t*>(qrow + kk * 16 + 8 + 2 * quad) : 0u;
        }
    }
    // O^T accumulators: per 16 dimensions, rows (dims) grp and grp + 8, columns (heads) 2*quad + {0, 1}.
    float o[D / 16][4];
#pragma unroll
    for (int mb = 0; mb < D / 16; ++mb)
#pragma unroll
        for (int e = 0; e < 4; ++e) o[mb][e] = 0.f;
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};  // heads 2*quad + {0, 1}; l: this lane's keys

    const int64_t key_stride = static_cast<int64_t>(2 * G) * D;
    const T* keys = cache + static_cast<int64_t>(b) * S * key_stride + static_cast<int64_t>(g) * D;
    const T* values = keys + static_cast<int64_t>(G) * D;
    // Copies one tile into `stage`; keys at or past `end` become zeros (a padding key's value must not
    // be NaN: its weight 0 times NaN is NaN). One commit group per tile position: past `end` the
    // callers commit an empty one, so that the wait below counts tiles.
    auto issue = [&](int tile, int stage, int end) {
        T* ks = ring + stage * 2 * kTileElems;
#pragma unroll
        for (int i = 0; i < kLoads; ++i) {
            const int v = lane + 32 * i, r = v / kRowVecs, c = v % kRowVecs, key = tile + r;
            const bool in = key < end;
            const int64_t off = (in ? key : 0) * key_stride + c * kVec;
            cp_async16(ks + r * kRow + c * kVec, keys + off, in ? 16 : 0);
            cp_async16(ks + kTileElems + r * kRow + c * kVec, values + off, in ? 16 : 0);
        }
        cp_async_commit();
    };
    constexpr int kStride = kAttnWarps * kTile;
    const int first = start + warp * kTile;
    const int end = min(start + chunk, static_cast<int>(lens[b]) + 1);
#pragma unroll
    for (int st = 0; st < kAttnStages - 1; ++st) {
        if (first + st * kStride < end) issue(first + st * kStride, st, end);
        else cp_async_commit();
    }
    int stage = 0;
    for (int tile = first; tile < end; tile += kStride) {
        // The tile kAttnStages - 1 ahead goes where the previous iteration's was: every lane is done
        // reading it.
        __syncwarp();
        const int ahead = tile + (kAttnStages - 1) * kStride;
        const int ahead_stage = stage == 0 ? kAttnStages - 1 : stage - 1;
        if (ahead < end) issue(ahead, ahead_stage, end);
        else cp_async_commit();
        cp_async_wait<kAttnStages - 1>();  // this lane's copies of `tile` are done ...
        __syncwarp();                       // ... and every lane's are visible
        const T* ks = ring + stage * 2 * kTileElems;
        const T* vs = ks + kTileElems;
        stage = stage == kAttnStages - 1 ? 0 : stage + 1;

        // S^T = K Q^T: rows keys grp and grp + 8, columns heads 2*quad + {0, 1}.
        float st[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kk = 0; kk < D / 16; ++kk) {
            uint32_t ka[4];  // A fragments: keys (lane & 8) + (lane & 7), dims kk*16 + (lane >= 16) * 8
            ldmatrix_x4(ka, ks + ((lane & 8) + (lane & 7)) * kRow + kk * 16 + (lane >> 4) * 8, false);
            mma_16816<T>(st, ka, qb[kk][0], qb[kk][1]);
        }
        // Online softmax per head over the tile's 16 keys (the 8 lanes of one quad position share a head).
        const bool valid_lo = tile + grp < end, valid_hi = tile + grp + 8 < end;
        float p[4];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const float s_lo = valid_lo ? st[j] * scale : -INFINITY, s_hi = valid_hi ? st[2 + j] * scale : -INFINITY;
            float tmax = fmaxf(s_lo, s_hi);
#pragma unroll
            for (int o_ = 4; o_ < 32; o_ <<= 1) tmax = fmaxf(tmax, __shfl_xor_sync(0xffffffffu, tmax, o_));
            const float m_new = fmaxf(m[j], tmax);  // finite: the tile's first key is valid
            const float corr = __expf(m[j] - m_new);
            p[j] = __expf(s_lo - m_new);
            p[2 + j] = __expf(s_hi - m_new);
            l[j] = l[j] * corr + p[j] + p[2 + j];
            m[j] = m_new;
#pragma unroll
            for (int mb = 0; mb < D / 16; ++mb) o[mb][j] *= corr, o[mb][2 + j] *= corr;
        }
        // P^T as B fragments (k = keys, n = heads): S^T's 8x8 blocks transposed in registers.
        const uint32_t pb0 = transpose_8x8(pack2<T>(p[0], p[1])), pb1 = transpose_8x8(pack2<T>(p[2], p[3]));
        // O^T += V^T P^T.
#pragma unroll
        for (int mb = 0; mb < D / 16; ++mb) {
            uint32_t va[4];  // A fragments of V^T: keys (lane >= 16) * 8 + (lane & 7), dims mb*16 + (lane & 8)
            ldmatrix_x4(va, vs + ((lane >> 4) * 8 + (lane & 7)) * kRow + mb * 16 + (lane & 8), true);
            mma_16816<T>(o[mb], va, pb0, pb1);
        }
    }
    // This warp's sums over all its keys: the 8 lanes of a quad position hold parts of the same heads.
#pragma unroll
    for (int j = 0; j < 2; ++j)
#pragma unroll
        for (int o_ = 4; o_ < 32; o_ <<= 1) l[j] += __shfl_xor_sync(0xffffffffu, l[j], o_);

    cp_async_wait<0>();
    __syncthreads();  // staging is done: the area holds the warps' results now
    float* sm_acc = reinterpret_cast<float*>(smem);          // [warp][head][D]
    float* sm_m = sm_acc + kAttnWarps * GROUP * D;            // [warp][head]
    float* sm_l = sm_m + kAttnWarps * GROUP;
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        const int h = 2 * quad + j;
        if (h >= GROUP) continue;
        if (grp == 0) sm_m[warp * GROUP + h] = m[j], sm_l[warp * GROUP + h] = l[j];
#pragma unroll
        for (int mb = 0; mb < D / 16; ++mb) {
            sm_acc[(warp * GROUP + h) * D + mb * 16 + grp] = o[mb][j];
            sm_acc[(warp * GROUP + h) * D + mb * 16 + grp + 8] = o[mb][2 + j];
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < GROUP * D; idx += blockDim.x) {
        const int h = idx / D, d = idx % D;
        float M = -INFINITY;
        for (int w = 0; w < kAttnWarps; ++w) M = fmaxf(M, sm_m[w * GROUP + h]);
        float L = 0.f, A = 0.f;
        if (M != -INFINITY) {
            for (int w = 0; w < kAttnWarps; ++w) {
                const float f = __expf(sm_m[w * GROUP + h] - M);
                L += sm_l[w * GROUP + h] * f;
                A += sm_acc[(w * GROUP + h) * D + d] * f;
            }
        }
        const int64_t bh = static_cast<int64_t>(b) * H + g * GROUP + h;
        if (splits == 1) {  // the whole row: the result itself (every row has at least one key)
            out[bh * D + d] = from_f<T>(A / L);
            continue;
        }
        float* part = partial + (bh * splits + split) * (D + 2);
        part[d] = A;
        if (d == 0) part[D] = M, part[D + 1] = L;
    }
}

template <typename T>
__global__ void decode_combine_kernel(const float* partial, T* out, int splits, int D) {
    const int64_t bh = blockIdx.x;  // b * H + head
    const float* p = partial + bh * splits * (D + 2);
    float M = -INFINITY;
    for (int s = 0; s < splits; ++s) M = fmaxf(M, p[s * (D + 2) + D]);
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float L = 0.f, A = 0.f;
        for (int s = 0; s < splits; ++s) {
            const float* ps = p + s * (D + 2);
            if (ps[D] == -INFINITY) continue;  // an empty chunk
            const float f = __expf(ps[D] - M);
            L += ps[D + 1] * f;
            A += ps[d] * f;
        }
        out[bh * D + d] = from_f<T>(A / L);
    }
}

// The exponential race (sample_rows): each block takes `chunk` logits of one row, a multiple of 4,
// so that the 4 logits sharing a Philox output lie in one block.
constexpr int kSampleThreads = 256;
constexpr int64_t kSampleMinChunk = 2048;

// Merges a log-sum-exp (max m2, sum s2 of exp(x - m2)) into (m, s); s == 0 is empty.
__device__ __forceinline__ void lse_merge(float& m, float& s, float m2, float s2) {
    if (s2 == 0.f) return;
    if (s == 0.f) {
        m = m2, s = s2;
    } else if (m2 > m) {
        s = s * expf(m - m2) + s2, m = m2;
    } else {
        s += s2 * expf(m2 - m);
    }
}

// The better of two race entries: the higher score, the lower token on a tie (the order a single
// pass would keep).
__device__ __forceinline__ void race_merge(float& best, int& token, float best2, int token2) {
    if (best2 > best || (best2 == best && token2 < token)) best = best2, token = token2;
}

// Reduces the warp's (best, token, m, s) into every lane's.
__device__ __forceinline__ void sample_warp_reduce(float& best, int& token, float& m, float& s) {
    for (int o = 16; o > 0; o >>= 1) {
        race_merge(best, token, __shfl_xor_sync(0xffffffffu, best, o), __shfl_xor_sync(0xffffffffu, token, o));
        lse_merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
    }
}

// Reduces every thread's (best, token, m, s) into thread 0's.
__device__ __forceinline__ void sample_block_reduce(float& best, int& token, float& m, float& s) {
    sample_warp_reduce(best, token, m, s);
    __shared__ float sb[kSampleThreads / 32], sm[kSampleThreads / 32], ss[kSampleThreads / 32];
    __shared__ int st[kSampleThreads / 32];
    const int warp = threadIdx.x >> 5;
    if ((threadIdx.x & 31) == 0) sb[warp] = best, st[warp] = token, sm[warp] = m, ss[warp] = s;
    __syncthreads();
    if (threadIdx.x == 0)
        for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) race_merge(best, token, sb[w], st[w]), lse_merge(m, s, sm[w], ss[w]);
}

// Grid (rows, chunks). partial[(row * chunks + chunk) * 4 ..] = best score, its token (int bits),
// max and sum of the chunk's scaled logits. kVec4: V a multiple of 4 and the logits 8-byte aligned,
// so that each thread's 4 logits are one load. Bound by arithmetic more than by memory (a quarter
// of a Philox output, two logarithms and an exponential a logit), so the exponentials and the outer
// logarithm are the fast intrinsics: their errors (relative ~1e-6; absolute < 4e-7 for the
// logarithm near 1) move a log-probability or a score by about that much.
template <typename T, bool kVec4>
__global__ void __launch_bounds__(kSampleThreads) sample_race_kernel(const T* logits, int64_t V, int64_t chunk, float temperature,
                                                                      uint64_t seed, uint64_t offset, float* partial) {
    const int64_t row = blockIdx.x;
    const T* x = logits + row * V;
    const int64_t begin = blockIdx.y * chunk, end = min(V, begin + chunk);
    const int64_t groups_per_row = (V + 3) / 4;
    const uint2 key = make_uint2(static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
    const uint64_t counter = offset / 4;
    const bool scaled = temperature != 1.f;
    float best = -INFINITY, m = 0.f, s = 0.f;
    int token = 0x7fffffff;
    for (int64_t v0 = begin + 4 * threadIdx.x; v0 < end; v0 += 4 * kSampleThreads) {
        const uint64_t subsequence = static_cast<uint64_t>(row * groups_per_row + v0 / 4);
        // What curand_init(seed, subsequence, offset) then curand4 returns, without the extra round.
        const uint4 ctr = make_uint4(static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32),
                                     static_cast<uint32_t>(subsequence), static_cast<uint32_t>(subsequence >> 32));
        const uint4 r = curand_Philox4x32_10(ctr, key);
        const uint32_t bits[4] = {r.x, r.y, r.z, r.w};
        float z[4];
        if constexpr (kVec4) {
            const VecN<T, 4> v4 = *reinterpret_cast<const VecN<T, 4>*>(x + v0);
#pragma unroll
            for (int j = 0; j < 4; ++j) z[j] = to_f(v4.v[j]);
        } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) z[j] = v0 + j < end ? to_f(x[v0 + j]) : -INFINITY;
        }
        float m4 = -INFINITY;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            if (scaled) z[j] /= temperature;
            if (!(z[j] > -INFINITY)) z[j] = -INFINITY;  // a masked token (or NaN): never drawn, no mass
            m4 = fmaxf(m4, z[j]);
            if (z[j] == -INFINITY) continue;
            // u in [2^-24, 1 - 2^-24]: E = -log(u) > 0 and finite; the inner logarithm is the
            // accurate one, since u near 1 (E near 0: the likeliest winners) needs it.
            const float u = (static_cast<float>(bits[j] >> 9) + 0.5f) * (1.f / 8388608.f);
            const float score = z[j] - __logf(-logf(u));
            if (score > best) best = score, token = static_cast<int>(v0 + j);
        }
        if (m4 == -INFINITY) continue;
        float s4 = 0.f;
#pragma unroll
        for (int j = 0; j < 4; ++j) s4 += __expf(z[j] - m4);
        lse_merge(m, s, m4, s4);
    }
    sample_block_reduce(best, token, m, s);
    if (threadIdx.x == 0) {
        float* p = partial + (row * gridDim.y + blockIdx.y) * 4;
        p[0] = best, p[1] = __int_as_float(token), p[2] = m, p[3] = s;
    }
}

// One warp a row: the chunks' entries merged; the token and its log-probability written.
template <typename T>
__global__ void sample_combine_kernel(const T* logits, int64_t V, int chunks, float temperature, const float* partial,
                                      int64_t* tokens, float* logprobs) {
    const int64_t row = blockIdx.x;
    float best = -INFINITY, m = 0.f, s = 0.f;
    int token = 0x7fffffff;
    for (int c = threadIdx.x; c < chunks; c += 32) {
        const float* p = partial + (row * chunks + c) * 4;
        race_merge(best, token, p[0], __float_as_int(p[1]));
        lse_merge(m, s, p[2], p[3]);
    }
    sample_warp_reduce(best, token, m, s);
    if (threadIdx.x != 0) return;
    if (token < 0 || token >= V) {  // no finite logit
        tokens[row] = 0, logprobs[row] = NAN;
        return;
    }
    tokens[row] = token;
    logprobs[row] = (to_f(logits[row * V + token]) / temperature - m) - logf(s);
}

template <typename T>
void add_rms_norm_t(void* h, const void* x, const void* w, void* out, int64_t rows, int64_t C, float eps, cudaStream_t s) {
    if (rows == 0) return;
    const int64_t nvec = C / kVec;
    const int64_t threads = std::min<int64_t>(1024, (nvec + 31) / 32 * 32);
    add_rms_norm_kernel<T><<<static_cast<unsigned>(rows), static_cast<unsigned>(threads), 0, s>>>(
        static_cast<T*>(h), static_cast<const T*>(x), static_cast<const T*>(w), static_cast<T*>(out), static_cast<int>(C), eps);
    check_launch("add_rms_norm");
}

template <typename T>
void rope_t(const void* qkv, const void* bias, const int64_t* pos, const float* inv_freq, void* q_out, void* cache,
            int64_t N, int64_t T_, int64_t H, int64_t G, int64_t D, int64_t S, cudaStream_t s) {
    if (N == 0) return;
    const int64_t half = D / 2;
    if (half < 1 || half > 1024) throw std::runtime_error("rope_qkv_to_cache: head_dim " + std::to_string(D));
    const int64_t per_group = std::max<int64_t>(1, std::min<int64_t>(H + 2 * G, 256 / half));  // heads a block takes at once
    const int64_t groups = (H + 2 * G + per_group - 1) / per_group;
    // Blocks for about 4 an SM: one per token when there are that many tokens.
    const int64_t per_token = std::clamp<int64_t>((4 * sm_count() + N - 1) / N, 1, groups);
    const dim3 grid(static_cast<unsigned>(N), static_cast<unsigned>(per_token));
    rope_qkv_kernel<T><<<grid, static_cast<unsigned>(half * per_group), 0, s>>>(
        static_cast<const T*>(qkv), static_cast<const T*>(bias), pos, inv_freq, static_cast<T*>(q_out),
        static_cast<T*>(cache), static_cast<int>(T_), static_cast<int>(H), static_cast<int>(G), static_cast<int>(D),
        static_cast<int>(S));
    check_launch("rope_qkv_to_cache");
}

// The SiLU x up kernels' grid-stride launch over N x I outputs: 8 a thread where I is a multiple of 8
// and every pointer 16-byte aligned, else one; 256 threads a block, at most 65536 blocks (0: nothing to do).
struct SiluLaunch {
    bool vectorised;
    unsigned blocks;
};
SiluLaunch silu_launch(int64_t N, int64_t I, std::initializer_list<const void*> ptrs) {
    const bool vectorised = I % kVec == 0 && aligned16(ptrs);
    const int64_t total = N * I / (vectorised ? kVec : 1);
    return {vectorised, static_cast<unsigned>(std::min<int64_t>((total + 255) / 256, 65536))};
}

template <typename T>
void silu_mul_t(const void* gu, void* out, int64_t N, int64_t I, cudaStream_t s) {
    const auto [vectorised, blocks] = silu_launch(N, I, {gu, out});
    if (blocks == 0) return;
    if (vectorised) silu_mul_kernel<T, true><<<blocks, 256, 0, s>>>(static_cast<const T*>(gu), static_cast<T*>(out), N, I);
    else silu_mul_kernel<T, false><<<blocks, 256, 0, s>>>(static_cast<const T*>(gu), static_cast<T*>(out), N, I);
    check_launch("silu_mul");
}

template <typename T>
void silu_mul_backward_t(const void* grad, const void* gu, void* dgu, int64_t N, int64_t I, cudaStream_t s) {
    const auto [vectorised, blocks] = silu_launch(N, I, {grad, gu, dgu});
    if (blocks == 0) return;
    auto* d = static_cast<const T*>(grad);
    auto* x = static_cast<const T*>(gu);
    auto* out = static_cast<T*>(dgu);
    if (vectorised) silu_mul_backward_kernel<T, true><<<blocks, 256, 0, s>>>(d, x, out, N, I);
    else silu_mul_backward_kernel<T, false><<<blocks, 256, 0, s>>>(d, x, out, N, I);
    check_launch("silu_mul_backward");
}

template <typename T, int D, int GROUP>
void launch_attention(dim3 grid, cudaStream_t s, const T* q, const T* cache, const int64_t* lens, float* partial, T* out, int64_t H, int64_t G, int64_t S, int64_t chunk, float scale) {
    constexpr int bytes = attention_smem_bytes<T, D>(GROUP);
    // More than the 48 KB a block gets unasked: allowed once per kernel (per process; not a stream
    // operation, so a first call inside a graph capture is fine).
    static const cudaError_t allowed =
        cudaFuncSetAttribute(decode_attention_kernel<T, D, GROUP>, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
    if (allowed != cudaSuccess)
        throw std::runtime_error(std::string("decode_attention: cudaFuncSetAttribute: ") + cudaGetErrorString(allowed));
    decode_attention_kernel<T, D, GROUP><<<grid, kAttnWarps * 32, bytes, s>>>(
        q, cache, lens, partial, out, static_cast<int>(H), static_cast<int>(G), static_cast<int>(S), static_cast<int>(chunk), scale);
}

template <typename T, int D>
void launch_attention_d(dim3 grid, cudaStream_t s, const T* q, const T* cache, const int64_t* lens, float* partial, T* out, int64_t H, int64_t G, int64_t S, int64_t chunk, float scale) {
    switch (H / G) {
        case 1: return launch_attention<T, D, 1>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
        case 2: return launch_attention<T, D, 2>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
        case 3: return launch_attention<T, D, 3>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
        case 4: return launch_attention<T, D, 4>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
        case 5: return launch_attention<T, D, 5>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
        case 6: return launch_attention<T, D, 6>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
        case 7: return launch_attention<T, D, 7>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
        default: return launch_attention<T, D, 8>(grid, s, q, cache, lens, partial, out, H, G, S, chunk, scale);
    }
}

template <typename T>
void decode_attention_t(const void* q, const void* cache, const int64_t* lens, float* partial, int64_t splits,
                        void* out, int64_t B, int64_t H, int64_t G, int64_t D, int64_t S, float scale, cudaStream_t s) {
    const int64_t chunk = (S + splits - 1) / splits;
    const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(G), static_cast<unsigned>(B));
    auto* qp = static_cast<const T*>(q);
    auto* cp = static_cast<const T*>(cache);
    auto* op = static_cast<T*>(out);
    if (D == 128) launch_attention_d<T, 128>(grid, s, qp, cp, lens, partial, op, H, G, S, chunk, scale);
    else launch_attention_d<T, 64>(grid, s, qp, cp, lens, partial, op, H, G, S, chunk, scale);
    check_launch("decode_attention");
    if (splits == 1) return;  // the kernel wrote the result
    decode_combine_kernel<T><<<static_cast<unsigned>(B * H), static_cast<unsigned>(D), 0, s>>>(
        partial, op, static_cast<int>(splits), static_cast<int>(D));
    check_launch("decode_attention combine");
}

template <typename T>
void sample_rows_t(const void* logits, int64_t rows, int64_t V, float temperature, uint64_t seed, uint64_t offset,
                   int64_t chunks, float* partial, int64_t* tokens, float* logprobs, cudaStream_t stream) {
    const int64_t chunk = ((V + chunks - 1) / chunks + 3) / 4 * 4;
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(chunks));
    if (V % 4 == 0 && reinterpret_cast<uintptr_t>(logits) % 8 == 0)
        sample_race_kernel<T, true><<<grid, kSampleThreads, 0, stream>>>(static_cast<const T*>(logits), V, chunk, temperature,
                                                                        seed, offset, partial);
    else
        sample_race_kernel<T, false><<<grid, kSampleThreads, 0, stream>>>(static_cast<const T*>(logits), V, chunk, temperature,
                                                                         seed, offset, partial);
    check_launch("sample_rows race");
    sample_combine_kernel<T><<<static_cast<unsigned>(rows), 32, 0, stream>>>(static_cast<const T*>(logits), V, static_cast<int>(chunks),
                                                                            temperature, partial, tokens, logprobs);
    check_launch("sample_rows combine");
}

}  // namespace

void add_rms_norm(Half dtype, void* h, const void* x, const void* weight, void* out, int64_t rows, int64_t C, float eps,
                  cudaStream_t stream) {
    if (dtype == Half::bf16) add_rms_norm_t<__nv_bfloat16>(h, x, weight, out, rows, C, eps, stream);
    else add_rms_norm_t<__half>(h, x, weight, out, rows, C, eps, stream);
}

void rope_qkv_to_cache(Half dtype, const void* qkv, const void* bias, const int64_t* positions, const float* inv_freq,
                       void* q_out, void* cache, int64_t N, int64_t T, int64_t H, int64_t G, int64_t D, int64_t S,
                       cudaStream_t stream) {
    if (dtype == Half::bf16) rope_t<__nv_bfloat16>(qkv, bias, positions, inv_freq, q_out, cache, N, T, H, G, D, S, stream);
    else rope_t<__half>(qkv, bias, positions, inv_freq, q_out, cache, N, T, H, G, D, S, stream);
}

void silu_mul(Half dtype, const void* gu, void* out, int64_t N, int64_t I, cudaStream_t stream) {
    if (dtype == Half::bf16) silu_mul_t<__nv_bfloat16>(gu, out, N, I, stream);
    else silu_mul_t<__half>(gu, out, N, I, stream);
}

void silu_mul_backward(Half dtype, const void* grad, const void* gu, void* dgu, int64_t N, int64_t I, cudaStream_t stream) {
    if (dtype == Half::bf16) silu_mul_backward_t<__nv_bfloat16>(grad, gu, dgu, N, I, stream);
    else silu_mul_backward_t<__half>(grad, gu, dgu, N, I, stream);
}

bool aligned16(std::initializer_list<const void*> ptrs) {
    for (const void* p : ptrs)
        if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
    return true;
}

bool decode_attention_supported(int64_t H, int64_t G, int64_t D) {
    return (D == 64 || D == 128) && G > 0 && H % G == 0 && H / G <= kMaxGroup;
}

int64_t decode_attention_splits(int64_t B, int64_t G, int64_t S) {
    // A fixed number of chunks for tuning (the benchmark sweeps it): KZ_DECODE_ATTENTION_SPLITS, read once.
    static const int64_t fixed = [] {
        const char* v = std::getenv("KZ_DECODE_ATTENTION_SPLITS");
        if (!v || !*v) return int64_t{0};
        char* end = nullptr;
        const long n = std::strtol(v, &end, 10);
        if (*end != '\0' || n < 1 || n > 1024)
            throw std::invalid_argument(std::string("KZ_DECODE_ATTENTION_SPLITS must be an integer in [1, 1024], not '") + v + "'");
        return static_cast<int64_t>(n);
    }();
    if (fixed > 0) return std::min<int64_t>(fixed, std::max<int64_t>(S, 1));
    // As many chunks as give every SM a block (B * G * splits >= SMs), of at least two tiles per
    // warp, at most 32: a batch with a block per SM already is faster in one chunk, without the
    // combine pass (H200, 7B at batch 64, 256 rows x heads on 132 SMs: 1 chunk 0.71 ms a step,
    // 2 or 4 chunks 0.75-0.78 plus 0.11 of combine, with the register-staged kernel before the
    // cp.async ring; the ring's kernel takes 0.41 ms in one chunk and has not been swept since).
    const int64_t sms = sm_count();
    const int64_t rows = std::max<int64_t>(B * G, 1);
    const int64_t by_sms = (sms + rows - 1) / rows, by_len = (S + kKeysPerChunk - 1) / kKeysPerChunk;
    return std::max<int64_t>(1, std::min({by_sms, by_len, int64_t{32}}));
}

void decode_attention(Half dtype, const void* q, const void* cache, const int64_t* lens, float* partial, int64_t splits,
                      void* out, int64_t B, int64_t H, int64_t G, int64_t D, int64_t S, float scale, cudaStream_t stream) {
    if (!decode_attention_supported(H, G, D))
        throw std::runtime_error("decode_attention: unsupported shape (H " + std::to_string(H) + ", G " +
                                 std::to_string(G) + ", D " + std::to_string(D) + ")");
    if (splits < 1 || splits > std::max<int64_t>(S, 1))
        throw std::runtime_error("decode_attention: " + std::to_string(splits) + " key chunks for " + std::to_string(S) + " slots");
    if (B == 0) return;
    if (dtype == Half::bf16)
        decode_attention_t<__nv_bfloat16>(q, cache, lens, partial, splits, out, B, H, G, D, S, scale, stream);
    else decode_attention_t<__half>(q, cache, lens, partial, splits, out, B, H, G, D, S, scale, stream);
}

int64_t sample_chunks(int64_t rows, int64_t V) {
    // About 8 blocks an SM in all, each of at least kSampleMinChunk logits.
    const int64_t r = std::max<int64_t>(rows, 1);
    const int64_t by_sms = (8 * sm_count() + r - 1) / r, by_len = (V + kSampleMinChunk - 1) / kSampleMinChunk;
    return std::max<int64_t>(1, std::min(by_sms, by_len));
}

void sample_rows(Half dtype, const void* logits, int64_t rows, int64_t V, float temperature, uint64_t seed, uint64_t offset,
                 int64_t chunks, float* partial, int64_t* tokens, float* logprobs, cudaStream_t stream) {
    if (!(temperature > 0.f)) throw std::runtime_error("sample_rows: temperature must be > 0");
    if (V <= 0 || V > 0x7fffffff) throw std::runtime_error("sample_rows: vocabulary of " + std::to_string(V) + " tokens");
    if (rows > 0x7fffffff) throw std::runtime_error("sample_rows: " + std::to_string(rows) + " rows");
    if (chunks < 1 || chunks > std::min<int64_t>(65535, V))
        throw std::runtime_error("sample_rows: " + std::to_string(chunks) + " blocks a row for " + std::to_string(V) + " logits");
    if (rows == 0) return;
    if (dtype == Half::bf16) sample_rows_t<__nv_bfloat16>(logits, rows, V, temperature, seed, offset, chunks, partial, tokens, logprobs, stream);
    else sample_rows_t<__half>(logits, rows, V, temperature, seed, offset, chunks, partial, tokens, logprobs, stream);
}

}  // namespace kz::cuda
