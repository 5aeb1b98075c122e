#include "rl/rewards.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace kz {

void RewardConfig::validate() const {
    if (reward != "ca_grpo" && reward != "grpo")
        throw std::invalid_argument("unknown reward \"" + reward + "\" (ca_grpo, grpo)");
    if (gate != "group" && gate != "batch_ema")
        throw std::invalid_argument("unknown gate \"" + gate + "\" (group, batch_ema)");
    if (advantage != "grpo" && advantage != "dr_grpo")
        throw std::invalid_argument("unknown advantage estimator \"" + advantage + "\" (grpo, dr_grpo)");
    if (!(s_max > 1)) throw std::invalid_argument("s_max must be > 1");
    if (!(tau >= 0 && tau <= 1)) throw std::invalid_argument("tau must be in [0, 1]");
    if (!(lambda >= 0)) throw std::invalid_argument("lambda must be >= 0");
    if (!(ema_decay >= 0 && ema_decay < 1)) throw std::invalid_argument("ema_decay must be in [0, 1)");
    if (!(eps > 0)) throw std::invalid_argument("eps must be > 0");
}

double speed_score(const std::optional<double>& speedup, double s_max) {
    if (!speedup || !(*speedup > 0)) return 0.0;
    const double top = std::log2(s_max);
    return std::clamp(std::log2(*speedup), -1.0, top) / top;
}

std::vector<double> group_advantages(const std::vector<double>& rewards, const std::string& kind, double eps,
                                     bool* zero_signal) {
    const size_t G = rewards.size();
    std::vector<double> adv(G, 0.0);
    const bool flat = std::all_of(rewards.begin(), rewards.end(), [&](double x) { return x == rewards[0]; });
    if (zero_signal) *zero_signal = flat;
    if (G == 0 || flat) return adv;
    double mean = 0, var = 0;
    for (double x : rewards) mean += x;
    mean /= static_cast<double>(G);
    for (double x : rewards) var += (x - mean) * (x - mean);
    // Sample standard deviation (n - 1), as TRL's and verl's GRPO compute it.
    const double sd = G > 1 ? std::sqrt(var / static_cast<double>(G - 1)) : 0.0;
    for (size_t i = 0; i < G; ++i) adv[i] = kind == "grpo" ? (rewards[i] - mean) / (sd + eps) : rewards[i] - mean;
    return adv;
}

CoderRewards::CoderRewards(RewardConfig cfg) : cfg_(std::move(cfg)) { cfg_.validate(); }

std::vector<GroupResult> CoderRewards::score(const std::vector<std::vector<RolloutOutcome>>& groups) {
    // The batch gate uses the moving average including this batch's correct rate.
    double batch_correct = 0;
    size_t batch_n = 0;
    for (const auto& g : groups)
        for (const auto& o : g)
            if (!o.infra_error) batch_correct += o.correct, ++batch_n;
    if (cfg_.reward == "ca_grpo" && cfg_.gate == "batch_ema" && batch_n > 0) {
        const double rate = batch_correct / static_cast<double>(batch_n);
        ema_ = ema_ ? cfg_.ema_decay * *ema_ + (1 - cfg_.ema_decay) * rate : rate;
    }
    std::vector<GroupResult> out;
    for (const auto& g : groups) {
        GroupResult r;
        std::vector<size_t> judged;  // completions the verifier judged (not infra errors)
        for (size_t i = 0; i < g.size(); ++i)
            if (!g[i].infra_error) judged.push_back(i);
        r.rewards.assign(g.size(), 0.0);
        r.advantages.assign(g.size(), 0.0);
        const size_t G = judged.size();
        if (G == 0) {
            r.zero_signal = true;
            out.push_back(r);
            continue;
        }
        for (size_t i : judged) r.correct_rate += g[i].correct;
        r.correct_rate /= static_cast<double>(G);
        if (cfg_.reward == "grpo")
            r.gate_open = true;
        else if (cfg_.gate == "group")
            r.gate_open = r.correct_rate >= cfg_.tau;
        else
            r.gate_open = ema_ && *ema_ >= cfg_.tau;
        std::vector<double> judged_rewards;
        for (size_t i : judged) {
            const double c = g[i].correct ? 1.0 : 0.0;
            r.rewards[i] = c + (r.gate_open ? cfg_.lambda * c * speed_score(g[i].speedup_eager, cfg_.s_max) : 0.0);
            judged_rewards.push_back(r.rewards[i]);
        }
        auto adv = group_advantages(judged_rewards, cfg_.advantage, cfg_.eps, &r.zero_signal);
        r.speed_only = !r.zero_signal && r.correct_rate == 1.0;
        for (size_t k = 0; k < G; ++k) {
            const size_t i = judged[k];
            r.advantages[i] =
                g[i].correct ? adv[k] : std::min(adv[k], 0.0);  // an incorrect completion is never reinforced
        }
        out.push_back(r);
    }
    return out;
}

}  // namespace kz
