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
#include <stdexcept>
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

// One propose stage's working state, filled in by its parts in order.
struct Trainer::ProposeRound {
    // draw_api_sets
    std::vector<ApiSet> sets;
    std::vector<std::vector<int64_t>> prompts;  // the Proposer's, one per set
    std::vector<std::string> set_keys;          // the records' task keys, one per set
    CoderStepConfig pcfg;
    CoderStepStats pst;
    // the Proposer's samples, G per set (set-major)
    JudgedStep sampled;
    // store_proposals: per proposal
    std::vector<ProposalOutcome> outcomes;
    std::vector<std::optional<TaskRecord>> tasks;
    // store_proposals, fill_with_symbolic: the modules the Coder is measured on
    std::vector<StoredTask> modules;
    std::set<int64_t> seen;
    int64_t from_proposer = 0, symbolic = 0, symbolic_tried = 0, symbolic_rounds = 0;
    // probe_coder: p-hat by task id
    std::map<int64_t, double> pass_rate;
    // update_proposer
    std::vector<double> rewards;
};

std::vector<StoredTask> Trainer::propose(int64_t it, json& m) {
    const auto& pc = cfg_.propose;
    ProposeRound r;
    auto t0 = std::chrono::steady_clock::now();
    auto lap = [&t0] {  // seconds since the last lap: the stage's parts, in the metrics
        auto now = std::chrono::steady_clock::now();
        return std::chrono::duration<double>(now - std::exchange(t0, now)).count();
    };
    draw_api_sets(it, r);
    r.sampled = sample_step(it, "proposer", r.set_keys, 0, *proposer_, r.prompts, r.pcfg, r.pst, nullptr);
    const double sample_s = lap();
    store_proposals(it, r);
    fill_with_symbolic(it, r);
    const double validate_s = lap();
    probe_coder(it, r);
    const double probe_s = lap();
    update_proposer(it, r);

    std::vector<StoredTask> band;
    for (const auto& t : r.modules)
        if (in_frontier_band(r.pass_rate[t.id], pc.band_low, pc.band_high)) band.push_back(t);
    int64_t parsed = 0, valid = 0;
    for (const auto& o : r.outcomes) parsed += o.parsed, valid += o.valid;
    std::vector<double> rates;
    for (const auto& [id, p] : r.pass_rate) rates.push_back(p);
    m["propose"] = {{"proposals", r.sampled.rollouts.size()},
                    {"parsed", parsed},
                    {"valid", valid},
                    {"valid_from_proposer", r.from_proposer},
                    {"symbolic", r.symbolic},
                    {"symbolic_tried", r.symbolic_tried},
                    {"symbolic_rounds", r.symbolic_rounds},
                    {"modules_measured", r.modules.size()},
                    {"mean_pass_rate", mean_of(rates)},
                    {"in_band", band.size()},
                    {"band_occupancy", r.modules.empty() ? 0.0 : static_cast<double>(band.size()) / r.modules.size()},
                    {"mean_reward", mean_of(r.rewards)},
                    {"updated", r.pst.updated},
                    {"loss", r.pst.loss},
                    {"grad_norm", r.pst.grad_norm},
                    {"replayed", r.sampled.replayed},
                    {"sample_s", sample_s},
                    {"validate_s", validate_s},
                    {"probe_s", probe_s},
                    {"update_s", lap()}};
    return band;
}

// API sets from the frontier (levels in turn) and the Proposer's prompt for each.
void Trainer::draw_api_sets(int64_t it, ProposeRound& r) {
    const auto& pc = cfg_.propose;
    std::mt19937_64 rng(derive_seed(cfg_.seed, it, kProposeStage));
    for (int s = 0; s < pc.api_sets; ++s) {
        int level = pc.levels[static_cast<size_t>(s) % pc.levels.size()];
        // An excluded set (held out for evaluation) is drawn again; a frontier that offers nothing
        // else is a configuration error, not a silent leak.
        ApiSet set = frontier_.draw(catalog_, level, rng);
        for (int tries = 1; excluded_sets_.count(api_set_key(set.apis)); ++tries) {
            if (tries == 1000)
                throw std::runtime_error("propose.exclude_sets excludes every API set the frontier drew (1000 draws)");
            set = frontier_.draw(catalog_, level, rng);
        }
        r.sets.push_back(std::move(set));
        r.prompts.push_back(proposer_->encode_chat(proposer_prompt(catalog_, r.sets.back().apis)));
        std::string joined;
        for (const auto& a : r.sets.back().apis) joined += a + ",";
        r.set_keys.push_back("set" + std::to_string(s) + "-" + short_hash(joined + std::to_string(level)));
    }
    r.pcfg = coder_cfg(pc.samples_per_set, pc.max_new_tokens, pc.temperature, pc.top_p,
                       derive_seed(cfg_.seed, it, kProposeStage, 1));
}

