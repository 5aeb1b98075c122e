// Stage propose (design 6.1, 6.2): API sets drawn from the frontier; the Proposer's modules parsed,
// validated and stored (the symbolic generator fills in when too few are valid); the Coder measured on
// each valid module (p-hat over G verified samples), the frontier updated; Proposer rewards and one
// Proposer update. Reads the frontier and the task store; writes rollout records ("proposer",
// "probe") and the store's attempts; returns the valid modules whose p-hat lies in the band; adds
// "propose" to the metrics.
#include "train/trainer_impl.h"

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <set>
#include <utility>

#include "common/hash.h"
#include "rl/rewards.h"
#include "tasks/proposer.h"
#include "tasks/symbolic.h"
#include "train/seeds.h"

namespace kz {

using json = nlohmann::json;

namespace {

std::string short_hash(const std::string& s) { return sha256_hex(s).substr(0, 16); }

double mean_of(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

}  // namespace

std::vector<StoredTask> Trainer::propose(int64_t it, json& m) {
    const auto& pc = cfg_.propose;
    std::mt19937_64 rng(derive_seed(cfg_.seed, it, kProposeStage));
    std::vector<ApiSet> sets;
    std::vector<std::vector<int64_t>> prompts;
    std::vector<std::string> set_keys;
    for (int s = 0; s < pc.api_sets; ++s) {
        int level = pc.levels[static_cast<size_t>(s) % pc.levels.size()];
        sets.push_back(frontier_.draw(catalog_, level, rng));
        prompts.push_back(proposer_->encode_chat(proposer_prompt(catalog_, sets.back().apis)));
        std::string joined;
        for (const auto& a : sets.back().apis) joined += a + ",";
        set_keys.push_back("set" + std::to_string(s) + "-" + short_hash(joined + std::to_string(level)));
    }
    const int Gp = pc.samples_per_set;
    CoderStepConfig pcfg =
        coder_cfg(Gp, pc.max_new_tokens, pc.temperature, pc.top_p, derive_seed(cfg_.seed, it, kProposeStage, 1));
    CoderStepStats pst;
    auto t0 = std::chrono::steady_clock::now();
    auto lap = [&t0] {  // seconds since the last lap: the stage's parts, in the metrics
        auto now = std::chrono::steady_clock::now();
        return std::chrono::duration<double>(now - std::exchange(t0, now)).count();
    };
    JudgedStep sampled = sample_step(it, "proposer", set_keys, 0, *proposer_, prompts, pcfg, pst, nullptr);
    const double sample_s = lap();
    std::vector<Rollout>& proposals = sampled.rollouts;
    const bool replayed = sampled.replayed;

    // Parse, validate, store.
    std::vector<ProposalOutcome> outcomes(proposals.size());
    std::vector<std::optional<TaskRecord>> tasks(proposals.size());
    std::vector<std::string> parsed_sources;
    std::vector<size_t> parsed_index;
    std::vector<Candidate> cands;
    for (size_t i = 0; i < proposals.size(); ++i) {
        ParsedProposal pp = parse_proposal(proposals[i].text);
        outcomes[i].parsed = pp.ok;
        if (!pp.ok) continue;
        const ApiSet& set = sets[proposals[i].task];
        cands.push_back({pp.source, set.apis, set.level});
        parsed_sources.push_back(pp.source);
        parsed_index.push_back(i);
    }
    if (!cands.empty()) {
        Progress bar("propose: validating " + std::to_string(cands.size()) + " modules", 1);
        auto recs = validation_->validate_and_store(
            static_cast<int64_t>(cands.size()), [&](int64_t k) { return cands[static_cast<size_t>(k)]; }, 0, "proposer",
            it, leader_submission(it));
        for (size_t k = 0; k < recs.size(); ++k) {
            tasks[parsed_index[k]] = recs[k];
            outcomes[parsed_index[k]].valid = recs[k].valid;
        }
        bar.advance();
    }
    auto clusters = near_duplicate_clusters(parsed_sources);
    for (size_t k = 0; k < parsed_index.size(); ++k) outcomes[parsed_index[k]].cluster = clusters[k];

    // The modules the Coder is measured on: the valid proposals, then symbolic ones if too few.
    std::vector<StoredTask> modules;
    std::set<int64_t> seen;
    for (const auto& t : tasks)
        if (t && t->valid && seen.insert(t->id).second) modules.push_back(stored(*t));
    const int64_t from_proposer = static_cast<int64_t>(modules.size());
    int64_t symbolic = 0, symbolic_tried = 0, symbolic_rounds = 0;
    if (static_cast<int>(modules.size()) < pc.min_valid && !sets.empty()) {
        const SizeProfile sizes = pc.sizes == "small" ? SizeProfile::small : SizeProfile::typical;
        // Candidate k: API set k (round robin), from a seed of its own, so that any rank can make
        // any candidate. Validated until what is missing came out valid (the workers of every
        // rank busy meanwhile), again if the store's novelty checks turned some down, at most
        // 4 x min_valid candidates in all.
        const int64_t cap = 4 * static_cast<int64_t>(pc.min_valid);
        while (static_cast<int>(modules.size()) < pc.min_valid && symbolic_tried < cap) {
            const int64_t first = symbolic_tried;
            auto make = [&](int64_t k) {
                const ApiSet& set = sets[static_cast<size_t>(first + k) % sets.size()];
                std::mt19937_64 rng(derive_seed(cfg_.seed, it, kSymbolicStage, static_cast<uint64_t>(first + k)));
                GeneratedTask g = generate_task(catalog_, set, sizes, rng);
                return Candidate{g.source, g.apis, set.level};
            };
            auto recs =
                validation_->validate_and_store(cap - first, make, pc.min_valid - static_cast<int64_t>(modules.size()),
                                                "symbolic", it, leader_submission(it));
            symbolic_tried += static_cast<int64_t>(recs.size());
            ++symbolic_rounds;
            for (const TaskRecord& t : recs)
                if (t.valid && static_cast<int>(modules.size()) < pc.min_valid && seen.insert(t.id).second) {
                    modules.push_back(stored(t));
                    ++symbolic;
                }
            if (recs.empty()) break;
        }
    }

    const double validate_s = lap();

    // p-hat of each module: G verified Coder samples; the frontier learns from each.
    const int G = pc.probe_samples;
    std::map<int64_t, double> pass_rate;
    if (!modules.empty()) {
        std::vector<std::vector<int64_t>> cprompts;
        for (const auto& t : modules) cprompts.push_back(coder_->encode_chat(prompt_.messages(t.source)));
        CoderStepConfig ccfg = coder_cfg(G, cfg_.coder_phase.max_new_tokens, cfg_.coder_phase.temperature,
                                         cfg_.coder_phase.top_p, derive_seed(cfg_.seed, it, kProbeStage));
        CoderStepStats cst;
        Progress bar("propose: measuring the Coder on " + std::to_string(modules.size()) + " modules", 1);
        JudgedStep j = sample_step(it, "probe", hashes(modules), 0, *coder_, cprompts, ccfg, cst, &modules);
        bar.advance();
        std::vector<RolloutRecord> out;
        std::vector<int> passed(modules.size(), 0), judged(modules.size(), 0);
        for (size_t i = 0; i < j.rollouts.size(); ++i) {
            Rollout& r = j.rollouts[i];
            r.reward = r.outcome.correct ? 1.0 : 0.0;
            if (!r.outcome.infra_error) ++judged[r.task], passed[r.task] += r.outcome.correct;
            out.push_back(record(it, "probe", modules[r.task].hash, r.sample, cprompts[r.task], r, j.verdicts[i],
                                 version("coder", it)));
        }
        append(out);
        if (!j.replayed) add_attempts(modules, j, "probe");
        for (size_t t = 0; t < modules.size(); ++t) {
            pass_rate[modules[t].id] = judged[t] ? static_cast<double>(passed[t]) / judged[t] : 0.0;
            if (judged[t]) frontier_.update(modules[t].apis, passed[t], judged[t]);
        }
    }

    const double probe_s = lap();

    // Proposer rewards (6.2), group-relative per API set, and one update.
    for (size_t i = 0; i < proposals.size(); ++i)
        if (tasks[i] && tasks[i]->valid) outcomes[i].pass_rate = pass_rate[tasks[i]->id];
    auto rewards = proposer_rewards(outcomes, pc.target, pc.lambda_rep);
    std::vector<RolloutRecord> out;
    for (size_t s = 0; s < sets.size(); ++s) {
        std::vector<double> group;
        for (int j = 0; j < Gp; ++j) group.push_back(rewards[s * static_cast<size_t>(Gp) + static_cast<size_t>(j)]);
        bool flat = false;
        auto adv = group_advantages(group, pc.advantage, 1e-6, &flat);
        for (int j = 0; j < Gp; ++j) {
            const size_t i = s * static_cast<size_t>(Gp) + static_cast<size_t>(j);
            Rollout& r = proposals[i];
            r.reward = rewards[i];
            r.advantage = adv[static_cast<size_t>(j)];
            r.in_loss = !flat && !r.completion_ids.empty() && !(cfg_.coder_phase.mask_overlong && !r.stopped);
            json v = {{"parsed", outcomes[i].parsed},
                      {"valid", outcomes[i].valid},
                      {"apis", sets[s].apis},
                      {"level", sets[s].level}};
            if (tasks[i]) {
                v["task_id"] = tasks[i]->id;
                v["task_hash"] = tasks[i]->hash;
                v["reason"] = tasks[i]->reason;
                if (tasks[i]->valid) v["pass_rate"] = outcomes[i].pass_rate;
            }
            out.push_back(record(it, "proposer", set_keys[s], j, prompts[s], r, v, version("proposer", it)));
        }
    }
    append(out);
    const auto [set_begin, set_end] = ranks_.block(sets.size());
    update_policy(proposer_->model(), proposer_->optimizer(), prompts, rows_of(proposals, set_begin, set_end), pcfg,
                  pst, ranks_.collective());

    std::vector<StoredTask> band;
    for (const auto& t : modules)
        if (in_frontier_band(pass_rate[t.id], pc.band_low, pc.band_high)) band.push_back(t);
    int64_t parsed = 0, valid = 0;
    for (const auto& o : outcomes) parsed += o.parsed, valid += o.valid;
    std::vector<double> rates;
    for (const auto& [id, p] : pass_rate) rates.push_back(p);
    m["propose"] = {{"proposals", proposals.size()},
                    {"parsed", parsed},
                    {"valid", valid},
                    {"valid_from_proposer", from_proposer},
                    {"symbolic", symbolic},
                    {"symbolic_tried", symbolic_tried},
                    {"symbolic_rounds", symbolic_rounds},
                    {"modules_measured", modules.size()},
                    {"mean_pass_rate", mean_of(rates)},
                    {"in_band", band.size()},
                    {"band_occupancy", modules.empty() ? 0.0 : static_cast<double>(band.size()) / modules.size()},
                    {"mean_reward", mean_of(rewards)},
                    {"updated", pst.updated},
                    {"loss", pst.loss},
                    {"grad_norm", pst.grad_norm},
                    {"replayed", replayed},
                    {"sample_s", sample_s},
                    {"validate_s", validate_s},
                    {"probe_s", probe_s},
                    {"update_s", lap()}};
    return band;
}

}  // namespace kz
