// The engine's CUDA kernels against ATen's ops on random inputs (GPU only): every kernel, both
// head sizes, every group size, ragged key counts that end mid-tile, bf16 and fp16.
#include <gtest/gtest.h>

#include <cmath>

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "engine/fused_ops.h"
#include "engine/model.h"
#include "engine/sampling.h"

namespace {

torch::Tensor rand_t(std::vector<int64_t> shape, torch::ScalarType dt) {
    return torch::randn(shape, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kFloat32)).to(dt);
}

double max_diff(const torch::Tensor& a, const torch::Tensor& b) {
    return (a.to(torch::kFloat32) - b.to(torch::kFloat32)).abs().max().item<double>();
}

class FusedOps : public ::testing::TestWithParam<torch::ScalarType> {
protected:
    void SetUp() override {
        if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
        if (!kz::fused::available()) GTEST_FAIL() << "this GPU build has no CUDA kernels (nvcc not found?)";
        torch::manual_seed(0);
    }
};

TEST_P(FusedOps, AddRmsNormMatchesAten) {
    const auto dt = GetParam();
    for (int64_t C : {64, 3584, 8192}) {
        auto h = rand_t({5, 3, C}, dt), x = rand_t({5, 3, C}, dt), w = rand_t({C}, dt);
        auto ref_h = h + x;
        auto ref = kz::rms_norm(ref_h, w, 1e-6);
        auto got = kz::fused::add_rms_norm_(h, x, w, 1e-6);
        EXPECT_EQ(max_diff(h, ref_h), 0.0) << "C " << C;
        EXPECT_LT(max_diff(got, ref), 0.02 * ref.abs().max().item<double>()) << "C " << C;
        auto plain = kz::fused::add_rms_norm_(h, {}, w, 1e-6);
        EXPECT_EQ(max_diff(h, ref_h), 0.0);
        EXPECT_LT(max_diff(plain, ref), 0.02 * ref.abs().max().item<double>());
    }
}

TEST_P(FusedOps, SiluMulMatchesAten) {
    const auto dt = GetParam();
    for (int64_t I : {160, 18944, 13}) {
        auto gu = rand_t({4, 2, 2 * I}, dt);
        auto ref = torch::silu(gu.narrow(-1, 0, I)) * gu.narrow(-1, I, I);
        EXPECT_LT(max_diff(kz::fused::silu_mul(gu), ref), 0.02) << "I " << I;
    }
    // A contiguous view that starts mid-vector (one element into its storage): no 16-byte loads.
    const int64_t I = 160;
    auto gu = rand_t({4 * 2 * I + 1}, dt).narrow(0, 1, 4 * 2 * I).view({4, 2 * I});
    auto ref = torch::silu(gu.narrow(-1, 0, I)) * gu.narrow(-1, I, I);
    EXPECT_LT(max_diff(kz::fused::silu_mul(gu), ref), 0.02) << "offset view";
}

TEST_P(FusedOps, SiluMulBackwardMatchesAutograd) {
    const auto dt = GetParam();
    for (int64_t I : {160, 18944, 13}) {
        auto gu = rand_t({4, 2, 2 * I}, dt).requires_grad_(true);
        auto grad = rand_t({4, 2, I}, dt);
        (torch::silu(gu.narrow(-1, 0, I)) * gu.narrow(-1, I, I)).backward(grad);
        auto got = kz::fused::silu_mul_backward(grad, gu.detach());
        // Rounded where ATen rounds, but silu and silu' in fp32 orders of their own (and __expf): a
        // bf16 rounding may flip by one unit, so the bound scales with the largest gradient.
        const double tol = 0.02 * std::max(1.0, gu.grad().abs().max().item<double>());
        EXPECT_LT(max_diff(got.narrow(-1, I, I), gu.grad().narrow(-1, I, I)), tol) << "up, I " << I;
        EXPECT_LT(max_diff(got.narrow(-1, 0, I), gu.grad().narrow(-1, 0, I)), tol) << "gate, I " << I;
    }
    const int64_t I = 160;  // grad and gu as views that start mid-vector
    auto gu = rand_t({4 * 2 * I + 1}, dt).narrow(0, 1, 4 * 2 * I).view({4, 2 * I});
    auto grad = rand_t({4 * I + 1}, dt).narrow(0, 1, 4 * I).view({4, I});
    auto leaf = gu.detach().clone().requires_grad_(true);
    (torch::silu(leaf.narrow(-1, 0, I)) * leaf.narrow(-1, I, I)).backward(grad);
    EXPECT_LT(max_diff(kz::fused::silu_mul_backward(grad, gu), leaf.grad()),
              0.02 * std::max(1.0, leaf.grad().abs().max().item<double>()))
        << "offset views";
}

