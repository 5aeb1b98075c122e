// The Coder's CA-GRPO step end to end on a tiny random model (CPU): rollouts, judging, rewards,
// masks, and that the update raises what the judge rewards and lowers what it penalises.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/lora.h"
#include "train/coder_step.h"

namespace {

struct Fixture {
    kz::Tokenizer tok = kz::Tokenizer::load(std::string(KZ_SOURCE_DIR) + "/data/qwen2.5-tokenizer");
    kz::Model model =
        kz::Model::random(kz::ModelConfig::preset(kz::Arch::qwen2, "tiny", (tok.vocab_size() + 127) / 128 * 128),
                          torch::kCPU, torch::kFloat32, 3);
    std::vector<std::vector<int64_t>> prompts = {tok.encode("Write a kernel."), tok.encode("def relu(x):")};
    Fixture() {
        kz::LoraConfig lc;
        lc.rank = 8;
        lc.alpha = 16;
        kz::attach_lora(model, lc, 1);
    }
    // Rewarded: completions whose text starts with an ASCII byte.
    static bool ascii_start(const std::string& t) { return !t.empty() && static_cast<unsigned char>(t[0]) < 0x80; }
};

kz::CoderJudge ascii_judge() {
    return [](const std::vector<std::pair<size_t, std::string>>& items) {
        std::vector<kz::RolloutOutcome> out;
        for (const auto& [task, text] : items) out.push_back({Fixture::ascii_start(text), std::nullopt});
        return out;
    };
}

TEST(CoderStep, RolloutsRewardsAndMasks) {
    Fixture f;
    kz::PolicyOptimizer opt(kz::lora_parameters(f.model), {});
    kz::CoderRewards rewards({});
    kz::CoderStepConfig cfg;
    cfg.group_size = 4;
    cfg.max_new_tokens = 3;
    cfg.mask_overlong = false;
    std::vector<kz::Rollout> rollouts;
    auto st = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg, &rollouts);
    ASSERT_EQ(rollouts.size(), 8u);
    EXPECT_EQ(st.completions, 8);
    EXPECT_EQ(st.groups, 2);
    for (const auto& r : rollouts) {
        EXPECT_EQ(r.completion_ids.size(), 3u);  // no stop ids: every row runs to max_new_tokens
        EXPECT_EQ(r.outcome.correct, Fixture::ascii_start(r.text));
        EXPECT_EQ(r.reward, r.outcome.correct ? 1.0 : 0.0);  // no speedups: the gate adds nothing
        if (!r.outcome.correct) {
            EXPECT_LE(r.advantage, 0.0);
        }
    }
    // With overlong masking on, rows that never stopped are out of the loss: no update at all.
    cfg.mask_overlong = true;
    auto masked = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg, &rollouts);
    EXPECT_FALSE(masked.updated);
    for (const auto& r : rollouts) EXPECT_FALSE(r.in_loss);
    // A judge that answers for the wrong number of completions is an error, not a silent mismatch.
    auto short_judge = [](const std::vector<std::pair<size_t, std::string>>&) {
        return std::vector<kz::RolloutOutcome>(1);
    };
    EXPECT_THROW(kz::coder_step(f.model, opt, f.tok, f.prompts, {}, short_judge, rewards, cfg), std::runtime_error);
}

TEST(CoderStep, ScoringCountsTheShareOfTheUpdateThatTheSpeedTermAloneOrders) {
    // Task 0: two correct samples, 1x and 2x (gate open: r = 1, 1.5; A = -0.7071, +0.7071), signal
    // from speed alone. Task 1: one correct of four (gate closed: A = 1.5, -0.5, -0.5, -0.5). Share:
    // 1.4142 / (1.4142 + 3). Task 2: every sample wrong, no signal, in neither sum.
    auto rollout = [](size_t task, int sample, bool correct, std::optional<double> speedup) {
        kz::Rollout r;
        r.task = task;
        r.sample = sample;
        r.completion_ids = {1, 2};
        r.stopped = true;
        r.outcome = {correct, speedup};
        return r;
    };
    std::vector<kz::Rollout> rollouts = {rollout(0, 0, true, 1.0), rollout(0, 1, true, 2.0), rollout(1, 0, true, 1.0),
                                         rollout(1, 1, false, {}), rollout(1, 2, false, {}), rollout(1, 3, false, {}),
                                         rollout(2, 0, false, {}), rollout(2, 1, false, {})};
    kz::CoderRewards rewards({});
    kz::CoderStepStats st;
    kz::score_rollouts(rollouts, 3, rewards, kz::CoderStepConfig{}, st);
    EXPECT_EQ(st.speed_only_groups, 1);
    EXPECT_NEAR(st.speed_only_share, std::sqrt(2.0) / (std::sqrt(2.0) + 3.0), 1e-6);  // the std's eps
    EXPECT_EQ(st.zero_signal_groups, 1);
    // An overlong pair in task 0, masked out of the loss: nothing the update weighs is speed-only.
    rollouts[0].stopped = rollouts[1].stopped = false;
    kz::score_rollouts(rollouts, 3, rewards, kz::CoderStepConfig{}, st);
    EXPECT_EQ(st.speed_only_groups, 0);
    EXPECT_EQ(st.speed_only_share, 0.0);
}

