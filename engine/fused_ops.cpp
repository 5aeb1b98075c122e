#include "engine/fused_ops.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#ifdef KZ_CUDA_KERNELS
#include <ATen/cuda/CUDAGeneratorImpl.h>
#include <c10/cuda/CUDAStream.h>

#include <mutex>

#include "engine/cuda_kernels.h"
#include "engine/decode_gemm.h"
#endif

namespace kz::fused {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("fused op: " + what); }

void check(bool ok, const char* what) {
    if (!ok) fail(what);
}

}  // namespace

#ifdef KZ_CUDA_KERNELS

namespace {

cuda::Half half_of(const torch::Tensor& t) {
    if (t.scalar_type() == torch::kBFloat16) return cuda::Half::bf16;
    if (t.scalar_type() == torch::kFloat16) return cuda::Half::fp16;
    fail("needs bf16 or fp16, got " + std::string(c10::toString(t.scalar_type())));
}

cudaStream_t stream_of(const torch::Tensor& t) {
    check(t.is_cuda(), "needs CUDA tensors");
    return c10::cuda::getCurrentCUDAStream(t.device().index()).stream();
}

}  // namespace

bool available() { return true; }

bool norm_supported(int64_t C) { return C % 8 == 0 && C <= 32768; }

bool usable(torch::Device device, torch::ScalarType dtype, int64_t C, int64_t H, int64_t G, int64_t D) {
    return device.is_cuda() && (dtype == torch::kBFloat16 || dtype == torch::kFloat16) && norm_supported(C) &&
           cuda::decode_attention_supported(H, G, D);
}

torch::Tensor add_rms_norm_(torch::Tensor& h, const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    check(h.is_contiguous(), "add_rms_norm_: h must be contiguous");
    const int64_t C = h.size(-1);
    check(norm_supported(C), "add_rms_norm_: C must be a multiple of 8, at most 32768");
    check(weight.numel() == C && weight.scalar_type() == h.scalar_type(),
          "add_rms_norm_: weight must be (C) of h's dtype");
    torch::Tensor xc;
    if (x.defined()) {
        check(x.sizes() == h.sizes() && x.scalar_type() == h.scalar_type(), "add_rms_norm_: x must match h");
        xc = x.contiguous();
    }
    auto out = torch::empty_like(h);
    cuda::add_rms_norm(half_of(h), h.data_ptr(), xc.defined() ? xc.data_ptr() : nullptr, weight.contiguous().data_ptr(),
                       out.data_ptr(), h.numel() / C, C, static_cast<float>(eps), stream_of(h));
    return out;
}

torch::Tensor rope_qkv_to_cache(const torch::Tensor& qkv, const torch::Tensor& bias, const torch::Tensor& positions,
                                const torch::Tensor& inv_freq, torch::Tensor& cache, int64_t H, int64_t G) {
    check(qkv.dim() == 4 && qkv.size(2) == H + 2 * G, "rope_qkv_to_cache: qkv must be (B, T, H+2G, D)");
    const int64_t B = qkv.size(0), T = qkv.size(1), D = qkv.size(3);
    check(cache.dim() == 4 && cache.size(0) == B && cache.size(2) == 2 * G && cache.size(3) == D &&
              cache.is_contiguous() && cache.scalar_type() == qkv.scalar_type(),
          "rope_qkv_to_cache: cache must be contiguous (B, S, 2G, D) of qkv's dtype");
    check(positions.sizes() == torch::IntArrayRef({B, T}) && positions.scalar_type() == torch::kInt64,
          "rope_qkv_to_cache: positions must be (B, T) int64");
    check(inv_freq.numel() == D / 2 && inv_freq.scalar_type() == torch::kFloat32,
          "rope_qkv_to_cache: inv_freq must be (D/2) fp32");
    check(!bias.defined() || (bias.numel() == (H + 2 * G) * D && bias.scalar_type() == qkv.scalar_type()),
          "rope_qkv_to_cache: bias must be ((H+2G)*D) of qkv's dtype");
    auto src = qkv.contiguous();
    auto pos = positions.contiguous();
    auto bc = bias.defined() ? bias.contiguous() : torch::Tensor();
    auto q = torch::empty({B, T, H, D}, qkv.options());
    cuda::rope_qkv_to_cache(half_of(qkv), src.data_ptr(), bc.defined() ? bc.data_ptr() : nullptr,
                            pos.data_ptr<int64_t>(), inv_freq.contiguous().data_ptr<float>(), q.data_ptr(),
                            cache.data_ptr(), B * T, T, H, G, D, cache.size(1), stream_of(qkv));
    return q;
}

torch::Tensor silu_mul(const torch::Tensor& gu) {
    const int64_t I = gu.size(-1) / 2;
    check(gu.size(-1) == 2 * I, "silu_mul: the last dimension must be even");
    auto src = gu.contiguous();
    auto sizes = gu.sizes().vec();
    sizes.back() = I;
    auto out = torch::empty(sizes, gu.options());
    cuda::silu_mul(half_of(gu), src.data_ptr(), out.data_ptr(), gu.numel() / (2 * I), I, stream_of(gu));
    return out;
}

torch::Tensor silu_mul_backward(const torch::Tensor& grad, const torch::Tensor& gu) {
    const int64_t I = gu.size(-1) / 2;
    check(gu.size(-1) == 2 * I && grad.dim() == gu.dim() && grad.size(-1) == I && grad.numel() * 2 == gu.numel(),
          "silu_mul_backward: grad must be (..., I) for gu (..., 2I)");
    check(grad.scalar_type() == gu.scalar_type(), "silu_mul_backward: grad and gu must have one dtype");
    auto g = grad.contiguous();
    auto src = gu.contiguous();
    auto out = torch::empty(gu.sizes(), gu.options());
    cuda::silu_mul_backward(half_of(gu), g.data_ptr(), src.data_ptr(), out.data_ptr(), gu.numel() / (2 * I), I,
                            stream_of(gu));
    return out;
}