TEST_P(FusedOps, RopeAndCacheWriteMatchAten) {
    const auto dt = GetParam();
    const int64_t B = 3, H = 6, G = 2, S = 320;
    // D 64 and 128: 8 and 4 heads a block at once, 2 and 3 groups of the 10 heads. T 5: a decode-like
    // call, the groups of a token in blocks of their own; T 300: a prefill, one block a token looping
    // over the groups.
    for (int64_t D : {64, 128})
        for (int64_t T : {5, 300}) {
            auto qkv = rand_t({B, T, H + 2 * G, D}, dt), bias = rand_t({(H + 2 * G) * D}, dt);
            auto positions =
                torch::tensor({3, 11, 0}, torch::kInt64).view({B, 1}).add(torch::arange(T, torch::kInt64)).cuda();
            auto inv_freq =
                (1.0 / torch::pow(10000.0, torch::arange(0, D, 2, torch::kFloat32) / static_cast<double>(D))).cuda();
            auto cache = torch::zeros({B, S, 2 * G, D}, qkv.options());
            auto q = kz::fused::rope_qkv_to_cache(qkv, bias, positions, inv_freq, cache, H, G);
            // Reference: bias, then x*cos + rotate_half(x)*sin in the model's dtype.
            auto x = qkv + bias.view({H + 2 * G, D});
            auto freqs = positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq;  // (B, T, D/2)
            auto sin = freqs.sin();
            kz::Rope rope{torch::cat({freqs, freqs}, -1).cos().to(dt).unsqueeze(2),
                          torch::cat({-sin, sin}, -1).to(dt).unsqueeze(2)};
            auto qk = x.narrow(2, 0, H + G).clone();
            kz::apply_rope_(qk, rope);
            EXPECT_LT(max_diff(q, qk.narrow(2, 0, H)), 0.05) << "D " << D << " T " << T;
            // Token (b, t) went to slot positions[b][t] of row b.
            auto slots = (torch::arange(B, positions.options()).view({B, 1}) * S + positions).view(-1);
            auto written = cache.view({B * S, 2 * G, D}).index_select(0, slots).view({B, T, 2 * G, D});
            EXPECT_LT(max_diff(written.narrow(2, 0, G), qk.narrow(2, H, G)), 0.05) << "D " << D << " T " << T;
            EXPECT_EQ(max_diff(written.narrow(2, G, G), x.narrow(2, H + G, G)), 0.0) << "D " << D << " T " << T;
            EXPECT_EQ(cache[0][0].abs().sum().item<double>(), 0.0);  // slot 0 of row 0 is never written
        }
}

