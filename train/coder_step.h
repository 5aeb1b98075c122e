// One CA-GRPO step of the Coder (design sections 6.3-6.5, the Coder phase): G completions per task
// from the policy, each judged (in the trainer: candidate extraction and the verifier), rewards and
// group-relative advantages (rl/rewards.h), then one policy update with the clipped surrogate over
// the completion tokens (rl/policy_loss.h). The "old" log-probs are recomputed by the policy before
// the update (no grad), at the sampling temperature (the update trains the distribution the samples
// came from), so the ratio starts at 1; the reference policy (for the KL term) is the same model with
// its LoRA adapters disabled, scored at the same temperature.
//
// The step's three parts are separate so that the trainer can record rollouts between judging and
// updating, replay recorded rollouts after a crash instead of sampling them again, and train the
// Proposer with the same sampling and update: sample_rollouts, score_rollouts, update_policy.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/generate.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "engine/training.h"
#include "rl/policy_loss.h"
#include "rl/rewards.h"

namespace kz {

class Collective;

struct CoderStepConfig {
    int group_size = 8;  // G completions per task
    int64_t max_new_tokens = 1024;
    double temperature = 1.0, top_p = 1.0;
    uint64_t seed = 0;
    PolicyLossConfig loss;
    bool mask_overlong = true;  // completions cut at max_new_tokens are left out of the loss
    int64_t micro_batch = 8;    // rows per forward / backward
    // Optimizer updates per step: the groups in the loss split into this many mini-batches of whole
    // groups, one AdamW step each (PPO's mini-batches; verl's ppo_mini_batch_size). The old
    // log-probs are taken once, before the first, so the clipped ratio bounds the later ones.
    int mini_batches = 1;
    int64_t logprob_chunk = 1024;
};

// One completion of a step, as the rollout record keeps it (design section 3).
struct Rollout {
    size_t task = 0;  // index into the step's prompts
    int sample = 0;
    std::vector<int64_t> completion_ids;  // ends with the stop token when `stopped`
    std::vector<float> sampler_logprobs;
    bool stopped = false;
    std::string text;  // decoded, without the stop token
    RolloutOutcome outcome;
    double reward = 0, advantage = 0;
    bool in_loss = false;  // false: a zero-signal group, or an overlong completion (masked)
};

struct CoderStepStats {
    int64_t completions = 0, correct = 0, groups = 0, zero_signal_groups = 0, gate_open_groups = 0;
    int64_t loss_tokens = 0;
    int64_t updates = 0;  // optimizer steps taken (mini-batches with a row in the loss)
    double mean_reward = 0, loss = 0, policy = 0, kl = 0, clip_fraction = 0, grad_norm = 0;
    double kl_max = 0;  // the largest token's KL over the step's updates (PolicyLossStats::kl_max)
    // The token of kl_max: its id, the update (mini-batch, from 0) that scored it, and its log-probs
    // there: the policy's, at the step's start (old), the reference's and the sampler's (NaN for a row
    // without them). Far below old: the step's earlier updates moved it; old itself low: the sampler
    // drew it from the tail. token -1 without a KL.
    struct KlPeak {
        int64_t token = -1, update = -1;
        double logp = 0, old_logp = 0, ref_logp = 0, sampler_logp = 0;
    } kl_max_at;
    // The largest update's gradient norm before clipping (grad_norm is their mean), and the norm the
    // optimizer's steps divide by after the step (PolicyOptimizer::gradient_scale): a clipped spike
    // shows in the first and keeps the second high for the run's later steps.
    double grad_norm_max = 0, grad_scale = 0;
    // Groups in the loss whose samples are all correct (GroupResult::speed_only), and their share of
    // the absolute advantages of the loss's rows: how much of the update only the speed term orders.
    int64_t speed_only_groups = 0;
    double speed_only_share = 0;
    // How far the update's log-probs of the sampled tokens are from the sampler's own (mean and
    // largest |difference| over the loss's tokens, before the first update): two computations of one
    // distribution (the decoder's KV-cache path, the trainer's full forward), apart only by rounding
    // unless the trainer scores other tokens, positions or a temperature than the sampler drew with.
    double logprob_gap = 0, logprob_gap_max = 0;
    double generate_s = 0, judge_s = 0, update_s = 0;
    bool updated = false;  // false when no completion carried a signal (no optimizer step taken)
};

// Judges completions: (task index, completion text) pairs in, one outcome each out.
using CoderJudge = std::function<std::vector<RolloutOutcome>(const std::vector<std::pair<size_t, std::string>>&)>;

// G completions per prompt, in one generation batch (rollout i: prompt i / G, sample i % G); fills
// completion_ids, sampler_logprobs, stopped, text. Adds the time to stats->generate_s.
std::vector<Rollout> sample_rollouts(Model& policy, const Tokenizer& tok,
                                     const std::vector<std::vector<int64_t>>& prompts,
                                     const std::vector<int64_t>& stop_ids, const CoderStepConfig& cfg,
                                     CoderStepStats* stats = nullptr);

// Outcomes in (set by the judge or read back from records): rewards, advantages and in_loss of every
// rollout, per task group; the counts and mean reward of `stats`.
void score_rollouts(std::vector<Rollout>& rollouts, size_t tasks, CoderRewards& rewards, const CoderStepConfig& cfg,
                    CoderStepStats& stats);

// The clipped-surrogate update over the rollouts with in_loss set (advantages given), token-normalised
// within each of cfg.mini_batches mini-batches; one optimizer step per mini-batch with a row in it
// (stats.updates; grad_norm their mean, grad_norm_max their largest; loss, kl and clip_fraction over the
// whole batch's tokens).
// No rollout in the loss: no step (stats.updated false).
// With `dp` (data parallelism, train/data_parallel.h), each rank passes its own share of the batch:
// tokens are normalised over every rank's, gradients summed across ranks before the (identical) step,
// and the loss statistics are the batch's. Every rank must call it, with rows or without.
void update_policy(Model& policy, PolicyOptimizer& optimizer, const std::vector<std::vector<int64_t>>& prompts,
                   const std::vector<Rollout>& rollouts, const CoderStepConfig& cfg, CoderStepStats& stats,
                   Collective* dp = nullptr);

// `prompts` are token ids (rendered chat prompts), one per task. Throws std::runtime_error when the
// judge returns the wrong number of outcomes.
CoderStepStats coder_step(Model& policy, PolicyOptimizer& optimizer, const Tokenizer& tok,
                          const std::vector<std::vector<int64_t>>& prompts, const std::vector<int64_t>& stop_ids,
                          const CoderJudge& judge, CoderRewards& rewards, const CoderStepConfig& cfg,
                          std::vector<Rollout>* rollouts = nullptr);

}  // namespace kz
