// The clipped surrogate, its gradient, the k3 KL and token-level normalisation against numbers
// computed by hand (design section 6.4).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "rl/policy_loss.h"

namespace {

// Ratios chosen per token (old log-probs 0): row 0 advantage +1, row 1 advantage -2; clip range
// [0.8, 1.28]; the last token of row 1 is masked.
struct Case {
    torch::Tensor logp = torch::log(torch::tensor({{1.0, 1.5, 0.5}, {1.2, 0.7, 1.0}})).requires_grad_(true);
    torch::Tensor old = torch::zeros({2, 3});
    torch::Tensor adv = torch::tensor({1.0, -2.0});
    torch::Tensor mask = torch::tensor({{1.0, 1.0, 1.0}, {1.0, 1.0, 0.0}});
};

TEST(PolicyLoss, ClippedSurrogateHandComputed) {
    Case c;
    kz::PolicyLossStats st;
    auto loss = kz::policy_loss(c.logp, c.old, {}, c.adv, c.mask, {}, &st);
    // Row 0 (A = 1): -min(1, 1) = -1; -min(1.5, 1.28) = -1.28; -min(0.5, 0.8) = -0.5.
    // Row 1 (A = -2): -min(-2.4, -2.4) = 2.4; -min(-1.4, -1.6) = 1.6. Sum 1.22 over 5 tokens.
    EXPECT_NEAR(loss.item<double>(), 0.244, 1e-6);
    EXPECT_NEAR(st.clip_fraction, 0.6, 1e-6);  // 1.5, 0.5 and 0.7 lie outside [0.8, 1.28]
    EXPECT_DOUBLE_EQ(st.tokens, 5);
    loss.backward();
    // d/dlogp of -r A where the unclipped term is taken, 0 where the clipped one is; / 5 tokens.
    auto g = c.logp.grad();
    const double want[2][3] = {{-0.2, 0.0, -0.1}, {0.48, 0.0, 0.0}};
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 3; ++j) EXPECT_NEAR(g[i][j].item<double>(), want[i][j], 1e-6) << i << "," << j;
}

TEST(PolicyLoss, K3KlToTheReference) {
    Case c;
    kz::PolicyLossConfig cfg;
    cfg.kl_beta = 0.1;
    kz::PolicyLossStats st;
    auto ref = torch::zeros({2, 3});
    auto loss = kz::policy_loss(c.logp, c.old, ref, c.adv, c.mask, cfg, &st);
    // k3 = pi_ref / pi - log(pi_ref / pi) - 1 = 1/r + ln r - 1 per counted token.
    double kl = 0;
    for (double r : {1.0, 1.5, 0.5, 1.2, 0.7}) kl += 1 / r + std::log(r) - 1;
    kl /= 5;
    EXPECT_NEAR(st.kl, kl, 1e-6);
    EXPECT_NEAR(loss.item<double>(), 0.244 + 0.1 * kl, 1e-6);
    EXPECT_GE(st.kl, 0.0);
}

TEST(PolicyLoss, KlEstimatorsOnATokenFarBelowTheReference) {
    // Two counted tokens, no advantage: the loss is the KL alone. Token 0 has pi_ref / pi = e^4
    // (k3 = e^4 - 5 = 49.6, over the clamp), token 1 pi_ref / pi = 1.5 (k3 = 0.5 - ln 1.5 + 1 - 1);
    // the third is masked, and its k3 (e^9 - 10) counts in neither the loss nor the largest token.
    const double r1 = 1.5;
    auto ref = torch::tensor({{4.0, std::log(r1), 9.0}});
    auto mask = torch::tensor({{1.0, 1.0, 0.0}});
    const double k3_0 = std::exp(4.0) - 4.0 - 1.0, k3_1 = r1 - std::log(r1) - 1.0;
    for (const std::string estimator : {"k3", "k3_clamped", "k3+"}) {
        auto logp = torch::zeros({1, 3}).requires_grad_(true);
        kz::PolicyLossConfig cfg;
        cfg.kl_beta = 1.0;
        cfg.kl_estimator = estimator;
        kz::PolicyLossStats st;
        auto loss = kz::policy_loss(logp, torch::zeros({1, 3}), ref, torch::zeros({1}), mask, cfg, &st);
        loss.backward();
        const bool clamped = estimator == "k3_clamped", k2_gradient = estimator == "k3+";
        const double kl0 = clamped ? kz::PolicyLossConfig::kKlClamp : k3_0;
        EXPECT_NEAR(st.kl, (kl0 + k3_1) / 2, 1e-4) << estimator;
        EXPECT_NEAR(loss.item<double>(), (kl0 + k3_1) / 2, 1e-4) << estimator;
        EXPECT_NEAR(st.kl_max, k3_0, 1e-4) << estimator;  // unclamped either way
        // Where it is, and the log-probs there (the masked token's larger k3 is not it).
        EXPECT_EQ(st.kl_max_row, 0);
        EXPECT_EQ(st.kl_max_col, 0);
        EXPECT_EQ(st.kl_max_logp, 0.0);
        EXPECT_EQ(st.kl_max_old_logp, 0.0);
        EXPECT_NEAR(st.kl_max_ref_logp, 4.0, 1e-6);
        // d k3 / d logp = 1 - pi_ref / pi, over 2 tokens; the clamped token's is 0; k3+'s is k2's,
        // logp - logp_ref.
        auto g = logp.grad();
        const double g0 = clamped ? 0.0 : k2_gradient ? -4.0 / 2 : (1 - std::exp(4.0)) / 2;
        const double g1 = k2_gradient ? -std::log(r1) / 2 : (1 - r1) / 2;
        EXPECT_NEAR(g[0][0].item<double>(), g0, 1e-4) << estimator;
        EXPECT_NEAR(g[0][1].item<double>(), g1, 1e-6) << estimator;
        EXPECT_EQ(g[0][2].item<double>(), 0.0) << estimator;
    }
    kz::PolicyLossConfig unknown;
    unknown.kl_estimator = "k2";
    EXPECT_THROW(unknown.validate(), std::invalid_argument);
}

TEST(PolicyLoss, TokenLevelNormalisationAndMasking) {
    // One long row and one short row with the same per-token loss: every token weighs the same,
    // and masked tokens (an overlong row, a zero-signal group) change nothing.
    auto logp = torch::zeros({2, 4}).requires_grad_(true);
    auto adv = torch::tensor({1.0, 1.0});
    auto mask = torch::tensor({{1.0, 1.0, 1.0, 1.0}, {1.0, 0.0, 0.0, 0.0}});
    auto loss = kz::policy_loss(logp, torch::zeros({2, 4}), {}, adv, mask, {});
    EXPECT_NEAR(loss.item<double>(), -1.0, 1e-6);
    auto none = kz::policy_loss(logp, torch::zeros({2, 4}), {}, adv, torch::zeros({2, 4}), {});
    EXPECT_EQ(none.item<double>(), 0.0);  // nothing counted: 0, not NaN
}

TEST(PolicyLoss, ShapeErrorsAreNamed) {
    Case c;
    EXPECT_THROW(kz::policy_loss(c.logp, torch::zeros({2, 2}), {}, c.adv, c.mask, {}), std::invalid_argument);
    EXPECT_THROW(kz::policy_loss(c.logp, c.old, {}, torch::zeros({3}), c.mask, {}), std::invalid_argument);
    kz::PolicyLossConfig kl;
    kl.kl_beta = 0.1;
    EXPECT_THROW(kz::policy_loss(c.logp, c.old, {}, c.adv, c.mask, kl), std::invalid_argument);
}

}  // namespace