TEST_P(FusedOps, DecodeAttentionMatchesSdpa) {
    const auto dt = GetParam();
    // 600 slots: several key chunks and the combine kernel; 100: one chunk, written by the kernel itself.
    for (int64_t S : {600, 100})
        for (int64_t D : {64, 128})
            for (int64_t group : {1, 2, 3, 4, 5, 6, 7, 8}) {
                const int64_t B = 3, G = 2, H = G * group;
                auto q = rand_t({B, H, D}, dt);
                auto cache = rand_t({B, S, 2 * G, D}, dt);
                auto lens = torch::tensor({int64_t{0}, int64_t{37}, S - 1}, torch::kInt64).cuda();  // 1, 38 and S keys
                const double scale = 1.0 / std::sqrt(static_cast<double>(D));
                auto got = kz::fused::decode_attention(q, cache, lens, scale);
                auto mask = (torch::arange(S, lens.options()).view({1, S}) <= lens.view({-1, 1})).view({B, 1, 1, S});
                auto k = cache.narrow(2, 0, G).transpose(1, 2).to(torch::kFloat32);
                auto v = cache.narrow(2, G, G).transpose(1, 2).to(torch::kFloat32);
                auto ref =
                    at::scaled_dot_product_attention(q.unsqueeze(2).to(torch::kFloat32), k, v, mask, 0.0, false, scale,
                                                     /*enable_gqa=*/true)
                        .squeeze(2);
                EXPECT_LT(max_diff(got, ref), 0.02) << "S " << S << " D " << D << " group " << group;
            }
}

TEST_P(FusedOps, DecodeLinearMatchesMatmul) {
    const auto dt = GetParam();
    struct Shape {
        int64_t M, N, K;
    };
    for (const Shape s : {Shape{1, 4608, 3584}, Shape{64, 3584, 18944}, Shape{16, 37888, 3584}, Shape{5, 200, 64}}) {
        auto x = rand_t({s.M, 1, s.K}, dt), w = rand_t({s.N, s.K}, dt);
        auto ref = torch::matmul(x.to(torch::kFloat32), w.to(torch::kFloat32).t());  // (M, 1, N)
        const double tol = 0.01 * ref.abs().max().item<double>();
        auto got = kz::fused::decode_linear(x, w);
        ASSERT_EQ(got.sizes(), ref.sizes());
        EXPECT_LT(max_diff(got, ref), tol) << "M " << s.M << " N " << s.N << " K " << s.K;
        // The algorithm is chosen once: a second call rounds the same way.
        EXPECT_TRUE(torch::equal(kz::fused::decode_linear(x, w), got)) << "M " << s.M << " N " << s.N;
    }
    // An input that starts mid-vector goes to ATen's linear.
    auto x = rand_t({3 * 64 + 1}, dt).narrow(0, 1, 3 * 64).view({3, 64}), w = rand_t({40, 64}, dt);
    auto ref = torch::matmul(x.to(torch::kFloat32), w.to(torch::kFloat32).t());
    EXPECT_LT(max_diff(kz::fused::decode_linear(x, w), ref), 0.01 * ref.abs().max().item<double>()) << "offset view";
}

TEST_P(FusedOps, DecodeLinearReplaysInACudaGraph) {
    // As a decode graph does: one eager call on the capture stream (the algorithm is timed there),
    // then capture and replay with new inputs written into the captured buffers.
    const auto dt = GetParam();
    auto x = rand_t({8, 512}, dt), w = rand_t({1024, 512}, dt);
    auto side = c10::cuda::getStreamFromPool();
    at::cuda::CUDAGraph graph;
    torch::Tensor y;
    {
        c10::cuda::CUDAStreamGuard guard(side);
        kz::fused::decode_linear(x, w);
        side.synchronize();
        graph.capture_begin();
        y = kz::fused::decode_linear(x, w);
        graph.capture_end();
    }
    x.copy_(rand_t({8, 512}, dt));
    graph.replay();
    torch::cuda::synchronize();
    auto ref = torch::matmul(x.to(torch::kFloat32), w.to(torch::kFloat32).t());
    EXPECT_LT(max_diff(y, ref), 0.01 * ref.abs().max().item<double>());
}

// Pearson's chi-square of token counts (V) against probabilities (V).
double chi_square(const torch::Tensor& counts, const torch::Tensor& probs, int64_t n) {
    auto expected = probs.to(torch::kFloat64).cpu() * static_cast<double>(n);
    auto c = counts.to(torch::kFloat64).cpu();
    auto keep = expected > 0;
    return ((c - expected).pow(2) / expected.clamp_min(1e-300)).masked_select(keep).sum().item<double>();
}

