// Coder rewards and group-relative advantages (design section 6.3), chosen by name so that the
// trainer and the ablations read the same code:
//   reward "ca_grpo": r_i = c_i + lambda * gate * c_i * s_i, the performance term switched on only
//                     where correctness is reliable (gate "group": the group's correct rate >= tau;
//                     gate "batch_ema": a moving average of the batch's correct rate >= tau)
//   reward "grpo":    r_i = c_i + lambda * c_i * s_i, always on (the ablation baseline)
//   advantage "grpo":    A_i = (r_i - mean r) / (std r + eps)
//   advantage "dr_grpo": A_i = r_i - mean r
// with s_i = clip(log2(speedup_i), -1, log2(S_max)) / log2(S_max) for a correct completion, else 0,
// and an incorrect completion never gets a positive advantage. No torch: plain numbers in and out.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kz {

// One verified completion, as the rewards see it.
struct RolloutOutcome {
    bool correct = false;
    std::optional<double> speedup_eager;  // correct completions only; missing = no performance term
    // The verifier failed, not the completion: never a reward. Left out of its group's statistics,
    // advantage 0 (the loss skips it).
    bool infra_error = false;
};

struct RewardConfig {
    std::string reward = "ca_grpo";  // ca_grpo | grpo
    std::string gate = "group";      // ca_grpo: group | batch_ema
    std::string advantage = "grpo";  // grpo | dr_grpo
    double lambda = 1.0, tau = 0.5, s_max = 4.0;
    double ema_decay = 0.9;  // batch_ema: weight of the history
    double eps = 1e-6;
    // Throws std::invalid_argument naming an unknown name or a value out of range.
    void validate() const;
};

// s_i of a correct completion: clip(log2(speedup), -1, log2(S_max)) / log2(S_max); 0 without a speedup.
double speed_score(const std::optional<double>& speedup, double s_max);

// Group-relative advantages of one group's rewards: "grpo" (r - mean) / (std + eps), sample std;
// "dr_grpo" r - mean. All rewards equal: every advantage 0 and *zero_signal true.
std::vector<double> group_advantages(const std::vector<double>& rewards, const std::string& kind, double eps,
                                     bool* zero_signal = nullptr);

struct GroupResult {
    std::vector<double> rewards, advantages;
    double correct_rate = 0;   // c-hat of the group
    bool gate_open = false;    // whether the performance term was on
    bool zero_signal = false;  // every reward equal: no learning signal (the loss drops the group)
    // Every judged completion correct and the rewards unequal: the speed term alone orders the group,
    // and the "grpo" advantage scales its differences, however small (timing noise), to unit size.
    bool speed_only = false;
};

// Rewards and advantages for a batch of groups (one group = the G completions of one task). Keeps
// the batch_ema gate's moving average across batches; save and restore it with the trainer state.
class CoderRewards {
public:
    explicit CoderRewards(RewardConfig cfg);
    std::vector<GroupResult> score(const std::vector<std::vector<RolloutOutcome>>& groups);
    // The batch gate's moving average (nullopt before the first batch).
    std::optional<double> batch_correct_ema() const { return ema_; }
    void set_batch_correct_ema(std::optional<double> v) { ema_ = v; }
    const RewardConfig& config() const { return cfg_; }

private:
    RewardConfig cfg_;
    std::optional<double> ema_;
};

}  // namespace kz