bool elementwise_usable(const torch::Tensor& t) {
    return t.is_cuda() && (t.scalar_type() == torch::kBFloat16 || t.scalar_type() == torch::kFloat16);
}

torch::Tensor decode_linear(const torch::Tensor& x, const torch::Tensor& weight) {
    check(x.dim() >= 1 && weight.dim() == 2 && x.size(-1) == weight.size(1),
          "decode_linear: x must be (..., K), weight (N, K)");
    check(x.scalar_type() == weight.scalar_type() && x.device() == weight.device(),
          "decode_linear: x and weight must share dtype and device");
    const int64_t N = weight.size(0), K = weight.size(1), M = x.numel() / std::max<int64_t>(K, 1);
    auto xc = x.contiguous();
    auto wc = weight.contiguous();
    auto sizes = x.sizes().vec();
    sizes.back() = N;
    auto y = torch::empty(sizes, x.options());
    if (M == 0 || N == 0) return y;
    if (K == 0) return y.zero_();
    if (!cuda::aligned16({xc.data_ptr(), wc.data_ptr(), y.data_ptr()})) return torch::nn::functional::linear(x, weight);
    cuda::decode_gemm(half_of(x), xc.data_ptr(), wc.data_ptr(), y.data_ptr(), M, N, K, stream_of(x));
    return y;
}

torch::Tensor decode_attention(const torch::Tensor& q, const torch::Tensor& cache, const torch::Tensor& lens,
                               double scale) {
    check(q.dim() == 3 && cache.dim() == 4 && cache.size(0) == q.size(0) && cache.size(3) == q.size(2),
          "decode_attention: q must be (B, H, D) and cache (B, S, 2G, D)");
    check(cache.is_contiguous() && cache.scalar_type() == q.scalar_type(),
          "decode_attention: cache must be contiguous, of q's dtype");
    check(lens.numel() == q.size(0) && lens.scalar_type() == torch::kInt64, "decode_attention: lens must be (B) int64");
    const int64_t B = q.size(0), H = q.size(1), D = q.size(2), S = cache.size(1), G = cache.size(2) / 2;
    check(cuda::decode_attention_supported(H, G, D), "decode_attention: unsupported head layout");
    auto qc = q.contiguous();
    auto lc = lens.contiguous();
    const int64_t splits = cuda::decode_attention_splits(B, G, S);
    auto partial = torch::empty({splits > 1 ? B * H * splits * (D + 2) : 0}, q.options().dtype(torch::kFloat32));
    auto out = torch::empty({B, H, D}, q.options());
    cuda::decode_attention(half_of(q), qc.data_ptr(), cache.data_ptr(), lc.data_ptr<int64_t>(),
                           partial.data_ptr<float>(), splits, out.data_ptr(), B, H, G, D, S, static_cast<float>(scale),
                           stream_of(q));
    return out;
}

std::pair<torch::Tensor, torch::Tensor> sample(const torch::Tensor& logits, double temperature, at::Generator& gen) {
    check(logits.dim() == 2 && logits.size(1) > 0, "sample: logits must be (B, V) with V > 0");
    check(temperature > 0.0, "sample: temperature must be > 0");
    check(gen.device().is_cuda(), "sample: needs a CUDA generator");
    const int64_t B = logits.size(0), V = logits.size(1);
    auto x = logits.contiguous();
    const int64_t chunks = cuda::sample_chunks(B, V);
    auto partial = torch::empty({4 * B * chunks}, x.options().dtype(torch::kFloat32));
    auto tokens = torch::empty({B}, x.options().dtype(torch::kInt64));
    auto logprobs = torch::empty({B}, x.options().dtype(torch::kFloat32));
    uint64_t seed = 0, offset = 0;
    {
        auto* g = gen.get<at::CUDAGeneratorImpl>();
        std::lock_guard<std::mutex> lock(gen.mutex());
        std::tie(seed, offset) = g->philox_engine_inputs(4);
    }
    cuda::sample_rows(half_of(x), x.data_ptr(), B, V, static_cast<float>(temperature), seed, offset, chunks,
                      partial.data_ptr<float>(), tokens.data_ptr<int64_t>(), logprobs.data_ptr<float>(), stream_of(x));
    return {tokens, logprobs};
}

#else  // a build without nvcc: generation uses ATen's kernels

bool available() { return false; }
bool usable(torch::Device, torch::ScalarType, int64_t, int64_t, int64_t, int64_t) { return false; }
torch::Tensor add_rms_norm_(torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double) { fail("not built"); }
torch::Tensor rope_qkv_to_cache(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, const torch::Tensor&,
                                torch::Tensor&, int64_t, int64_t) {
    fail("not built");
}
torch::Tensor silu_mul(const torch::Tensor&) { fail("not built"); }
torch::Tensor silu_mul_backward(const torch::Tensor&, const torch::Tensor&) { fail("not built"); }
bool elementwise_usable(const torch::Tensor&) { return false; }
torch::Tensor decode_linear(const torch::Tensor&, const torch::Tensor&) { fail("not built"); }
torch::Tensor decode_attention(const torch::Tensor&, const torch::Tensor&, const torch::Tensor&, double) {
    fail("not built");
}
std::pair<torch::Tensor, torch::Tensor> sample(const torch::Tensor&, double, at::Generator&) { fail("not built"); }

#endif

}  // namespace kz::fused