TEST_P(FusedOps, SampleDrawsFromTheSoftmax) {
    const auto dt = GetParam();
    auto gen = kz::make_generator(torch::Device(torch::kCUDA, 0), 7);
    // 10 tokens, 20,000 identical rows at temperature 0.7: the counts follow softmax(logits / 0.7)
    // (chi-square with 9 degrees of freedom; 50 is far in the tail: P < 1e-6).
    const int64_t n = 20000;
    auto row = torch::tensor({1.0, 0.5, -0.3, 2.0, 0.0, -1.0, 1.5, 0.2, -2.0, 0.8}).to(dt);
    auto logits = row.to(torch::kCUDA).unsqueeze(0).expand({n, 10}).contiguous();
    auto [tokens, lp] = kz::fused::sample(logits, 0.7, gen);
    auto logp = torch::log_softmax(row.to(torch::kFloat32) / 0.7, -1);  // (V), CPU
    EXPECT_LT(chi_square(torch::bincount(tokens, {}, 10), logp.exp(), n), 50.0);
    EXPECT_LT((lp.cpu() - logp.index_select(0, tokens.cpu())).abs().max().item<double>(), 1e-5);

    // Three allowed tokens in three different blocks of a row (the rest masked with -inf): only they
    // are drawn, in their proportions (2 degrees of freedom; 35 is P < 1e-7).
    const int64_t V = 5000;
    auto masked = torch::full({V}, -std::numeric_limits<float>::infinity());
    masked[10] = 2.0, masked[2100] = 1.0, masked[4999] = 2.5;
    auto many = masked.to(dt).to(torch::kCUDA).unsqueeze(0).expand({n, V}).contiguous();
    auto [t2, lp2] = kz::fused::sample(many, 1.0, gen);
    auto counts = torch::bincount(t2, {}, V).cpu();
    EXPECT_EQ(counts.sum().item<int64_t>(),
              counts[10].item<int64_t>() + counts[2100].item<int64_t>() + counts[4999].item<int64_t>());
    EXPECT_LT(chi_square(counts, torch::softmax(masked.to(dt).to(torch::kFloat32), -1), n), 35.0);

    // The 7B vocabulary at batch 64: a logit of 30 among N(0, 1) ones wins (all but ~2e-8 of the
    // time), wherever it is in the row; log-probabilities as log_softmax gives them.
    const int64_t B = 64, big = 152064;
    auto x = rand_t({B, big}, torch::kFloat32);
    auto spike = torch::randint(big, {B}, torch::TensorOptions().dtype(torch::kInt64).device(torch::kCUDA));
    spike[0] = 0, spike[1] = big - 1;
    x.scatter_(1, spike.unsqueeze(1), 30.0);
    x = x.to(dt);
    auto [t3, lp3] = kz::fused::sample(x, 1.0, gen);
    EXPECT_TRUE(torch::equal(t3, spike));
    auto ref = torch::log_softmax(x.to(torch::kFloat32), -1).gather(1, t3.unsqueeze(1)).squeeze(1);
    EXPECT_LT(max_diff(lp3, ref), 1e-4);

    // Seeded: the same generator state draws the same tokens; the next call draws others.
    auto noise = rand_t({B, big}, dt);
    auto g1 = kz::make_generator(torch::Device(torch::kCUDA, 0), 3),
         g2 = kz::make_generator(torch::Device(torch::kCUDA, 0), 3);
    auto a = kz::fused::sample(noise, 1.0, g1).first;
    EXPECT_TRUE(torch::equal(a, kz::fused::sample(noise, 1.0, g2).first));
    EXPECT_FALSE(torch::equal(a, kz::fused::sample(noise, 1.0, g1).first));
    // kz::sample takes this path for plain sampling (no top-k / top-p).
    kz::SamplingParams plain;
    auto g3 = kz::make_generator(torch::Device(torch::kCUDA, 0), 3);
    EXPECT_TRUE(torch::equal(kz::sample(noise, plain, g3).tokens, a));
}

INSTANTIATE_TEST_SUITE_P(Dtypes, FusedOps, ::testing::Values(torch::kBFloat16, torch::kFloat16));

}  // namespace
