#include "train/coder_step.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <stdexcept>

#include "train/data_parallel.h"

namespace kz {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Rows `rows` of the step as one right-padded batch: ids (B, T), valid (B, T), and the (B, T-1) mask
// of the completion tokens (position t - 1 predicts ids[t]).
struct Packed {
    TrainBatch batch;
    torch::Tensor mask;        // (B, T-1) fp32
    torch::Tensor advantages;  // (B) fp32
    // The sampler's log-prob of each completion token, where the mask is 1 and the row carries one
    // per token (a row without them has sampled = 0 throughout).
    torch::Tensor sampler;  // (B, T-1) fp32
    torch::Tensor sampled;  // (B, T-1) fp32
};

Packed pack(const std::vector<const Rollout*>& rows, const std::vector<std::vector<int64_t>>& prompts,
            torch::Device device) {
    int64_t T = 0;
    for (const auto* r : rows)
        T = std::max<int64_t>(T, static_cast<int64_t>(prompts[r->task].size() + r->completion_ids.size()));
    const auto B = static_cast<int64_t>(rows.size());
    auto ids = torch::zeros({B, T}, torch::kInt64);
    auto valid = torch::zeros({B, T}, torch::kBool);
    auto mask = torch::zeros({B, T - 1}, torch::kFloat32);
    auto adv = torch::zeros({B}, torch::kFloat32);
    auto sampler = torch::zeros({B, T - 1}, torch::kFloat32);
    auto sampled = torch::zeros({B, T - 1}, torch::kFloat32);
    for (int64_t b = 0; b < B; ++b) {
        const auto& p = prompts[rows[b]->task];
        const auto& c = rows[b]->completion_ids;
        const auto& lp = rows[b]->sampler_logprobs;
        const auto P = static_cast<int64_t>(p.size()), L = static_cast<int64_t>(c.size());
        for (int64_t t = 0; t < P; ++t) ids[b][t] = p[t];
        for (int64_t t = 0; t < L; ++t) ids[b][P + t] = c[t];
        valid[b].slice(0, 0, P + L).fill_(true);
        mask[b].slice(0, P - 1, P + L - 1).fill_(1.0);
        adv[b] = rows[b]->advantage;
        if (lp.size() == c.size()) {
            sampler[b].slice(0, P - 1, P + L - 1).copy_(torch::tensor(lp, torch::kFloat32));
            sampled[b].slice(0, P - 1, P + L - 1).fill_(1.0);
        }
    }
    Packed out;
    out.batch = {ids.to(device), valid.to(device), torch::cat({torch::zeros({B, 1}), mask}, 1).to(device)};
    out.mask = mask.to(device);
    out.advantages = adv.to(device);
    out.sampler = sampler.to(device);
    out.sampled = sampled.to(device);
    return out;
}

}  // namespace

std::vector<Rollout> sample_rollouts(Model& policy, const Tokenizer& tok,
                                     const std::vector<std::vector<int64_t>>& prompts,
                                     const std::vector<int64_t>& stop_ids, const CoderStepConfig& cfg,
                                     CoderStepStats* stats) {
    const int G = cfg.group_size;
    if (G < 1) throw std::invalid_argument("group_size must be >= 1");
    auto t0 = std::chrono::steady_clock::now();
    GenerateRequest req;
    for (const auto& p : prompts)
        for (int s = 0; s < G; ++s) req.prompts.push_back(p);
    req.max_new_tokens = cfg.max_new_tokens;
    req.stop_ids = stop_ids;
    req.sampling.temperature = cfg.temperature;
    req.sampling.top_p = cfg.top_p;
    req.sampling.seed = cfg.seed;
    std::vector<Completion> outs;
    if (!req.prompts.empty()) {
        torch::NoGradGuard no_grad;
        outs = generate(policy, req);
    }
    std::vector<Rollout> rollouts(outs.size());
    for (size_t i = 0; i < outs.size(); ++i) {
        Rollout& r = rollouts[i];
        r.task = i / static_cast<size_t>(G);
        r.sample = static_cast<int>(i % static_cast<size_t>(G));
        r.completion_ids = outs[i].tokens;
        r.sampler_logprobs = outs[i].logprobs;
        r.stopped = outs[i].stopped;
        r.text = tok.decode(outs[i].text_tokens());
    }
    if (stats) stats->generate_s += seconds_since(t0);
    return rollouts;
}