// The proposals parsed, validated and stored; the valid ones are the first modules to measure.
void Trainer::store_proposals(int64_t it, ProposeRound& r) {
    const std::vector<Rollout>& proposals = r.sampled.rollouts;
    r.outcomes.assign(proposals.size(), ProposalOutcome{});
    r.tasks.assign(proposals.size(), std::nullopt);
    std::vector<std::string> parsed_sources;
    std::vector<size_t> parsed_index;
    std::vector<Candidate> cands;
    for (size_t i = 0; i < proposals.size(); ++i) {
        ParsedProposal pp = parse_proposal(proposals[i].text);
        r.outcomes[i].parsed = pp.ok;
        if (!pp.ok) continue;
        const ApiSet& set = r.sets[proposals[i].task];
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
            r.tasks[parsed_index[k]] = recs[k];
            r.outcomes[parsed_index[k]].valid = recs[k].valid;
        }
        bar.advance();
    }
    auto clusters = near_duplicate_clusters(parsed_sources);
    for (size_t k = 0; k < parsed_index.size(); ++k) r.outcomes[parsed_index[k]].cluster = clusters[k];
    for (const auto& t : r.tasks)
        if (t && t->valid && r.seen.insert(t->id).second) r.modules.push_back(stored(*t));
    r.from_proposer = static_cast<int64_t>(r.modules.size());
}

// Symbolic modules when the proposals gave fewer than min_valid valid ones.
void Trainer::fill_with_symbolic(int64_t it, ProposeRound& r) {
    const auto& pc = cfg_.propose;
    if (static_cast<int>(r.modules.size()) >= pc.min_valid || r.sets.empty()) return;
    const SizeProfile sizes = pc.sizes == "small" ? SizeProfile::small : SizeProfile::typical;
    // Candidate k: API set k (round robin), from a seed of its own, so that any rank can make any
    // candidate. Validated until what is missing came out valid (the workers of every rank busy
    // meanwhile), again if the store's novelty checks turned some down, at most 4 x min_valid
    // candidates in all.
    const int64_t cap = 4 * static_cast<int64_t>(pc.min_valid);
    while (static_cast<int>(r.modules.size()) < pc.min_valid && r.symbolic_tried < cap) {
        const int64_t first = r.symbolic_tried;
        auto make = [&](int64_t k) {
            const ApiSet& set = r.sets[static_cast<size_t>(first + k) % r.sets.size()];
            std::mt19937_64 rng(derive_seed(cfg_.seed, it, kSymbolicStage, static_cast<uint64_t>(first + k)));
            GeneratedTask g = generate_task(catalog_, set, sizes, rng);
            return Candidate{g.source, g.apis, set.level};
        };
        auto recs =
            validation_->validate_and_store(cap - first, make, pc.min_valid - static_cast<int64_t>(r.modules.size()),
                                            "symbolic", it, leader_submission(it));
        r.symbolic_tried += static_cast<int64_t>(recs.size());
        ++r.symbolic_rounds;
        for (const TaskRecord& t : recs)
            if (t.valid && static_cast<int>(r.modules.size()) < pc.min_valid && r.seen.insert(t.id).second) {
                r.modules.push_back(stored(t));
                ++r.symbolic;
            }
        if (recs.empty()) break;
    }
}

