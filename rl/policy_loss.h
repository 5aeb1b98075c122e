// The policy loss of CA-GRPO and GRPO (design section 6.4), on the (rows, tokens) log-probs that
// engine/training.h computes: the PPO-clipped surrogate on per-token probability ratios with
// asymmetric clipping, an optional KL penalty to the reference policy (k3 estimator), and
// token-level normalisation over the whole batch (every completion token weighs the same, long or
// short). Rows of zero-signal groups and overlong completions are masked by the caller's mask.
#pragma once

#include <torch/torch.h>

#include "rl/policy_loss_config.h"

namespace kz {

struct PolicyLossStats {
    double loss = 0, policy = 0, kl = 0;  // means over the masked tokens
    double kl_max = 0;                    // the largest masked token's k3, unclamped: a spike's few tokens
    // Where kl_max is in the (N, L) inputs (-1 without a KL), and the log-probs there: the policy's
    // being trained, the old (the step's start) and the reference's.
    int64_t kl_max_row = -1, kl_max_col = -1;
    double kl_max_logp = 0, kl_max_old_logp = 0, kl_max_ref_logp = 0;
    double clip_fraction = 0;  // share of masked tokens whose ratio was clipped
    double tokens = 0;         // masked tokens counted
};

// logp (N, L) log-probs under the policy being trained (requires grad); old_logp (N, L) those the
// sampler recorded; ref_logp (N, L) the reference policy's (needed when kl_beta > 0, else may be
// undefined); advantages (N), one per completion; mask (N, L), 1 on completion tokens that count.
// Returns the scalar loss. Throws std::invalid_argument on shape mismatches.
torch::Tensor policy_loss(const torch::Tensor& logp, const torch::Tensor& old_logp, const torch::Tensor& ref_logp,
                          const torch::Tensor& advantages, const torch::Tensor& mask, const PolicyLossConfig& cfg,
                          PolicyLossStats* stats = nullptr);

}  // namespace kz