void score_rollouts(std::vector<Rollout>& rollouts, size_t tasks, CoderRewards& rewards, const CoderStepConfig& cfg,
                    CoderStepStats& st) {
    std::vector<std::vector<RolloutOutcome>> groups(tasks);
    for (const auto& r : rollouts) {
        if (r.task >= tasks || static_cast<size_t>(r.sample) != groups[r.task].size())
            throw std::invalid_argument("rollouts must come grouped by task, samples in order");
        groups[r.task].push_back(r.outcome);
    }
    auto scored = rewards.score(groups);
    st.completions = st.correct = st.zero_signal_groups = st.gate_open_groups = st.speed_only_groups = 0;
    st.mean_reward = 0;
    double weight = 0, speed_only_weight = 0;  // sums of |advantage| over the loss's rows
    std::vector<bool> speed_only_in_loss(tasks, false);
    for (Rollout& r : rollouts) {
        const GroupResult& g = scored[r.task];
        r.reward = g.rewards[static_cast<size_t>(r.sample)];
        r.advantage = g.advantages[static_cast<size_t>(r.sample)];
        r.in_loss =
            !g.zero_signal && !r.outcome.infra_error && !r.completion_ids.empty() && !(cfg.mask_overlong && !r.stopped);
        st.correct += r.outcome.correct;
        st.mean_reward += r.reward;
        if (!r.in_loss) continue;
        weight += std::abs(r.advantage);
        if (g.speed_only) speed_only_weight += std::abs(r.advantage), speed_only_in_loss[r.task] = true;
    }
    st.completions = static_cast<int64_t>(rollouts.size());
    if (!rollouts.empty()) st.mean_reward /= static_cast<double>(rollouts.size());
    st.groups = static_cast<int64_t>(scored.size());
    for (const auto& g : scored) st.zero_signal_groups += g.zero_signal, st.gate_open_groups += g.gate_open;
    st.speed_only_groups = std::count(speed_only_in_loss.begin(), speed_only_in_loss.end(), true);
    st.speed_only_share = weight > 0 ? speed_only_weight / weight : 0.0;
}

