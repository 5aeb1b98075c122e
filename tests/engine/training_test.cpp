// chunked_logprobs (engine/training.h) against plain autograd over the whole logits matrix: exact
// in fp32 on the CPU; on the GPU in bf16, no further from an fp64 reference than bf16 autograd is.
// PolicyOptimizer's lr warm-up, through a resume; its gradient scale.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/training.h"

namespace {

struct Grads {
    torch::Tensor logprobs;  // (N) fp32
    torch::Tensor hidden;    // (N, C)
    torch::Tensor weight;    // (V, C)
};

// sum(g * logprobs) backward from fresh leaves holding hidden's and weight's values in `dt`.
Grads run(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
          const torch::Tensor& g, torch::ScalarType dt, int64_t chunk) {
    auto h = hidden.to(dt).detach().requires_grad_(true);  // (N, C)
    auto w = weight.to(dt).detach().requires_grad_(true);  // (V, C)
    torch::Tensor lp;                                      // (N)
    if (chunk > 0) {
        lp = kz::chunked_logprobs(h, w, targets, chunk);
    } else {
        auto logits = torch::nn::functional::linear(h, w).to(torch::kFloat32);  // (N, V)
        lp = torch::log_softmax(logits, -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1);
    }
    (g.to(lp.scalar_type()) * lp).sum().backward();
    return {lp.detach(), h.grad(), w.grad()};
}

double max_err(const torch::Tensor& got, const torch::Tensor& ref) {
    return (got.to(torch::kFloat64) - ref.to(torch::kFloat64)).abs().max().item<double>();
}

struct Case {
    torch::Tensor hidden, weight, targets, g;
};

// N rows that three chunks of 128 do not divide evenly; V large enough that softmax is spread.
Case random_case(torch::Device dev) {
    torch::manual_seed(3);
    const int64_t N = 300, C = 64, V = 1000;
    auto f = torch::TensorOptions().device(dev).dtype(torch::kFloat32);
    return {torch::randn({N, C}, f), torch::randn({V, C}, f) * 0.3,
            torch::randint(V, {N}, torch::TensorOptions().device(dev).dtype(torch::kInt64)), torch::randn({N}, f)};
}

TEST(ChunkedLogprob, EqualsAutogradOverTheWholeLogitsInFp32) {
    auto c = random_case(torch::kCPU);
    auto ref = run(c.hidden, c.weight, c.targets, c.g, torch::kFloat32, 0);
    for (int64_t chunk : {128, 300, 1024}) {
        auto got = run(c.hidden, c.weight, c.targets, c.g, torch::kFloat32, chunk);
        EXPECT_LT(max_err(got.logprobs, ref.logprobs), 1e-4) << "chunk " << chunk;
        EXPECT_LT(max_err(got.hidden, ref.hidden), 1e-4) << "chunk " << chunk;
        EXPECT_LT(max_err(got.weight, ref.weight), 1e-4) << "chunk " << chunk;
    }
}

TEST(ChunkedLogprobGpu, Bf16GradientsAreAsCloseToFp64AsBf16Autograd) {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no GPU";
    auto c = random_case(torch::kCUDA);
    // The reference sees the bf16-rounded inputs: only the arithmetic differs between the three.
    auto hidden = c.hidden.to(torch::kBFloat16), weight = c.weight.to(torch::kBFloat16);
    auto exact = run(hidden, weight, c.targets, c.g, torch::kFloat64, 0);
    auto autograd = run(hidden, weight, c.targets, c.g, torch::kBFloat16, 0);
    auto ours = run(hidden, weight, c.targets, c.g, torch::kBFloat16, 128);
    ASSERT_EQ(ours.weight.scalar_type(), torch::kBFloat16);
    const double scale_h = exact.hidden.abs().max().item<double>(), scale_w = exact.weight.abs().max().item<double>();
    EXPECT_LT(max_err(ours.logprobs, exact.logprobs), 2 * max_err(autograd.logprobs, exact.logprobs) + 1e-6);
    EXPECT_LT(max_err(ours.hidden, exact.hidden), 2 * max_err(autograd.hidden, exact.hidden) + 1e-6 * scale_h);
    EXPECT_LT(max_err(ours.weight, exact.weight), 2 * max_err(autograd.weight, exact.weight) + 1e-6 * scale_w)
        << "ours " << max_err(ours.weight, exact.weight) << ", autograd " << max_err(autograd.weight, exact.weight);
}

// AdamW's step under a constant gradient is lr (its bias-corrected moments are the gradient and its
// square), so each step's move is the lr it took.
std::vector<double> moves(kz::PolicyOptimizer& opt, torch::Tensor& p, int n) {
    std::vector<double> out;
    for (int i = 0; i < n; ++i) {
        const double before = p.item<double>();
        p.mutable_grad() = torch::ones_like(p);
        opt.step();
        out.push_back(before - p.item<double>());
    }
    return out;
}

TEST(PolicyOptimizer, WarmUpRaisesTheLrLinearlyAcrossAResume) {
    kz::OptimConfig oc;
    oc.lr = 1e-2, oc.eps = 1e-12, oc.warmup_steps = 4;
    auto p = torch::zeros({1}, torch::kFloat32).requires_grad_(true);
    kz::PolicyOptimizer opt({{"p", p}}, oc);
    auto first = moves(opt, p, 2);
    const std::string state = testing::TempDir() + "kz_warmup_optimizer.pt";
    opt.save_state(state);
    // A resumed optimizer continues the ramp from its saved step count, not from its start.
    auto q = torch::zeros({1}, torch::kFloat32).requires_grad_(true);
    kz::PolicyOptimizer resumed({{"p", q}}, oc);
    resumed.load_state(state);
    std::filesystem::remove(state);
    EXPECT_DOUBLE_EQ(resumed.gradient_scale(), opt.gradient_scale());  // the moments came back with it
    EXPECT_GT(resumed.gradient_scale(), 0.0);
    auto rest = moves(resumed, q, 3);
    const std::vector<double> want = {0.25e-2, 0.5e-2, 0.75e-2, 1e-2, 1e-2};
    std::vector<double> got = first;
    got.insert(got.end(), rest.begin(), rest.end());
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-7) << "step " << i;
    // Without warm-up every step takes lr.
    oc.warmup_steps = 0;
    auto r = torch::zeros({1}, torch::kFloat32).requires_grad_(true);
    kz::PolicyOptimizer plain({{"r", r}}, oc);
    for (double m : moves(plain, r, 2)) EXPECT_NEAR(m, 1e-2, 1e-7);
}