// Sum of log p(completion tokens) for a rollout under the current policy.
double completion_logprob(Fixture& f, const kz::Rollout& r) {
    torch::NoGradGuard no_grad;
    std::vector<int64_t> all = f.prompts[r.task];
    all.insert(all.end(), r.completion_ids.begin(), r.completion_ids.end());
    auto ids = torch::tensor(all, torch::kInt64).view({1, -1});
    auto pos = torch::arange(ids.size(1), torch::kInt64).view({1, -1});
    auto logp = torch::log_softmax(f.model.logits(f.model.forward(ids, pos))[0].to(torch::kFloat32), -1);  // (T, V)
    const auto P = static_cast<int64_t>(f.prompts[r.task].size());
    double s = 0;
    for (size_t k = 0; k < r.completion_ids.size(); ++k)
        s += logp[P - 1 + static_cast<int64_t>(k)][r.completion_ids[k]].item<double>();
    return s;
}

// An optimizer over the fixture's adapters whose single steps measurably move them.
kz::PolicyOptimizer updating_optimizer(Fixture& f) {
    kz::OptimConfig oc;
    oc.lr = 1e-3;
    return kz::PolicyOptimizer(kz::lora_parameters(f.model), oc);
}

// Groups of 8 two-token completions, all in the loss.
kz::CoderStepConfig two_token_groups() {
    kz::CoderStepConfig cfg;
    cfg.group_size = 8;
    cfg.max_new_tokens = 2;
    cfg.mask_overlong = false;
    return cfg;
}

TEST(CoderStep, TheUpdateRaisesRewardedAndLowersPenalisedCompletions) {
    // The surrogate's first-order effect: sum_i A_i log p(completion_i) goes up after the step (a
    // flipped sign or a wrong mask would make it go down), and most rewarded completions gain
    // probability while most penalised ones lose it.
    Fixture f;
    kz::PolicyOptimizer opt = updating_optimizer(f);
    kz::CoderRewards rewards({});
    kz::CoderStepConfig cfg = two_token_groups();
    std::vector<kz::Rollout> rollouts;
    // A first step moves LoRA's B off zero, so that the second step's gradient reaches A too.
    kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg, &rollouts);
    cfg.seed = 1;
    // Score the second step's rollouts before and after its update.
    std::vector<kz::Rollout> second;
    std::vector<double> before;
    // Generate with the same seed twice: once to read the rollouts (no update: a judge that finds
    // nothing correct gives zero-signal groups), once for the real step.
    kz::CoderJudge none = [](const std::vector<std::pair<size_t, std::string>>& items) {
        return std::vector<kz::RolloutOutcome>(items.size());
    };
    auto dry = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, none, rewards, cfg, &second);
    ASSERT_FALSE(dry.updated);
    for (const auto& r : second) before.push_back(completion_logprob(f, r));
    auto st = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg, &rollouts);
    ASSERT_TRUE(st.updated);
    ASSERT_EQ(rollouts.size(), second.size());
    double objective_change = 0;
    int up = 0, down = 0, pos = 0, neg = 0;
    for (size_t i = 0; i < rollouts.size(); ++i) {
        ASSERT_EQ(rollouts[i].completion_ids, second[i].completion_ids);  // same seed, same policy: same samples
        const double delta = completion_logprob(f, rollouts[i]) - before[i];
        objective_change += rollouts[i].advantage * delta;
        if (rollouts[i].advantage > 0) ++pos, up += delta > 0;
        if (rollouts[i].advantage < 0) ++neg, down += delta < 0;
    }
    EXPECT_GT(objective_change, 0.0);
    ASSERT_GT(pos, 0);
    ASSERT_GT(neg, 0);
    EXPECT_GT(up, pos / 2) << up << " of " << pos << " rewarded completions gained probability";
    EXPECT_GT(down, neg / 2) << down << " of " << neg << " penalised completions lost probability";
}

TEST(CoderStep, TheUpdateScoresTheSampledTokensAtTheSamplingTemperature) {
    // The sampler's log-probs and the update's old log-probs are two computations of one
    // distribution: at any temperature they agree to rounding. Scored at another temperature than
    // the samples were drawn at, the gap shows it.
    Fixture f;
    kz::PolicyOptimizer opt = updating_optimizer(f);
    kz::CoderRewards rewards({});
    kz::CoderStepConfig cfg = two_token_groups();
    cfg.max_new_tokens = 4;
    cfg.temperature = 0.7;
    std::vector<kz::Rollout> rollouts;
    auto st = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg, &rollouts);
    ASSERT_TRUE(st.updated);
    EXPECT_LT(st.logprob_gap, 1e-5);
    EXPECT_LT(st.logprob_gap_max, 1e-4);
    EXPECT_LE(st.logprob_gap, st.logprob_gap_max);

    cfg.seed = 1;
    rollouts = kz::sample_rollouts(f.model, f.tok, f.prompts, {}, cfg);
    for (auto& r : rollouts) r.outcome.correct = Fixture::ascii_start(r.text);
    kz::CoderStepStats scored;
    kz::score_rollouts(rollouts, f.prompts.size(), rewards, cfg, scored);
    kz::CoderStepConfig untempered = cfg;
    untempered.temperature = 1.0;
    kz::update_policy(f.model, opt, f.prompts, rollouts, untempered, scored);
    ASSERT_TRUE(scored.updated);
    EXPECT_GT(scored.logprob_gap, 1e-2) << "log-probs at temperature 1 of samples drawn at 0.7";
    // A row whose sampler log-probs are missing (a record without them) is left out of the gap.
    for (auto& r : rollouts) r.sampler_logprobs.clear();
    kz::CoderStepStats none;
    kz::update_policy(f.model, opt, f.prompts, rollouts, cfg, none);
    EXPECT_EQ(none.logprob_gap, 0.0);
}