void update_policy(Model& policy, PolicyOptimizer& optimizer, const std::vector<std::vector<int64_t>>& prompts,
                   const std::vector<Rollout>& rollouts, const CoderStepConfig& cfg, CoderStepStats& st,
                   Collective* dp) {
    auto t0 = std::chrono::steady_clock::now();
    std::map<size_t, std::vector<const Rollout*>> groups;  // the loss's rows by task
    for (const auto& r : rollouts)
        if (r.in_loss) groups[r.task].push_back(&r);
    // Mini-batch m takes groups [m n / M, (m + 1) n / M): whole groups, as even as they allow (a
    // rank with fewer groups than M has empty ones and still joins every update).
    const auto M = static_cast<size_t>(std::max(1, cfg.mini_batches));
    std::vector<Packed> mbs;                // micro-batches, mini-batch by mini-batch
    std::vector<size_t> mini_first(M + 1);  // mini-batch m is mbs[mini_first[m], mini_first[m + 1])
    {
        std::vector<std::vector<const Rollout*>> ordered;
        for (auto& [task, rows] : groups) ordered.push_back(std::move(rows));
        const size_t n = ordered.size();
        for (size_t m = 0; m < M; ++m) {
            mini_first[m] = mbs.size();
            std::vector<const Rollout*> rows;
            for (size_t g = m * n / M; g < (m + 1) * n / M; ++g)
                rows.insert(rows.end(), ordered[g].begin(), ordered[g].end());
            for (size_t i = 0; i < rows.size(); i += static_cast<size_t>(cfg.micro_batch)) {
                const size_t e = std::min(rows.size(), i + static_cast<size_t>(cfg.micro_batch));
                mbs.push_back(
                    pack({rows.begin() + static_cast<std::ptrdiff_t>(i), rows.begin() + static_cast<std::ptrdiff_t>(e)},
                         prompts, policy.device()));
            }
        }
        mini_first[M] = mbs.size();
    }
    // The old (and reference) log-probs of every row, before the first update: later mini-batches'
    // ratios then measure how far the earlier updates moved the policy, and the clip bounds it.
    // Scored at the sampling temperature: the policy the samples came from (sequence_logprobs).
    std::vector<torch::Tensor> old_lp, ref_lp;
    std::vector<double> tokens;                       // counted tokens per micro-batch
    double gap_sum = 0, gap_tokens = 0, gap_max = 0;  // |old - sampler| over the tokens the sampler scored
    {
        torch::NoGradGuard no_grad;
        for (auto& mb : mbs) {
            old_lp.push_back(sequence_logprobs(policy, mb.batch, cfg.logprob_chunk, ScoredRows::all, cfg.temperature));
            tokens.push_back(mb.mask.sum().item<double>());
            auto gap = (old_lp.back() - mb.sampler).abs() * mb.sampled;  // (B, T-1)
            gap_sum += gap.sum().item<double>();
            gap_tokens += mb.sampled.sum().item<double>();
            gap_max = std::max(gap_max, gap.max().item<double>());
            if (cfg.loss.kl_beta > 0) {
                const bool was = policy.lora_enabled;
                policy.lora_enabled = false;
                ref_lp.push_back(
                    sequence_logprobs(policy, mb.batch, cfg.logprob_chunk, ScoredRows::all, cfg.temperature));
                policy.lora_enabled = was;
            }
        }
    }
    // Token-level normalisation over each mini-batch: every rank's tokens. Every rank computes the
    // same sums in the same order, so all take the same updates.
    std::vector<double> mini_tokens(M, 0.0);
    for (size_t m = 0; m < M; ++m) {
        for (size_t i = mini_first[m]; i < mini_first[m + 1]; ++i) mini_tokens[m] += tokens[i];
        if (dp) mini_tokens[m] = dp->sum(mini_tokens[m]);
    }
    double batch_tokens = 0;
    for (double t : mini_tokens) batch_tokens += t;
    if (batch_tokens > 0) {
        st.loss = st.policy = st.kl = st.clip_fraction = st.grad_norm = st.grad_norm_max = st.kl_max = 0;
        st.kl_max_at = {};
        for (size_t m = 0; m < M; ++m) {
            if (mini_tokens[m] <= 0) continue;
            for (size_t i = mini_first[m]; i < mini_first[m + 1]; ++i) {
                const double share = tokens[i] / mini_tokens[m], weight = tokens[i] / batch_tokens;
                PolicyLossStats ls;
                LossFn fn = [&](const torch::Tensor& logp, const TrainBatch&) {
                    return policy_loss(logp, old_lp[i], ref_lp.empty() ? torch::Tensor() : ref_lp[i], mbs[i].advantages,
                                       mbs[i].mask, cfg.loss, &ls) *
                           share;
                };
                accumulate(policy, mbs[i].batch, fn, 1, cfg.logprob_chunk, ScoredRows::all, cfg.temperature);
                st.loss += ls.loss * weight;
                st.policy += ls.policy * weight;
                st.kl += ls.kl * weight;
                if (ls.kl_max_row >= 0 && (st.kl_max_at.token < 0 || ls.kl_max > st.kl_max)) {
                    const int64_t b = ls.kl_max_row, t = ls.kl_max_col;
                    const bool sampled = mbs[i].sampled[b][t].item<double>() > 0;
                    st.kl_max_at = {mbs[i].batch.ids[b][t + 1].item<int64_t>(),
                                    static_cast<int64_t>(m),
                                    ls.kl_max_logp,
                                    ls.kl_max_old_logp,
                                    ls.kl_max_ref_logp,
                                    sampled ? mbs[i].sampler[b][t].item<double>() : std::nan("")};
                }
                st.kl_max = std::max(st.kl_max, ls.kl_max);
                st.clip_fraction += ls.clip_fraction * weight;
            }
            if (dp) all_reduce_gradients(*dp, optimizer.params());
            const double norm = optimizer.step();
            st.grad_norm += norm;
            st.grad_norm_max = std::max(st.grad_norm_max, norm);
            ++st.updates;
        }
        st.grad_norm /= static_cast<double>(st.updates);
        st.grad_scale = optimizer.gradient_scale();
        if (dp) {
            std::vector<torch::Tensor> s = {
                torch::tensor({st.loss, st.policy, st.kl, st.clip_fraction, gap_sum, gap_tokens}, torch::kFloat64)
                    .to(dp->device())};
            dp->all_reduce_sum(s);
            auto v = s[0].cpu();
            st.loss = v[0].item<double>(), st.policy = v[1].item<double>(), st.kl = v[2].item<double>(),
            st.clip_fraction = v[3].item<double>(), gap_sum = v[4].item<double>(), gap_tokens = v[5].item<double>();
            // The ranks' largest, each in its own row of a sum; the KL's peak token is the row of the
            // largest kl_max's.
            const auto& p = st.kl_max_at;
            std::vector<torch::Tensor> peaks = {torch::zeros({dp->world(), 8}, torch::kFloat64)};
            peaks[0][dp->rank()] =
                torch::tensor({st.kl_max, gap_max, static_cast<double>(p.token), static_cast<double>(p.update), p.logp,
                               p.old_logp, p.ref_logp, p.sampler_logp},
                              torch::kFloat64);
            peaks[0] = peaks[0].to(dp->device());
            dp->all_reduce_sum(peaks);
            auto all = peaks[0].cpu();
            auto top = all[all.select(1, 0).argmax().item<int64_t>()];
            st.kl_max = top[0].item<double>(), gap_max = all.select(1, 1).max().item<double>();
            st.kl_max_at = {static_cast<int64_t>(top[2].item<double>()),
                            static_cast<int64_t>(top[3].item<double>()),
                            top[4].item<double>(),
                            top[5].item<double>(),
                            top[6].item<double>(),
                            top[7].item<double>()};
        }
        st.logprob_gap = gap_tokens > 0 ? gap_sum / gap_tokens : 0.0;
        st.logprob_gap_max = gap_max;
        st.loss_tokens = static_cast<int64_t>(batch_tokens);
        st.updated = true;
    }
    st.update_s += seconds_since(t0);
}