// p-hat of each module: G verified Coder samples ("probe" records); the frontier learns from each.
void Trainer::probe_coder(int64_t it, ProposeRound& r) {
    const std::vector<StoredTask>& modules = r.modules;
    if (modules.empty()) return;
    std::vector<std::vector<int64_t>> cprompts;
    for (const auto& t : modules) cprompts.push_back(coder_->encode_chat(prompt_.messages(t.source)));
    CoderStepConfig ccfg =
        coder_cfg(cfg_.propose.probe_samples, cfg_.coder_phase.max_new_tokens, cfg_.coder_phase.temperature,
                  cfg_.coder_phase.top_p, derive_seed(cfg_.seed, it, kProbeStage));
    CoderStepStats cst;
    Progress bar("propose: measuring the Coder on " + std::to_string(modules.size()) + " modules", 1);
    JudgedStep j = sample_step(it, "probe", hashes(modules), 0, *coder_, cprompts, ccfg, cst, &modules);
    bar.advance();
    std::vector<RolloutRecord> out;
    std::vector<int> passed(modules.size(), 0), judged(modules.size(), 0);
    for (size_t i = 0; i < j.rollouts.size(); ++i) {
        Rollout& ro = j.rollouts[i];
        ro.reward = ro.outcome.correct ? 1.0 : 0.0;
        if (!ro.outcome.infra_error) ++judged[ro.task], passed[ro.task] += ro.outcome.correct;
        out.push_back(record(it, "probe", modules[ro.task].hash, ro.sample, cprompts[ro.task], ro, j.verdicts[i],
                             version("coder", it)));
    }
    append(out);
    if (!j.replayed) add_attempts(modules, j, "probe");
    for (size_t t = 0; t < modules.size(); ++t) {
        r.pass_rate[modules[t].id] = judged[t] ? static_cast<double>(passed[t]) / judged[t] : 0.0;
        if (judged[t]) frontier_.update(modules[t].apis, passed[t], judged[t]);
    }
}

// Proposer rewards (6.2), group-relative per API set, the "proposer" records, and one update.
void Trainer::update_proposer(int64_t it, ProposeRound& r) {
    const auto& pc = cfg_.propose;
    std::vector<Rollout>& proposals = r.sampled.rollouts;
    for (size_t i = 0; i < proposals.size(); ++i)
        if (r.tasks[i] && r.tasks[i]->valid) r.outcomes[i].pass_rate = r.pass_rate[r.tasks[i]->id];
    r.rewards = proposer_rewards(r.outcomes, pc.target, pc.lambda_rep);
    const int Gp = pc.samples_per_set;
    std::vector<RolloutRecord> out;
    for (size_t s = 0; s < r.sets.size(); ++s) {
        std::vector<double> group;
        for (int j = 0; j < Gp; ++j) group.push_back(r.rewards[s * static_cast<size_t>(Gp) + static_cast<size_t>(j)]);
        bool flat = false;
        auto adv = group_advantages(group, pc.advantage, 1e-6, &flat);
        for (int j = 0; j < Gp; ++j) {
            const size_t i = s * static_cast<size_t>(Gp) + static_cast<size_t>(j);
            Rollout& ro = proposals[i];
            ro.reward = r.rewards[i];
            ro.advantage = adv[static_cast<size_t>(j)];
            ro.in_loss = !flat && !ro.completion_ids.empty() && !(cfg_.coder_phase.mask_overlong && !ro.stopped);
            json v = {{"parsed", r.outcomes[i].parsed},
                      {"valid", r.outcomes[i].valid},
                      {"apis", r.sets[s].apis},
                      {"level", r.sets[s].level}};
            if (r.tasks[i]) {
                v["task_id"] = r.tasks[i]->id;
                v["task_hash"] = r.tasks[i]->hash;
                v["reason"] = r.tasks[i]->reason;
                if (r.tasks[i]->valid) v["pass_rate"] = r.outcomes[i].pass_rate;
            }
            out.push_back(record(it, "proposer", r.set_keys[s], j, r.prompts[s], ro, v, version("proposer", it)));
        }
    }
    append(out);
    const auto [set_begin, set_end] = ranks_.block(r.sets.size());
    update_policy(proposer_->model(), proposer_->optimizer(), r.prompts, rows_of(proposals, set_begin, set_end), r.pcfg,
                  r.pst, ranks_.collective());
}

}  // namespace kz
