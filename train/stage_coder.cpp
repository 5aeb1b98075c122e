// Stage coder: CA-GRPO steps (design 6.3, 6.4) on the pool: each step draws tasks_per_step tasks in a
// seeded order, samples G completions per task (blocks across ranks), verifies them, scores rewards
// and advantages, updates the frontier and the Coder. Reads the pool; writes rollout records ("coder")
// and the store's attempts; adds "coder" (one entry per step) to the metrics.
#include "train/trainer_impl.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>

#include "train/seeds.h"

namespace kz {

using json = nlohmann::json;

void Trainer::coder_phase(int64_t it, const std::vector<StoredTask>& pool, json& m) {
    const auto& cc = cfg_.coder_phase;
    json steps = json::array();
    if (pool.empty()) {
        m["coder"] = {{"steps", steps}, {"skipped", "empty pool"}};
        return;
    }
    Progress bar("coder: CA-GRPO steps", cc.steps);
    // The KL's largest token, decoded, for a reader of the metrics (CoderStepStats::KlPeak).
    auto kl_peak = [&](const CoderStepStats::KlPeak& p) -> json {
        if (p.token < 0) return nullptr;
        return {{"token", p.token},
                {"text", coder_->tokenizer().decode({p.token})},
                {"update", p.update},
                {"logp", p.logp},
                {"old_logp", p.old_logp},
                {"ref_logp", p.ref_logp},
                {"sampler_logp", std::isnan(p.sampler_logp) ? json(nullptr) : json(p.sampler_logp)}};
    };
    for (int s = 0; s < cc.steps && !ranks_.stopping(stop_); ++s) {
        std::vector<StoredTask> tasks = pool;
        std::mt19937_64 rng(derive_seed(cfg_.seed, it, kCoderStage, static_cast<uint64_t>(s)));
        std::shuffle(tasks.begin(), tasks.end(), rng);
        tasks.resize(std::min(tasks.size(), static_cast<size_t>(cc.tasks_per_step)));
        std::vector<std::vector<int64_t>> prompts;
        for (const auto& t : tasks) prompts.push_back(coder_->encode_chat(prompt_.messages(t.source)));
        CoderStepConfig c = coder_cfg(cc.group_size, cc.max_new_tokens, cc.temperature, cc.top_p,
                                      derive_seed(cfg_.seed, it, kCoderStage, 1000 + static_cast<uint64_t>(s)));
        c.mini_batches = cc.mini_batches;
        CoderStepStats st;
        // Samples are numbered across the iteration's steps, so a task drawn in two steps keeps
        // distinct record keys.
        const int first = s * cc.group_size;
        JudgedStep j = sample_step(it, "coder", hashes(tasks), first, *coder_, prompts, c, st, &tasks);
        auto t0 = std::chrono::steady_clock::now();
        score_rollouts(j.rollouts, tasks.size(), rewards_, c, st);
        std::vector<RolloutRecord> out;
        std::vector<int> passed(tasks.size(), 0), judged(tasks.size(), 0);
        std::vector<double> speedups;
        for (size_t i = 0; i < j.rollouts.size(); ++i) {
            const Rollout& r = j.rollouts[i];
            if (!r.outcome.infra_error) ++judged[r.task], passed[r.task] += r.outcome.correct;
            if (r.outcome.correct && r.outcome.speedup_eager) speedups.push_back(*r.outcome.speedup_eager);
            out.push_back(record(it, "coder", tasks[r.task].hash, first + r.sample, prompts[r.task], r, j.verdicts[i],
                                 version("coder", it)));
        }
        append(out);
        if (!j.replayed) add_attempts(tasks, j, "coder@iter-" + std::to_string(it - 1));
        for (size_t t = 0; t < tasks.size(); ++t)
            if (judged[t]) frontier_.update(tasks[t].apis, passed[t], judged[t]);
        st.judge_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        const auto [begin, end] = ranks_.block(tasks.size());
        update_policy(coder_->model(), coder_->optimizer(), prompts, rows_of(j.rollouts, begin, end), c, st,
                      ranks_.collective());
        double geo = 0;
        for (double x : speedups) geo += std::log(x);
        steps.push_back({{"step", s},
                         {"completions", st.completions},
                         {"correct", st.correct},
                         {"pass_rate", st.completions ? static_cast<double>(st.correct) / st.completions : 0.0},
                         {"mean_reward", st.mean_reward},
                         {"groups", st.groups},
                         {"zero_signal_groups", st.zero_signal_groups},
                         {"gate_open_rate", st.groups ? static_cast<double>(st.gate_open_groups) / st.groups : 0.0},
                         {"geomean_speedup", speedups.empty() ? json(nullptr) : json(std::exp(geo / speedups.size()))},
                         {"loss", st.loss},
                         {"kl", st.kl},
                         {"kl_max", st.kl_max},
                         {"kl_max_at", kl_peak(st.kl_max_at)},
                         {"speed_only_groups", st.speed_only_groups},
                         {"speed_only_share", st.speed_only_share},
                         {"logprob_gap", st.logprob_gap},
                         {"logprob_gap_max", st.logprob_gap_max},
                         {"clip_fraction", st.clip_fraction},
                         {"grad_norm", st.grad_norm},
                         {"grad_norm_max", st.grad_norm_max},
                         {"grad_scale", st.grad_scale},
                         {"loss_tokens", st.loss_tokens},
                         {"updated", st.updated},
                         {"updates", st.updates},
                         {"replayed", j.replayed},
                         {"generate_s", st.generate_s},
                         {"update_s", st.update_s}});
        bar.advance();
    }
    m["coder"] = {{"steps", steps}};
    if (rewards_.batch_correct_ema()) m["coder"]["batch_correct_ema"] = *rewards_.batch_correct_ema();
}

}  // namespace kz