CoderStepStats coder_step(Model& policy, PolicyOptimizer& optimizer, const Tokenizer& tok,
                          const std::vector<std::vector<int64_t>>& prompts, const std::vector<int64_t>& stop_ids,
                          const CoderJudge& judge, CoderRewards& rewards, const CoderStepConfig& cfg,
                          std::vector<Rollout>* rollouts_out) {
    CoderStepStats st;
    if (prompts.empty()) return st;
    auto rollouts = sample_rollouts(policy, tok, prompts, stop_ids, cfg, &st);
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::pair<size_t, std::string>> to_judge;
    for (const auto& r : rollouts) to_judge.emplace_back(r.task, r.text);
    auto outcomes = judge(to_judge);
    if (outcomes.size() != rollouts.size())
        throw std::runtime_error("the judge returned " + std::to_string(outcomes.size()) + " outcomes for " +
                                 std::to_string(rollouts.size()) + " completions");
    for (size_t i = 0; i < rollouts.size(); ++i) rollouts[i].outcome = outcomes[i];
    score_rollouts(rollouts, prompts.size(), rewards, cfg, st);
    st.judge_s = seconds_since(t0);
    update_policy(policy, optimizer, prompts, rollouts, cfg, st);
    if (rollouts_out) *rollouts_out = std::move(rollouts);
    return st;
}

}  // namespace kz