TEST(CoderStep, TheKlReferenceIsTheBaseWithTheAdaptersOff) {
    // LoRA's B starts at zero, so the first step's policy is its reference (KL 0); once the update
    // moves B, the next step's policy and reference differ. A reference that followed the policy
    // (a full fine-tune's) would read 0 on both.
    Fixture f;
    kz::PolicyOptimizer opt = updating_optimizer(f);
    kz::CoderRewards rewards({});
    kz::CoderStepConfig cfg = two_token_groups();
    cfg.loss.kl_beta = 0.1;
    auto first = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg);
    ASSERT_TRUE(first.updated);
    EXPECT_NEAR(first.kl, 0.0, 1e-7);
    cfg.seed = 1;
    auto second = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg);
    ASSERT_TRUE(second.updated);
    EXPECT_GT(second.kl, 1e-7);
    // The largest token's KL bounds the mean over the step's tokens from above.
    EXPECT_NEAR(first.kl_max, 0.0, 1e-6);
    EXPECT_GE(second.kl_max, second.kl);
    // The largest token's record: its k3 from its log-probs is kl_max; its log-prob at the step's
    // start is the sampler's for that token (a position off by one would read another token's).
    const auto& peak = second.kl_max_at;
    ASSERT_GE(peak.token, 0);
    EXPECT_GE(peak.update, 0);
    EXPECT_LT(peak.update, second.updates);
    const double d = peak.ref_logp - peak.logp;
    EXPECT_NEAR(std::exp(d) - d - 1, second.kl_max, 1e-4 * std::max(1.0, second.kl_max));
    ASSERT_FALSE(std::isnan(peak.sampler_logp));
    EXPECT_NEAR(peak.old_logp, peak.sampler_logp, 1e-3);
    EXPECT_TRUE(f.model.lora_enabled);  // the reference pass restores the adapters
}

TEST(CoderStep, MiniBatchesAreUpdatesOverWholeGroupsFromOneSetOfOldLogprobs) {
    // Two groups with signal, two mini-batches: two AdamW steps. The old log-probs are taken once,
    // before the first, so after a large first step the second group's ratios leave the clip range
    // (a step that re-took them per mini-batch would read a ratio of 1 and clip nothing).
    Fixture f;
    kz::OptimConfig oc;
    oc.lr = 0.05;
    kz::PolicyOptimizer opt(kz::lora_parameters(f.model), oc);
    kz::CoderRewards rewards({});
    kz::CoderStepConfig cfg = two_token_groups();
    cfg.mini_batches = 2;
    auto st = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg);
    ASSERT_EQ(st.groups - st.zero_signal_groups, 2);
    EXPECT_EQ(st.updates, 2);
    EXPECT_EQ(opt.steps(), 2);
    EXPECT_GT(st.clip_fraction, 0.0);
    // grad_norm is the two updates' mean, grad_norm_max the larger; the optimizer's scale is read after both.
    EXPECT_GE(st.grad_norm_max, st.grad_norm);
    EXPECT_LE(st.grad_norm_max, 2 * st.grad_norm);
    EXPECT_GT(st.grad_norm_max, st.grad_norm * (1 + 1e-6)) << "two equal norms: the test does not tell max from mean";
    EXPECT_DOUBLE_EQ(st.grad_scale, opt.gradient_scale());
    EXPECT_GT(st.grad_scale, 0.0);
    // One mini-batch: one step, and its ratio is 1 throughout.
    cfg.mini_batches = 1;
    cfg.seed = 1;
    st = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg);
    ASSERT_EQ(st.groups - st.zero_signal_groups, 2);
    EXPECT_EQ(st.updates, 1);
    EXPECT_EQ(opt.steps(), 3);
    EXPECT_NEAR(st.clip_fraction, 0.0, 1e-9);
    // More mini-batches than groups: the empty ones take no step.
    cfg.mini_batches = 5;
    cfg.seed = 2;
    st = kz::coder_step(f.model, opt, f.tok, f.prompts, {}, ascii_judge(), rewards, cfg);
    EXPECT_EQ(st.updates, st.groups - st.zero_signal_groups);
}

}  // namespace
