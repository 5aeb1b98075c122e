#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>

#include "prompts/coder_prompt.h"
#include "train/data_parallel.h"
#include "train/rollout_log.h"
#include "train/seeds.h"
#include "train/sft.h"
#include "train/trainer_impl.h"
#include "train/verifier_judge.h"

namespace kz {

using json = nlohmann::json;

namespace {

int64_t count_tokens(const std::vector<Rollout>& rs) {
    int64_t n = 0;
    for (const auto& r : rs) n += static_cast<int64_t>(r.completion_ids.size());
    return n;
}

}  // namespace

Trainer::Trainer(const TrainConfig& cfg, const TrainOptions& opts, const std::atomic<bool>& stop, Collective* dp)
    : cfg_(cfg),
      stop_(stop),
      ranks_(dp),
      run_path_(opts.out_dir),
      last_iteration_(opts.iterations.value_or(cfg.iterations)),
      deadline_(opts.deadline),
      catalog_(ApiCatalog::load(ApiCatalog::path_or_default(cfg.catalog))),
      excluded_sets_(cfg.propose.exclude_sets.empty() ? std::set<std::string>{}
                                                      : read_api_sets(cfg.propose.exclude_sets)),
      format_(coder_format(cfg.backend, cfg.format)),
      prompt_(CoderPrompt::load(format_)),
      frontier_([&] {
          FrontierOptions fo;
          fo.target = cfg.propose.target;
          return fo;
      }()),
      rewards_(cfg.coder_phase.reward) {
    if (!ranks_.leader()) set_train_output(false);
    if (cfg.warm_start) prepare_deterministic_sft(cfg.sft);  // before the policies and the verifier's threads
    // The leader creates (or opens) the run directory and writes the models the others load.
    std::string coder_dir, proposer_dir;
    const bool same_base = cfg.proposer.model == cfg.coder.model && cfg.proposer.tokenizer == cfg.coder.tokenizer;
    auto model_dirs = [&] {
        coder_dir = materialise_model(cfg.coder, run_path_ + "/models/coder-base", cfg.seed);
        if (cfg.propose.enabled)
            proposer_dir = same_base
                               ? coder_dir
                               : materialise_model(cfg.proposer, run_path_ + "/models/proposer-base", cfg.seed + 1);
    };
    if (ranks_.leader()) {
        run_ = std::make_unique<RunDir>(run_path_, cfg.to_json(), opts.resume, TrainConfig{}.to_json());
        records_ = std::make_unique<RecordIndex>(run_->rollouts_path());
        store_ = std::make_unique<TaskStore>(cfg.task_store.empty() ? run_->file("tasks.sqlite") : cfg.task_store);
        std::fprintf(stderr, "[train] run %s in %s%s\n", run_->run_id().c_str(), run_->path().c_str(),
                     ranks_.world() > 1 ? (" on " + std::to_string(ranks_.world()) + " ranks").c_str() : "");
        model_dirs();
    }
    ranks_.barrier("setup", kCollectiveTimeout);
    if (!ranks_.leader()) model_dirs();  // now written: returns the leader's directories
    coder_ = std::make_unique<Policy>("coder", cfg.coder, coder_dir, cfg.device, derive_seed(cfg.seed, 0, 100));
    if (cfg.propose.enabled)
        proposer_ =
            std::make_unique<Policy>("proposer", cfg.proposer, proposer_dir, cfg.device, derive_seed(cfg.seed, 0, 101));
    const TrainValidation validation = train_validation(cfg, dp != nullptr);
    PipelineOptions po;
    po.validation = validation.options;
    VerifyOptions vo;
    vo.device = cfg.verify_device;
    vo.trials = cfg.verifier.trials;
    vo.timing_iters = cfg.verifier.timing_iters;
    vo.strict = cfg.verifier.policy == "strict";
    vo.timeout_s = cfg.verifier.timeout_s;
    vo.lanes = cfg.verifier.workers;
    vo.compile_workers = cfg.verifier.workers;
    vo.reserved_device_bytes = validation.reserved_device_bytes;
    verifier_ = make_verify_service(cfg.verifier.url, vo);
    verifier_->start();
    po.validation.device_budget = verifier_->memory_budget();
    if (ranks_.leader())
        pipeline_ = std::make_unique<TaskPipeline>(catalog_, *store_, po);
    else
        validator_ = std::make_unique<TaskValidator>(catalog_, po.validation);
    validation_ =
        std::make_unique<ModuleValidation>(ranks_, pipeline_.get(), validator_.get(), cfg.propose.validation_workers);
}

TrainOutcome Trainer::run() {
    int64_t first = 1;
    std::optional<int64_t> mine = ranks_.leader() ? run_->latest_checkpoint() : std::nullopt;
    json latest = ranks_.from_leader(mine ? json(*mine) : json(nullptr));
    if (!latest.is_null()) {
        restore(latest.get<int64_t>());
        first = latest.get<int64_t>() + 1;
        json spent = {0, 0};
        if (ranks_.leader())
            for (const json& m : run_->metrics())
                if (m.value("iteration", int64_t{0}) < first)
                    spent = {spent[0].get<int64_t>() + m.value("verified", int64_t{0}),
                             spent[1].get<int64_t>() + m.value("tokens_sampled", int64_t{0})};
        spent = ranks_.from_leader(spent);
        spent_verified_ = spent[0].get<int64_t>();
        spent_tokens_ = spent[1].get<int64_t>();
    }
    ranks_.check_same_weights(*coder_);
    if (proposer_) ranks_.check_same_weights(*proposer_);
    TrainOutcome out{first - 1, false};
    for (int64_t it = first; it <= last_iteration_ && !budget_spent() && !ranks_.stopping(stop_); ++it) {
        if ((out.stopped_by_deadline = past_deadline(it))) break;
        if (!iteration(it)) break;
        out.last_iteration = it;
    }
    if (budget_spent() && ranks_.leader())
        std::fprintf(stderr, "[train] budget spent after iteration %lld: %lld verifications, %lld tokens sampled\n",
                     static_cast<long long>(out.last_iteration), static_cast<long long>(spent_verified_),
                     static_cast<long long>(spent_tokens_));
    return out;
}

// The leader decides from the recorded iterations, every rank follows.
bool Trainer::past_deadline(int64_t it) {
    if (!deadline_) return false;
    json past = false;
    if (ranks_.leader()) {
        const std::vector<json> finished = run_->metrics();
        // The budget makes an iteration the last, evaluated, where it may spend what is left: as much
        // as the most any recorded iteration spent.
        int64_t verified = 0, tokens = 0;
        for (const json& m : finished) {
            verified = std::max(verified, m.value("verified", int64_t{0}));
            tokens = std::max(tokens, m.value("tokens_sampled", int64_t{0}));
        }
        const bool evaluates = evaluated(it, budget_spent(verified, tokens));
        const double estimate = iteration_estimate_s(finished, evaluates);
        const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
        if (now + estimate > *deadline_) {
            std::fprintf(
                stderr, "[train] iteration %lld not started: it would take ~%.0f s%s, the deadline is %.0f s away\n",
                static_cast<long long>(it), estimate, evaluates ? " with its evaluation" : "", *deadline_ - now);
            past = true;
        }
    }
    return ranks_.from_leader(past).get<bool>();
}

double iteration_estimate_s(const std::vector<json>& finished, bool evaluates) {
    double iteration = 0, eval = -1;
    for (size_t i = 0; i < finished.size(); ++i) {
        const json stages = finished[i].value("stage_s", json::object());
        double total = 0, its_eval = 0;
        for (const auto& [stage, secs] : stages.items()) {
            // warm_start is iteration 1's alone.
            if (!secs.is_number() || stage == "warm_start") continue;
            (stage == "eval" ? its_eval : total) += secs.get<double>();
        }
        if (stages.contains("eval")) eval = std::max(eval, its_eval);
        if (i + 4 >= finished.size()) iteration = std::max(iteration, total);
    }
    if (!evaluates) return iteration;
    return iteration + (eval >= 0 ? eval : iteration);
}

bool Trainer::budget_spent(int64_t more_verified, int64_t more_tokens) const {
    return (cfg_.verification_budget > 0 && spent_verified_ + more_verified >= cfg_.verification_budget) ||
           (cfg_.token_budget > 0 && spent_tokens_ + more_tokens >= cfg_.token_budget);
}

bool Trainer::evaluated(int64_t it, bool spends_budget) const {
    return !cfg_.eval.tasks.empty() && (it % cfg_.eval.every == 0 || it == last_iteration_ || spends_budget);
}

// One iteration; false when stopped part-way (nothing of it is checkpointed).
bool Trainer::iteration(int64_t it) {
    timer_.reset(it);
    json m = {{"iteration", it}};
    if (it == 1 && cfg_.warm_start) timer_.run("warm_start", [&] { warm_start(m); });
    if (ranks_.stopping(stop_)) return false;
    std::vector<StoredTask> band;
    if (cfg_.propose.enabled) band = timer_.run("propose", [&] { return propose(it, m); });
    if (ranks_.stopping(stop_)) return false;
    auto pool = timer_.run("refresh_pool", [&] { return refresh_pool(it, band, m); });
    timer_.run("coder", [&] { coder_phase(it, pool, m); });
    if (ranks_.stopping(stop_)) return false;
    // The same updates on the same weights: a rank that drifted is a bug, stopped here.
    ranks_.check_same_weights(*coder_);
    if (proposer_) ranks_.check_same_weights(*proposer_);
    throughput(m);
    spent_verified_ += m["verified"].get<int64_t>();
    spent_tokens_ += m["tokens_sampled"].get<int64_t>();
    if (evaluated(it, budget_spent())) {
        if (ranks_.leader()) timer_.run("eval", [&] { evaluate(it, m); });
        ranks_.barrier("eval-" + std::to_string(it), kEvalTimeout);
    }
    if (ranks_.stopping(stop_)) return false;
    if (ranks_.leader()) {
        timer_.run("checkpoint", [&] { checkpoint(it, m); });
        m["stage_s"] = timer_.to_json();
        // The metrics travel in the checkpoint too (written before this line), so that a crash
        // between the two still records them on resume.
        run_->record_metrics(it, m);
        frontier_.save(*store_);
        std::fprintf(stderr, "[train] iteration %lld done\n", static_cast<long long>(it));
    }
    return true;
}

// Stage metrics every rank contributes to: sampled tokens, verifications, samples per second.
void Trainer::throughput(json& m) {
    double sampling_s = 0;
    const json stages = timer_.to_json();
    for (auto& [stage, secs] : stages.items())
        if (stage == "propose" || stage == "refresh_pool" || stage == "coder") sampling_s += secs.get<double>();
    const double rate = verify_s_ > 0 ? 60.0 * static_cast<double>(verified_) / verify_s_ : 0.0;
    m["world_size"] = ranks_.world();
    m["samples"] = samples_;
    m["samples_per_s"] = sampling_s > 0 ? static_cast<double>(samples_) / sampling_s : 0.0;
    m["tokens_sampled"] = static_cast<int64_t>(ranks_.sum(static_cast<double>(tokens_)));
    m["verified"] = static_cast<int64_t>(ranks_.sum(static_cast<double>(verified_)));
    m["verify_s"] = verify_s_;
    // Every rank's verifier works at once: their rates add up.
    m["verifier_jobs_per_min"] = ranks_.sum(rate);
    tokens_ = verified_ = samples_ = 0;
    verify_s_ = 0;
}

CoderStepConfig Trainer::coder_cfg(int G, int64_t max_new_tokens, double temperature, double top_p,
                                   uint64_t seed) const {
    CoderStepConfig c;
    c.group_size = G;
    c.max_new_tokens = max_new_tokens;
    c.temperature = temperature;
    c.top_p = top_p;
    c.seed = seed;
    c.loss = cfg_.coder_phase.loss;
    c.mask_overlong = cfg_.coder_phase.mask_overlong;
    c.micro_batch = cfg_.coder_phase.micro_batch;
    return c;
}

RolloutRecord Trainer::record(int64_t it, const std::string& role, const std::string& hash, int sample,
                              const std::vector<int64_t>& prompt, const Rollout& r, json verdict,
                              const std::string& version) const {
    RolloutRecord rec;
    rec.run_id = run_ ? run_->run_id() : "";
    rec.iteration = it;
    rec.role = role;
    rec.task_hash = hash;
    rec.sample = sample;
    rec.prompt_tokens = prompt;
    rec.completion_tokens = r.completion_ids;
    rec.completion = r.text;
    rec.logprobs = r.sampler_logprobs;
    if (verdict.is_object()) verdict["stopped"] = r.stopped;
    rec.verdict = std::move(verdict);
    rec.reward = r.reward;
    rec.advantage = r.advantage;
    rec.model_version = version;
    return rec;
}

// The leader appends the records not already in the log (a replayed step's are), in one durable
// write each.
void Trainer::append(const std::vector<RolloutRecord>& recs) {
    if (!ranks_.leader()) return;
    std::vector<RolloutRecord> fresh;
    for (const auto& r : recs)
        if (!records_->has(r)) fresh.push_back(r);
    append_rollouts(run_->rollouts_path(), fresh);
    for (const auto& r : fresh) records_->add(r);
}

// A step's rollouts (G per prompt, task-major), the same on every rank: read back from its
// records when the leader's log holds all of them (a step of an iteration run again after a
// crash), else sampled in blocks across the ranks and, with `judged_tasks` (indexed as the
// prompts), verified by each rank's verifier, then gathered.
JudgedStep Trainer::sample_step(int64_t it, const std::string& role, const std::vector<std::string>& keys,
                                int first_sample, Policy& policy, const std::vector<std::vector<int64_t>>& prompts,
                                const CoderStepConfig& c, CoderStepStats& st,
                                const std::vector<StoredTask>* judged_tasks) {
    const bool judged = judged_tasks != nullptr;
    JudgedStep out;
    if (ranks_.leader())
        if (auto recs = records_->complete(it, role, keys, first_sample, c.group_size); !recs.empty()) {
            out.rollouts = rollouts_from(recs, c.group_size);
            if (judged)
                for (const auto* r : recs) out.verdicts.push_back(r->verdict);
            out.replayed = true;
        }
    if (ranks_.collective()) {
        json replay = ranks_.from_leader(out.replayed ? serialise_step(out, judged) : json(nullptr));
        if (!replay.is_null()) {
            if (!ranks_.leader()) deserialise_step(replay, judged, out);
            out.replayed = true;
        }
    }
    if (out.replayed) {
        // The interrupted run that sampled and verified this step recorded none of it in metrics
        // (its iteration never finished): counted here, once, so that a resumed run's metrics and
        // budgets hold what the run spent. The leader's share is the whole step's (ranks_.sum adds).
        samples_ += static_cast<int64_t>(out.rollouts.size());
        if (ranks_.leader()) {
            tokens_ += count_tokens(out.rollouts);
            if (judged)
                for (const auto& r : out.rollouts) verified_ += extract_candidate(r.text).ok() ? 1 : 0;
        }
        return out;
    }

    const auto [begin, end] = ranks_.block(prompts.size());
    JudgedStep mine;
    if (begin < end) {
        CoderStepConfig local = c;
        if (ranks_.rank() > 0) local.seed = derive_seed(c.seed, ranks_.rank(), kRankStream);
        Progress bar(
            role + ": sampling " + std::to_string((end - begin) * static_cast<size_t>(c.group_size)) + " completions",
            1);
        mine.rollouts = sample_rollouts(
            policy.model(), policy.tokenizer(),
            {prompts.begin() + static_cast<std::ptrdiff_t>(begin), prompts.begin() + static_cast<std::ptrdiff_t>(end)},
            policy.stops(), local, &st);
        for (auto& r : mine.rollouts) r.task += begin;
        tokens_ += count_tokens(mine.rollouts);
        bar.advance();
        if (judged) judge(*judged_tasks, mine);
    }
    if (!ranks_.collective())
        out = std::move(mine);
    else  // every rank rebuilds the whole step (its own block included) from the same bytes
        for (const auto& part : ranks_.gather(serialise_step(mine, judged))) deserialise_step(part, judged, out);
    samples_ += static_cast<int64_t>(out.rollouts.size());
    return out;
}

// Verifies this rank's rollouts of `tasks`.
void Trainer::judge(const std::vector<StoredTask>& tasks, JudgedStep& j) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<std::string> sources;
    for (const auto& t : tasks) sources.push_back(t.source);
    VerifierJudge judge(*verifier_, sources, backend_of(format_), cfg_.verifier.in_flight);
    std::vector<std::pair<size_t, std::string>> items;
    for (const auto& r : j.rollouts) items.emplace_back(r.task, r.text);
    auto outcomes = judge(items);
    for (size_t i = 0; i < outcomes.size(); ++i) {
        j.rollouts[i].outcome = outcomes[i];
        j.verdicts.push_back(judge.verdicts()[i].to_json());
    }
    verified_ += static_cast<int64_t>(judge.verified());
    verify_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void Trainer::add_attempts(const std::vector<StoredTask>& tasks, const JudgedStep& j, const std::string& who) {
    if (!ranks_.leader()) return;
    for (size_t i = 0; i < j.rollouts.size(); ++i) {
        const auto& r = j.rollouts[i];
        if (r.outcome.infra_error) continue;
        AttemptRecord a;
        a.task_id = tasks[r.task].id;
        a.model_version = who;
        a.backend = backend_of(format_);
        a.status = j.verdicts[i].value("status", std::string("unknown"));
        a.correct = r.outcome.correct;
        a.speedup = r.outcome.speedup_eager;
        store_->add_attempt(a);
    }
}

TrainOutcome run_training(const TrainConfig& cfg, const TrainOptions& opts, const std::atomic<bool>& stop) {
    cfg.validate();
    std::unique_ptr<Collective> dp;
    if (auto env = DistEnv::from_environment(); env && env->world > 1) {
        const bool gpu = cfg.device.rfind("cuda", 0) == 0 || cfg.verify_device.rfind("cuda", 0) == 0;
        for (const auto& [key, dev] : {std::pair{"device", cfg.device}, std::pair{"verify_device", cfg.verify_device}})
            if (dev != "cpu" && dev != "cuda")
                throw std::invalid_argument(std::string(key) + " = \"" + dev + "\" with " + std::to_string(env->world) +
                                            " ranks: each rank uses its own GPU; give \"cuda\" or \"cpu\"");
        if (gpu) bind_local_device(*env);
        dp = make_process_group(*env, cfg.device == "cuda" ? "nccl" : "gloo", kCollectiveTimeout);
    }
    Trainer t(cfg, opts, stop, dp.get());
    return t.run();
}

}  // namespace kz