TEST(PolicyOptimizer, GradientScaleIsTheNormTheStepsDivideByAndHoldsASpike) {
    // Two parameters (fp32, and bf16 through its master): the scale is the norm over both.
    kz::OptimConfig oc;
    oc.lr = 1e-3, oc.max_grad_norm = 1.0;
    auto p = torch::zeros({3}, torch::kFloat32).requires_grad_(true);
    auto b = torch::zeros({1}, torch::kBFloat16).requires_grad_(true);
    kz::PolicyOptimizer opt({{"p", p}, {"b", b}}, oc);
    EXPECT_EQ(opt.gradient_scale(), 0.0);
    const double g = 1.0 / 256;  // exact in bf16
    auto step = [&](double v) {
        p.mutable_grad() = torch::full({3}, v, torch::kFloat32);
        b.mutable_grad() = torch::full({1}, v, torch::kBFloat16);
        return opt.step();
    };
    // Under one gradient the bias-corrected second moment is its square: the scale is its norm.
    for (int k = 0; k < 8; ++k) step(g);
    EXPECT_NEAR(opt.gradient_scale(), 2 * g, 1e-9);
    // A gradient of norm 100 is clipped to 1 (step() returns the norm before clipping) and enters
    // the second moment at 1e-3 of its square.
    EXPECT_NEAR(step(50.0), 100.0, 1e-3);
    const double v8 = (1 - std::pow(0.999, 8)) * 4 * g * g;
    EXPECT_NEAR(opt.gradient_scale(), std::sqrt((0.999 * v8 + 1e-3) / (1 - std::pow(0.999, 9))), 1e-6);
    // 40 steps later (the spike's momentum gone) the scale is still ~20 times the usual gradient's
    // norm, and a step of it moves a weight ~1/20 of the lr it moved before the spike.
    for (int k = 0; k < 40; ++k) step(g);
    EXPECT_GT(opt.gradient_scale(), 20 * 2 * g * 0.9);
    const double before = p.detach()[0].item<double>();
    step(g);
    EXPECT_LT(std::abs(p.detach()[0].item<double>() - before), 0.1 * oc.lr);
}

TEST(PolicyOptimizer, ALrOfZeroLeavesEveryParameterAsItWas) {
    // A control run's policy (lr = 0) samples as its start does after any number of steps, weight
    // decay and a bf16 parameter's fp32 master included.
    kz::OptimConfig oc;
    oc.lr = 0, oc.weight_decay = 0.1;
    auto p = torch::randn({4}, torch::kFloat32).requires_grad_(true);
    auto b = torch::randn({4}, torch::kFloat32).to(torch::kBFloat16).requires_grad_(true);
    const auto p0 = p.detach().clone(), b0 = b.detach().clone();
    kz::PolicyOptimizer opt({{"p", p}, {"b", b}}, oc);
    for (int k = 0; k < 3; ++k) {
        p.mutable_grad() = torch::ones_like(p);
        b.mutable_grad() = torch::ones_like(b);
        opt.step();
    }
    EXPECT_TRUE(torch::equal(p.detach(), p0));
    EXPECT_TRUE(torch::equal(b.detach(), b0));
    EXPECT_EQ(opt.steps(), 3);
}

}  // namespace
