// CA-GRPO rewards and advantages against numbers computed by hand (design section 6.3).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "rl/rewards.h"

namespace {

using kz::RolloutOutcome;

RolloutOutcome ok(std::optional<double> speedup = {}) { return {true, speedup}; }
RolloutOutcome bad() { return {false, std::nullopt}; }

void expect_near(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << what << "[" << i << "]";
}

TEST(Rewards, SpeedScore) {
    EXPECT_DOUBLE_EQ(kz::speed_score(2.0, 4.0), 0.5);   // log2 2 / log2 4
    EXPECT_DOUBLE_EQ(kz::speed_score(16.0, 4.0), 1.0);  // clipped at log2 S_max
    EXPECT_DOUBLE_EQ(kz::speed_score(0.1, 4.0), -0.5);  // clipped at -1
    EXPECT_DOUBLE_EQ(kz::speed_score(1.0, 4.0), 0.0);
    EXPECT_DOUBLE_EQ(kz::speed_score(std::nullopt, 4.0), 0.0);
}

TEST(Rewards, CaGrpoGroupGateOpen) {
    // c = 1,1,0,1; s = 0.5, -0.5, 0, 1.0; c-hat 0.75 >= 0.5: r = 1.5, 0.5, 0, 2.0; mean 1;
    // sample std sqrt(2.5 / 3) = 0.912871.
    kz::CoderRewards cr({});
    auto g = cr.score({{ok(2.0), ok(0.5), bad(), ok(8.0)}})[0];
    EXPECT_TRUE(g.gate_open);
    EXPECT_DOUBLE_EQ(g.correct_rate, 0.75);
    expect_near(g.rewards, {1.5, 0.5, 0.0, 2.0}, "rewards");
    expect_near(g.advantages, {0.547723, -0.547723, -1.095445, 1.095445}, "advantages");
    EXPECT_FALSE(g.zero_signal);
}

TEST(Rewards, CaGrpoGroupGateClosedIgnoresSpeed) {
    // c-hat 0.25 < 0.5: r = 1, 0, 0, 0; mean 0.25, sample std 0.5: A = 1.5, -0.5, -0.5, -0.5.
    kz::CoderRewards cr({});
    auto g = cr.score({{ok(4.0), bad(), bad(), bad()}})[0];
    EXPECT_FALSE(g.gate_open);
    expect_near(g.rewards, {1, 0, 0, 0}, "rewards");
    expect_near(g.advantages, {1.5, -0.5, -0.5, -0.5}, "advantages");
}

TEST(Rewards, PlainGrpoAlwaysOnWithDrGrpoAdvantages) {
    // The ablation: the speed term is on at c-hat 0.25. r = 1.5, 0, 0, 0; mean 0.375; no std division.
    kz::RewardConfig cfg;
    cfg.reward = "grpo";
    cfg.advantage = "dr_grpo";
    kz::CoderRewards cr(cfg);
    auto g = cr.score({{ok(2.0), bad(), bad(), bad()}})[0];
    EXPECT_TRUE(g.gate_open);
    expect_near(g.rewards, {1.5, 0, 0, 0}, "rewards");
    expect_near(g.advantages, {1.125, -0.375, -0.375, -0.375}, "advantages");
}

TEST(Rewards, IncorrectNeverPositive) {
    // lambda 3: a correct but slow completion (s = -0.5) gets r = -0.5 < 0 = the incorrect one's.
    // mean -0.25, sample std 0.353553: A = -0.707107 and +0.707107, the latter clamped to 0.
    kz::RewardConfig cfg;
    cfg.lambda = 3;
    kz::CoderRewards cr(cfg);
    auto g = cr.score({{ok(0.25), bad()}})[0];
    expect_near(g.rewards, {-0.5, 0.0}, "rewards");
    expect_near(g.advantages, {-0.707107, 0.0}, "advantages");
}

TEST(Rewards, ZeroSignalGroups) {
    kz::CoderRewards cr({});
    auto r = cr.score({{ok(2.0), ok(2.0), ok(2.0)}, {bad(), bad()}, {}});
    for (const auto& g : r) {
        EXPECT_TRUE(g.zero_signal);
        for (double a : g.advantages) EXPECT_EQ(a, 0.0);
    }
}

TEST(Rewards, AnAllCorrectGroupIsOrderedBySpeedAloneAndGrpoScalesItsNoiseToUnitAdvantages) {
    // Eight correct samples of one kernel, timed 2% apart (s = log2(speedup) / 2): "grpo" divides
    // differences of ~0.007 by their std and gives them advantages of about 1, as large as a
    // correct sample's against an incorrect one; "dr_grpo" leaves them at their size.
    const std::vector<RolloutOutcome> timed = {ok(1.50), ok(1.51), ok(1.49), ok(1.52),
                                               ok(1.48), ok(1.50), ok(1.53), ok(1.47)};
    kz::CoderRewards grpo({});
    auto g = grpo.score({timed, {ok(1.5), bad(), ok(1.5), bad()}, {ok(2.0), ok(2.0)}});
    EXPECT_TRUE(g[0].speed_only);
    EXPECT_FALSE(g[1].speed_only);  // its correct samples outrank its incorrect ones
    EXPECT_FALSE(g[2].speed_only);  // equal rewards: no signal at all
    EXPECT_TRUE(g[2].zero_signal);
    double largest = 0;
    for (double a : g[0].advantages) largest = std::max(largest, std::abs(a));
    EXPECT_GT(largest, 1.0);
    kz::RewardConfig dr;
    dr.advantage = "dr_grpo";
    kz::CoderRewards dr_grpo(dr);
    auto d = dr_grpo.score({timed})[0];
    EXPECT_TRUE(d.speed_only);
    for (double a : d.advantages) EXPECT_LT(std::abs(a), 0.02);
}

TEST(Rewards, BatchMovingAverageGate) {
    // decay 0.5, tau 0.5. Batch 1: correct rate 0.25 -> ema 0.25, closed. Batch 2: rate 1.0 ->
    // ema 0.5 * 0.25 + 0.5 * 1.0 = 0.625, open (even for a group whose own rate is below tau? no
    // such group here: the gate is the batch's).
    kz::RewardConfig cfg;
    cfg.gate = "batch_ema";
    cfg.ema_decay = 0.5;
    kz::CoderRewards cr(cfg);
    auto b1 = cr.score({{ok(2.0), bad(), bad(), bad()}});
    EXPECT_DOUBLE_EQ(*cr.batch_correct_ema(), 0.25);
    EXPECT_FALSE(b1[0].gate_open);
    expect_near(b1[0].rewards, {1, 0, 0, 0}, "batch 1");
    auto b2 = cr.score({{ok(2.0), ok(1.0)}});
    EXPECT_DOUBLE_EQ(*cr.batch_correct_ema(), 0.625);
    EXPECT_TRUE(b2[0].gate_open);
    expect_near(b2[0].rewards, {1.5, 1.0}, "batch 2");
    // The state survives a resume.
    kz::CoderRewards resumed(cfg);
    resumed.set_batch_correct_ema(cr.batch_correct_ema());
    EXPECT_DOUBLE_EQ(*resumed.batch_correct_ema(), 0.625);
}

TEST(Rewards, InfraErrorsAreNeitherRewardNorStatistic) {
    // The group of the gate-closed case plus two infra errors: the same rewards and advantages as
    // without them, and 0 for them.
    kz::CoderRewards cr({});
    RolloutOutcome infra;
    infra.infra_error = true;
    auto g = cr.score({{ok(4.0), infra, bad(), bad(), infra, bad()}})[0];
    EXPECT_DOUBLE_EQ(g.correct_rate, 0.25);
    expect_near(g.rewards, {1, 0, 0, 0, 0, 0}, "rewards");
    expect_near(g.advantages, {1.5, 0.0, -0.5, -0.5, 0.0, -0.5}, "advantages");
    auto only = cr.score({{infra, infra}})[0];
    EXPECT_TRUE(only.zero_signal);
}

TEST(Rewards, BadConfigIsNamed) {
    kz::RewardConfig cfg;
    cfg.reward = "ppo";
    EXPECT_THROW(kz::CoderRewards{cfg}, std::invalid_argument);
    cfg = {};
    cfg.advantage = "rloo";
    EXPECT_THROW(kz::CoderRewards{cfg}, std::invalid_argument);
    cfg = {};
    cfg.s_max = 1.0;
    EXPECT_THROW(kz::CoderRewards{cfg}, std::invalid_argument);
}

}  // namespace
