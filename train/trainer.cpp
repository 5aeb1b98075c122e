#include "train/trainer.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>

#include "bench/bench_run.h"
#include "prompts/coder_prompt.h"
#include "common/files.h"
#include "common/hash.h"
#include "tasks/api_catalog.h"
#include "tasks/frontier.h"
#include "tasks/pipeline.h"
#include "tasks/proposer.h"
#include "tasks/symbolic.h"
#include "tasks/task_store.h"
#include "train/coder_step.h"
#include "train/data_parallel.h"
#include "train/policy.h"
#include "train/rollout_log.h"
#include "train/run_dir.h"
#include "train/sft.h"
#include "train/verifier_judge.h"
#include "verify/verifier.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// splitmix64 over (seed, iteration, stage, step): every random choice of an iteration is a function
// of these alone, so an iteration run again after a crash makes the same choices.
uint64_t derive_seed(uint64_t seed, int64_t iteration, uint64_t stage, uint64_t step = 0) {
    uint64_t z = seed ^ (static_cast<uint64_t>(iteration) * 0x9E3779B97F4A7C15ULL) ^ (stage << 48) ^ (step << 32);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}
enum StageId : uint64_t {
    kProposeStage = 1,
    kSymbolicStage,
    kProbeStage,
    kPoolStage,
    kCoderStage,
    kEvalStage,
    kRankStream
};

// How long ranks wait for each other: a collective (one rank still sampling or validating) and the
// barrier behind rank 0's evaluation, which may take hours on a real model.
constexpr std::chrono::seconds kCollectiveTimeout{1800}, kEvalTimeout{24 * 3600};

std::string short_hash(const std::string& s) { return sha256_hex(s).substr(0, 16); }

// The rollout records of this run, by key: what a re-run iteration replays instead of sampling again.
class RecordIndex {
public:
    explicit RecordIndex(const std::string& path) {
        int skipped = 0;
        for (auto& r : read_rollouts(path, &skipped)) by_key_.emplace(r.key(), std::move(r));
        if (skipped) std::fprintf(stderr, "[train] %d unreadable rollout record line(s) skipped\n", skipped);
    }
    // The records of (iteration, role, hashes[i], first_sample + j) for every i, j < G, in that order;
    // empty unless all are present.
    std::vector<const RolloutRecord*> complete(int64_t it, const std::string& role,
                                               const std::vector<std::string>& hashes, int first_sample, int G) const {
        std::vector<const RolloutRecord*> out;
        for (const auto& h : hashes)
            for (int j = 0; j < G; ++j) {
                auto f = by_key_.find({it, role, h, first_sample + j});
                if (f == by_key_.end()) return {};
                out.push_back(&f->second);
            }
        return out;
    }
    bool has(const RolloutRecord& r) const { return by_key_.count(r.key()) > 0; }
    void add(const RolloutRecord& r) { by_key_.emplace(r.key(), r); }

private:
    std::map<std::tuple<int64_t, std::string, std::string, int>, RolloutRecord> by_key_;
};

// Rollouts rebuilt from records (a replayed step): tokens, text, log-probs and the judged outcome.
std::vector<Rollout> rollouts_from(const std::vector<const RolloutRecord*>& recs, int G) {
    std::vector<Rollout> out(recs.size());
    for (size_t i = 0; i < recs.size(); ++i) {
        Rollout& r = out[i];
        r.task = i / static_cast<size_t>(G);
        r.sample = static_cast<int>(i % static_cast<size_t>(G));
        r.completion_ids = recs[i]->completion_tokens;
        r.sampler_logprobs = recs[i]->logprobs;
        r.text = recs[i]->completion;
        r.stopped = recs[i]->verdict.is_object() ? recs[i]->verdict.value("stopped", true) : true;
        r.outcome = outcome_of_json(recs[i]->verdict);
    }
    return out;
}

double mean_of(const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

struct StoredTask {
    int64_t id = 0;
    std::string hash, source;
    std::vector<std::string> apis;
};

StoredTask stored(const TaskRecord& t) { return {t.id, t.hash, t.source, t.apis}; }

json to_json(const StoredTask& t) { return {{"id", t.id}, {"hash", t.hash}, {"source", t.source}, {"apis", t.apis}}; }
StoredTask stored_of(const json& j) {
    return {j.at("id").get<int64_t>(), j.at("hash").get<std::string>(), j.at("source").get<std::string>(),
            j.at("apis").get<std::vector<std::string>>()};
}
// What the trainer reads of a stored task record, for the ranks that do not own the store.
json to_json(const TaskRecord& t) {
    json j = to_json(stored(t));
    j["valid"] = t.valid;
    j["reason"] = t.reason;
    return j;
}
TaskRecord task_of(const json& j) {
    TaskRecord t;
    StoredTask s = stored_of(j);
    t.id = s.id, t.hash = s.hash, t.source = s.source, t.apis = s.apis;
    t.valid = j.at("valid").get<bool>();
    t.reason = j.at("reason").get<std::string>();
    return t;
}

// A module to validate and store.
struct Candidate {
    std::string source;
    std::vector<std::string> apis;
    int level = 0;
};

// A rank's rows of a step: the rollouts of tasks [begin, end).
std::vector<Rollout> rows_of(const std::vector<Rollout>& all, size_t begin, size_t end) {
    std::vector<Rollout> out;
    for (const auto& r : all)
        if (r.task >= begin && r.task < end) out.push_back(r);
    return out;
}

// Data parallelism (train/data_parallel.h; design section 9). Every rank runs the same iteration: the
// same random draws, so the same API sets, pool and task order. Sampling and verification are split in
// contiguous blocks of a step's tasks (rank r takes block r), module validation is shared out through
// a counter in the store (its times are uneven); the results are
// gathered so that every rank holds the whole step's rollouts and verdicts and computes the same
// rewards, advantages and frontier updates; each rank trains on its own block's rows (gradients
// all-reduced, one identical optimizer step). Rank 0 leads: it alone owns the run directory (records,
// metrics, checkpoints), the task store and the evaluation, and decides what is replayed; the other
// ranks read its checkpoints from the same directory (a filesystem every rank sees), so a run resumes
// at any world size.
class Trainer {
public:
    Trainer(const TrainConfig& cfg, const TrainOptions& opts, const std::atomic<bool>& stop, Collective* dp)
        : cfg_(cfg),
          stop_(stop),
          dp_(dp),
          rank_(dp ? dp->rank() : 0),
          world_(dp ? dp->world() : 1),
          run_path_(opts.out_dir),
          last_iteration_(opts.iterations.value_or(cfg.iterations)),
          catalog_(ApiCatalog::load(ApiCatalog::default_path())),
          format_(coder_format(cfg.backend, cfg.format)),
          prompt_(CoderPrompt::load(format_)),
          frontier_([&] {
              FrontierOptions fo;
              fo.target = cfg.propose.target;
              return fo;
          }()),
          rewards_([&] {
              RewardConfig rc;
              const auto& c = cfg.coder_phase;
              rc.reward = c.reward, rc.gate = c.gate, rc.advantage = c.advantage;
              rc.lambda = c.lambda, rc.tau = c.tau, rc.s_max = c.s_max, rc.ema_decay = c.ema_decay;
              return rc;
          }()) {
        if (!leader()) set_train_output(false);
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
        if (leader()) {
            run_ = std::make_unique<RunDir>(run_path_, cfg.to_json(), opts.resume);
            records_ = std::make_unique<RecordIndex>(run_->rollouts_path());
            store_ = std::make_unique<TaskStore>(cfg.task_store.empty() ? run_->file("tasks.sqlite") : cfg.task_store);
            std::fprintf(stderr, "[train] run %s in %s%s\n", run_->run_id().c_str(), run_->path().c_str(),
                         world_ > 1 ? (" on " + std::to_string(world_) + " ranks").c_str() : "");
            model_dirs();
        }
        if (dp_) dp_->barrier("setup", kCollectiveTimeout);
        if (!leader()) model_dirs();  // now written: returns the leader's directories
        coder_ = std::make_unique<Policy>("coder", cfg.coder, coder_dir, cfg.device, derive_seed(cfg.seed, 0, 100));
        if (cfg.propose.enabled)
            proposer_ = std::make_unique<Policy>("proposer", cfg.proposer, proposer_dir, cfg.device,
                                                 derive_seed(cfg.seed, 0, 101));
        PipelineOptions po;
        po.validation.device = cfg.verify_device;
        po.validation.compile = cfg.verify_device.rfind("cuda", 0) == 0;
        po.validation.workers = cfg.propose.validation_workers;
        // The workers start (and compile once) while the models load: otherwise a worker's first module
        // pays for its start and Inductor's set-up, seconds that land on whichever iteration first
        // needs that many workers at once.
        po.validation.warm_up = true;
        // Every local rank validates at the same time: their workers share the host's CPUs.
        if (dp_) po.validation.processes_on_host = DistEnv::from_environment().value_or(DistEnv{}).local_world;
        VerifyOptions vo;
        vo.device = cfg.verify_device;
        vo.trials = cfg.verifier.trials;
        vo.timing_iters = cfg.verifier.timing_iters;
        vo.strict = cfg.verifier.policy == "strict";
        vo.timeout_s = cfg.verifier.timeout_s;
        vo.lanes = cfg.verifier.workers;
        vo.compile_workers = cfg.verifier.workers;
        // The validators share the device with the verifier's jobs and start after it: what they may
        // hold is left out of its memory.
        if (const int64_t cap = validation_memory_cap(po.validation); cap > 0)
            vo.reserved_device_bytes = po.validation.workers * (cap + kCudaContextBytes);
        verifier_ = make_verify_service(cfg.verifier.url, vo);
        verifier_->start();
        if (leader())
            pipeline_ = std::make_unique<TaskPipeline>(catalog_, *store_, po);
        else
            validator_ = std::make_unique<TaskValidator>(catalog_, po.validation);
    }

    int64_t run() {
        int64_t first = 1;
        std::optional<int64_t> mine = leader() ? run_->latest_checkpoint() : std::nullopt;
        json latest = from_leader(mine ? json(*mine) : json(nullptr));
        if (!latest.is_null()) {
            restore(latest.get<int64_t>());
            first = latest.get<int64_t>() + 1;
        }
        check_same_weights(*coder_);
        if (proposer_) check_same_weights(*proposer_);
        int64_t done = first - 1;
        for (int64_t it = first; it <= last_iteration_ && !stopping(); ++it) {
            if (!iteration(it)) break;
            done = it;
        }
        return done;
    }

private:
    // One iteration; false when stopped part-way (nothing of it is checkpointed).
    bool iteration(int64_t it) {
        timer_.reset(it);
        json m = {{"iteration", it}};
        if (it == 1 && cfg_.warm_start) timer_.run("warm_start", [&] { warm_start(m); });
        if (stopping()) return false;
        std::vector<StoredTask> band;
        if (cfg_.propose.enabled) band = timer_.run("propose", [&] { return propose(it, m); });
        if (stopping()) return false;
        auto pool = timer_.run("refresh_pool", [&] { return refresh_pool(it, band, m); });
        timer_.run("coder", [&] { coder_phase(it, pool, m); });
        if (stopping()) return false;
        // The same updates on the same weights: a rank that drifted is a bug, stopped here.
        check_same_weights(*coder_);
        if (proposer_) check_same_weights(*proposer_);
        throughput(m);
        const bool eval_due = !cfg_.eval.tasks.empty() && (it % cfg_.eval.every == 0 || it == last_iteration_);
        if (eval_due) {
            if (leader()) timer_.run("eval", [&] { evaluate(it, m); });
            if (dp_) dp_->barrier("eval-" + std::to_string(it), kEvalTimeout);
        }
        if (stopping()) return false;
        if (leader()) {
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

    // ---- data parallelism: what the ranks share

    bool leader() const { return rank_ == 0; }
    // Whether any rank was asked to stop (every rank asks at the same points, so all stop together).
    bool stopping() { return dp_ ? dp_->sum(stop_ ? 1.0 : 0.0) > 0 : stop_.load(); }
    // The leader's `j` on every rank.
    json from_leader(const json& j) {
        if (!dp_) return j;
        return json::parse(
            dp_->broadcast_bytes(leader() ? j.dump(-1, ' ', false, json::error_handler_t::replace) : ""));
    }
    // Every rank's `local`, in rank order.
    std::vector<json> gather(const json& local) {
        if (!dp_) return {local};
        std::vector<json> out;
        for (const auto& b : dp_->all_gather_bytes(local.dump(-1, ' ', false, json::error_handler_t::replace)))
            out.push_back(json::parse(b));
        return out;
    }
    // This rank's block [first, second) of n items.
    std::pair<size_t, size_t> block(size_t n) const {
        return {n * static_cast<size_t>(rank_) / static_cast<size_t>(world_),
                n * static_cast<size_t>(rank_ + 1) / static_cast<size_t>(world_)};
    }
    // Ranks hold the same weights (the same seeds and files, then the same updates): checked, not
    // assumed. A sum over the trainable parameters, compared exactly.
    void check_same_weights(Policy& p) {
        if (!dp_) return;
        torch::NoGradGuard no_grad;
        double sum = 0;
        for (const auto& [name, t] : p.optimizer().params()) sum += t.sum(torch::kFloat64).item<double>();
        auto all = gather(json(sum));
        for (int r = 1; r < world_; ++r)
            if (all[static_cast<size_t>(r)] != all[0])
                throw std::runtime_error("rank " + std::to_string(r) + "'s " + p.name() +
                                         " weights differ from rank 0's (checksums " +
                                         all[static_cast<size_t>(r)].dump() + " vs " + all[0].dump() +
                                         "): the ranks loaded different models or adapters");
    }
    // The leader's trainable weights on every rank, and a fresh optimizer over them.
    void share_weights(Policy& p) {
        if (!dp_) return;
        std::vector<torch::Tensor> ts;
        for (const auto& [name, t] : p.optimizer().params()) ts.push_back(t);
        dp_->broadcast(ts, 0);
        p.reset_optimizer();
    }

    // Stage metrics every rank contributes to: sampled tokens, verifications, samples per second.
    void throughput(json& m) {
        double sampling_s = 0;
        const json stages = timer_.to_json();
        for (auto& [stage, secs] : stages.items())
            if (stage == "propose" || stage == "refresh_pool" || stage == "coder") sampling_s += secs.get<double>();
        const double rate = verify_s_ > 0 ? 60.0 * static_cast<double>(verified_) / verify_s_ : 0.0;
        m["world_size"] = world_;
        m["samples"] = samples_;
        m["samples_per_s"] = sampling_s > 0 ? static_cast<double>(samples_) / sampling_s : 0.0;
        m["tokens_sampled"] = dp_ ? static_cast<int64_t>(dp_->sum(static_cast<double>(tokens_))) : tokens_;
        m["verified"] = dp_ ? static_cast<int64_t>(dp_->sum(static_cast<double>(verified_))) : verified_;
        m["verify_s"] = verify_s_;
        // Every rank's verifier works at once: their rates add up.
        m["verifier_jobs_per_min"] = dp_ ? dp_->sum(rate) : rate;
        tokens_ = verified_ = samples_ = 0;
        verify_s_ = 0;
    }

    CoderStepConfig coder_cfg(int G, int64_t max_new_tokens, double temperature, double top_p, uint64_t seed) const {
        CoderStepConfig c;
        c.group_size = G;
        c.max_new_tokens = max_new_tokens;
        c.temperature = temperature;
        c.top_p = top_p;
        c.seed = seed;
        c.loss.eps_low = cfg_.coder_phase.eps_low;
        c.loss.eps_high = cfg_.coder_phase.eps_high;
        c.loss.kl_beta = cfg_.coder_phase.kl_beta;
        c.mask_overlong = cfg_.coder_phase.mask_overlong;
        c.micro_batch = cfg_.coder_phase.micro_batch;
        return c;
    }

    RolloutRecord record(int64_t it, const std::string& role, const std::string& hash, int sample,
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
    void append(const std::vector<RolloutRecord>& recs) {
        if (!leader()) return;
        std::vector<RolloutRecord> fresh;
        for (const auto& r : recs)
            if (!records_->has(r)) fresh.push_back(r);
        append_rollouts(run_->rollouts_path(), fresh);
        for (const auto& r : fresh) records_->add(r);
    }

    std::string submission(int64_t it) const { return run_->run_id() + "/iter-" + std::to_string(it); }

    std::string version(const std::string& who, int64_t it) const { return who + "@iter-" + std::to_string(it - 1); }

    // A step's rollouts (G per prompt, task-major), the same on every rank: read back from its
    // records when the leader's log holds all of them (a step of an iteration run again after a
    // crash), else sampled in blocks across the ranks and, with `judged_tasks` (indexed as the
    // prompts), verified by each rank's verifier, then gathered.
    struct Judged {
        std::vector<Rollout> rollouts;
        std::vector<json> verdicts;  // judged steps only
        bool replayed = false;
    };
    Judged sample_step(int64_t it, const std::string& role, const std::vector<std::string>& keys, int first_sample,
                       Policy& policy, const std::vector<std::vector<int64_t>>& prompts, const CoderStepConfig& c,
                       CoderStepStats& st, const std::vector<StoredTask>* judged_tasks) {
        const bool judged = judged_tasks != nullptr;
        Judged out;
        if (leader())
            if (auto recs = records_->complete(it, role, keys, first_sample, c.group_size); !recs.empty()) {
                out.rollouts = rollouts_from(recs, c.group_size);
                if (judged)
                    for (const auto* r : recs) out.verdicts.push_back(r->verdict);
                out.replayed = true;
            }
        if (dp_) {
            json replay = from_leader(out.replayed ? serialise(out, judged) : json(nullptr));
            if (!replay.is_null()) {
                if (!leader()) deserialise(replay, judged, out);
                out.replayed = true;
            }
        }
        if (out.replayed) return out;

        const auto [begin, end] = block(prompts.size());
        Judged mine;
        if (begin < end) {
            CoderStepConfig local = c;
            if (rank_ > 0) local.seed = derive_seed(c.seed, rank_, kRankStream);
            Progress bar(role + ": sampling " + std::to_string((end - begin) * static_cast<size_t>(c.group_size)) +
                             " completions",
                         1);
            mine.rollouts = sample_rollouts(policy.model(), policy.tokenizer(),
                                            {prompts.begin() + static_cast<std::ptrdiff_t>(begin),
                                             prompts.begin() + static_cast<std::ptrdiff_t>(end)},
                                            policy.stops(), local, &st);
            for (auto& r : mine.rollouts) r.task += begin;
            tokens_ += count_tokens(mine.rollouts);
            bar.advance();
            if (judged) judge(*judged_tasks, mine);
        }
        if (!dp_)
            out = std::move(mine);
        else  // every rank rebuilds the whole step (its own block included) from the same bytes
            for (const auto& part : gather(serialise(mine, judged))) deserialise(part, judged, out);
        samples_ += static_cast<int64_t>(out.rollouts.size());
        return out;
    }

    // Verifies this rank's rollouts of `tasks`.
    void judge(const std::vector<StoredTask>& tasks, Judged& j) {
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

    static json serialise(const Judged& j, bool judged) {
        json a = json::array();
        for (size_t i = 0; i < j.rollouts.size(); ++i) {
            const Rollout& r = j.rollouts[i];
            a.push_back({{"task", r.task},
                         {"sample", r.sample},
                         {"ids", r.completion_ids},
                         {"logprobs", r.sampler_logprobs},
                         {"stopped", r.stopped},
                         {"text", r.text},
                         {"verdict", judged ? j.verdicts[i] : json(nullptr)}});
        }
        return a;
    }
    // Appends serialise()'s rollouts to `out`; a judged rollout's outcome is read from its verdict.
    static void deserialise(const json& a, bool judged, Judged& out) {
        for (const auto& e : a) {
            Rollout r;
            r.task = e.at("task").get<size_t>();
            r.sample = e.at("sample").get<int>();
            r.completion_ids = e.at("ids").get<std::vector<int64_t>>();
            r.sampler_logprobs = e.at("logprobs").get<std::vector<float>>();
            r.stopped = e.at("stopped").get<bool>();
            r.text = e.at("text").get<std::string>();
            if (judged) {
                r.outcome = outcome_of_json(e.at("verdict"));
                out.verdicts.push_back(e.at("verdict"));
            }
            out.rollouts.push_back(std::move(r));
        }
    }

    // One validate_and_store call's candidates and results, shared with its worker threads, which may
    // outlive the call (below).
    struct ValidationRound {
        std::string name;  // the same on every rank: names the shared counters and results
        std::vector<Candidate> cands;
        json known;  // per candidate: null (validate it), "stored" (this submission stored it), or its verdict
        std::vector<std::vector<size_t>> dups;   // per candidate: the earlier ones it is a near-duplicate of
        std::atomic<bool> decided{false};        // the caller has what it needs: take no more candidates
        std::atomic<int64_t> next{0}, valid{0};  // one process: the counters the ranks share otherwise
        std::mutex mu;                           // one process: results by candidate, published below
        std::condition_variable cv;
        std::map<int64_t, std::string> results;
    };

    void publish(ValidationRound& r, int64_t k, const std::string& value) {
        if (dp_) return dp_->publish(r.name + "/" + std::to_string(k), value);
        {
            std::lock_guard lock(r.mu);
            r.results[k] = value;
        }
        r.cv.notify_all();
    }

    json await(ValidationRound& r, int64_t k) {
        std::string value;
        if (dp_) {
            value = dp_->await(r.name + "/" + std::to_string(k), kCollectiveTimeout);
        } else {
            std::unique_lock lock(r.mu);
            r.cv.wait(lock, [&] { return r.results.count(k) > 0; });
            value = r.results[k];
        }
        json j = json::parse(value);
        if (j.contains("error"))
            throw std::runtime_error("validating candidate " + std::to_string(k) +
                                     " failed: " + j["error"].get<std::string>());
        return j;
    }

    // Validates candidates and stores them (the leader, in number order); every rank gets the stored
    // records. Candidate k (0 <= k < n) is make(k), the same on every rank; the candidates are shared
    // out across the ranks' validation workers as they free up (validation times are uneven: a
    // module's first torch.compile can take seconds, and fixed blocks would leave a rank idle while
    // another finishes a slow one). With `enough` > 0, workers stop taking candidates once that many
    // have come out valid, and only the candidates up to the one that made `enough` (in number order)
    // are stored, so which modules are stored does not depend on which worker was fast; without it,
    // all n are, and a candidate this submission stored before (an iteration run again) is not
    // validated again (the store returns its record). A near-duplicate of a stored task or of a
    // benchmark is not validated either: the store's checks turn it down before any worker time is
    // spent on it, and it does not count towards `enough`; nor does a near-duplicate of an earlier
    // candidate that is kept (counted, either would end the round a module short: a second round).
    // The call returns once every candidate up to the `enough`-th valid one is judged: a worker still
    // validating a later one (taken while the outcome was open) is not waited for. Its result is not
    // used; it finishes in the background, and the next call waits for it first (it holds a
    // validation worker). Waiting for it cost a round up to a few seconds of compilation for nothing.
    std::vector<TaskRecord> validate_and_store(int64_t n, const std::function<Candidate(int64_t)>& make, int64_t enough,
                                               const std::string& origin, int64_t it) {
        validation_threads_.join_all();
        auto r = std::make_shared<ValidationRound>();
        // Every rank makes the same calls, so the names are the same on all.
        r->name = "validate/" + std::to_string(it) + "/" + std::to_string(validation_rounds_++);
        for (int64_t k = 0; k < n; ++k) r->cands.push_back(make(k));
        json prior = {{"known", json::array()}, {"dups", json::array()}};
        if (leader()) {
            std::vector<std::string> sources;
            for (const auto& c : r->cands) {
                sources.push_back(c.source);
                if (pipeline_->resubmitted(c.source, submission(it)))
                    prior["known"].push_back(enough <= 0 ? json("stored") : json(nullptr));
                else if (auto v = pipeline_->screen(c.source))
                    prior["known"].push_back(v->to_json());
                else
                    prior["known"].push_back(nullptr);
            }
            prior["dups"] = pipeline_->earlier_near_duplicates(sources);
        }
        prior = from_leader(prior);
        r->known = prior["known"];
        r->dups = prior["dups"].get<std::vector<std::vector<size_t>>>();
        auto work = [this, r, n, enough] {
            auto take = [&]() -> int64_t { return dp_ ? dp_->claim(r->name) : r->next++; };
            auto valid_so_far = [&](int64_t add) -> int64_t {
                return dp_ ? dp_->add(r->name + "/valid", add) : (r->valid += add);
            };
            for (int64_t k; !r->decided && !(enough > 0 && valid_so_far(0) >= enough) && (k = take()) < n;) {
                const auto i = static_cast<size_t>(k);
                if (!r->known[i].is_null()) continue;
                std::string value;
                try {
                    const TaskValidation v = leader() ? pipeline_->validate(r->cands[i].source, r->cands[i].apis)
                                                      : validator_->validate(r->cands[i].source, r->cands[i].apis);
                    // A near-duplicate of an earlier candidate is stored valid only if none of those is:
                    // it is not counted (the round may take a candidate more than it needs).
                    if (v.valid && r->dups[i].empty()) valid_so_far(1);
                    value = v.to_json().dump();
                } catch (const std::exception& e) {
                    value = json{{"error", e.what()}}.dump();
                } catch (...) {
                    value = json{{"error", "unknown exception"}}.dump();
                }
                try {
                    publish(*r, k, value);
                } catch (...) {  // the store is gone (a rank died): the caller's await reports it
                    return;
                }
            }
        };
        for (int t = 0; t < std::min<int64_t>(cfg_.propose.validation_workers, n); ++t)
            validation_threads_.emplace_back(work);
        // What is stored: every candidate, or the numbers up to the `enough`-th valid one (none was stored
        // before then, and every number below it was taken: numbers are taken in order, and no worker
        // stops taking while fewer than `enough` have come out valid).
        std::vector<json> validations(static_cast<size_t>(n));  // null: stored before, validated no more
        std::vector<bool> kept(static_cast<size_t>(n), false);  // what submit() will store valid
        size_t end = 0;
        try {
            for (int64_t valid = 0; end < validations.size() && (enough <= 0 || valid < enough); ++end) {
                const json& known = r->known[end];
                if (known.is_string()) continue;
                validations[end] = known.is_object() ? known : await(*r, static_cast<int64_t>(end));
                kept[end] = validations[end].at("valid").get<bool>() &&
                            std::none_of(r->dups[end].begin(), r->dups[end].end(), [&](size_t j) { return kept[j]; });
                valid += kept[end];
            }
        } catch (...) {
            r->decided = true;
            throw;
        }
        r->decided = true;
        json stored_records = json::array();
        if (leader())
            for (size_t i = 0; i < end; ++i) {
                std::optional<TaskValidation> v;
                if (!validations[i].is_null()) v = TaskValidation::from_json(validations[i]);
                stored_records.push_back(
                    to_json(pipeline_->submit(r->cands[i].source, r->cands[i].apis, r->cands[i].level, origin,
                                              submission(it), v ? &*v : nullptr)));
            }
        std::vector<TaskRecord> out;
        for (const auto& t : from_leader(stored_records)) out.push_back(task_of(t));
        return out;
    }

    static int64_t count_tokens(const std::vector<Rollout>& rs) {
        int64_t n = 0;
        for (const auto& r : rs) n += static_cast<int64_t>(r.completion_ids.size());
        return n;
    }

    // Stage 0 (iteration 1 only): SFT of the Coder on [sft] (design 6.6), then RL from there. The
    // leader trains; the other ranks take its weights.
    void warm_start(json& m) {
        if (leader()) {
            int64_t skipped = 0;
            auto pairs = load_sft_pairs(cfg_, *coder_, &skipped);
            if (pairs.empty()) throw std::runtime_error("warm_start: [sft] gives no usable pair");
            SftResult r = sft_train(*coder_, pairs, cfg_, stop_);
            coder_->reset_optimizer();
            r.skipped = skipped;
            m["warm_start"] = r.to_json();
        }
        if (dp_) dp_->barrier("warm-start", kEvalTimeout);
        share_weights(*coder_);
    }

    // Stage 1. Returns the valid modules whose p-hat lies in the band.
    std::vector<StoredTask> propose(int64_t it, json& m) {
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
        Judged sampled = sample_step(it, "proposer", set_keys, 0, *proposer_, prompts, pcfg, pst, nullptr);
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
            auto recs = validate_and_store(
                static_cast<int64_t>(cands.size()), [&](int64_t k) { return cands[static_cast<size_t>(k)]; }, 0,
                "proposer", it);
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
                auto recs = validate_and_store(cap - first, make, pc.min_valid - static_cast<int64_t>(modules.size()),
                                               "symbolic", it);
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
            Judged j = sample_step(it, "probe", hashes(modules), 0, *coder_, cprompts, ccfg, cst, &modules);
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
        const auto [set_begin, set_end] = block(sets.size());
        update_policy(proposer_->model(), proposer_->optimizer(), prompts, rows_of(proposals, set_begin, set_end), pcfg,
                      pst, dp_);

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

    void add_attempts(const std::vector<StoredTask>& tasks, const Judged& j, const std::string& who) {
        if (!leader()) return;
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

    // Stage 2: this iteration's band modules, plus replay of older valid tasks (deterministic).
    std::vector<StoredTask> refresh_pool(int64_t it, const std::vector<StoredTask>& band, json& m) {
        std::vector<StoredTask> pool = band;
        std::set<int64_t> in;
        for (const auto& t : band) in.insert(t.id);
        // The leader's store lists the older tasks, for every rank.
        json listed = json::array();
        if (leader())
            for (const auto& t : store_->tasks(/*valid_only=*/true))
                if (!in.count(t.id)) listed.push_back(to_json(stored(t)));
        std::vector<StoredTask> older;
        for (const auto& t : from_leader(listed)) older.push_back(stored_of(t));
        std::mt19937_64 rng(derive_seed(cfg_.seed, it, kPoolStage));
        std::shuffle(older.begin(), older.end(), rng);
        // With no band module yet (a Coder that solves nothing, early on) replay alone feeds the pool.
        const size_t want = static_cast<size_t>(cfg_.coder_phase.replay) +
                            (band.empty() ? static_cast<size_t>(cfg_.coder_phase.tasks_per_step) : 0);
        for (size_t i = 0; i < older.size() && i < want; ++i) pool.push_back(older[i]);
        m["pool"] = {{"size", pool.size()}, {"from_band", band.size()}, {"replayed", pool.size() - band.size()}};
        return pool;
    }

    // Stage 3.
    void coder_phase(int64_t it, const std::vector<StoredTask>& pool, json& m) {
        const auto& cc = cfg_.coder_phase;
        json steps = json::array();
        if (pool.empty()) {
            m["coder"] = {{"steps", steps}, {"skipped", "empty pool"}};
            return;
        }
        Progress bar("coder: CA-GRPO steps", cc.steps);
        for (int s = 0; s < cc.steps && !stopping(); ++s) {
            std::vector<StoredTask> tasks = pool;
            std::mt19937_64 rng(derive_seed(cfg_.seed, it, kCoderStage, static_cast<uint64_t>(s)));
            std::shuffle(tasks.begin(), tasks.end(), rng);
            tasks.resize(std::min(tasks.size(), static_cast<size_t>(cc.tasks_per_step)));
            std::vector<std::vector<int64_t>> prompts;
            for (const auto& t : tasks) prompts.push_back(coder_->encode_chat(prompt_.messages(t.source)));
            CoderStepConfig c = coder_cfg(cc.group_size, cc.max_new_tokens, cc.temperature, cc.top_p,
                                          derive_seed(cfg_.seed, it, kCoderStage, 1000 + static_cast<uint64_t>(s)));
            CoderStepStats st;
            // Samples are numbered across the iteration's steps, so a task drawn in two steps keeps
            // distinct record keys.
            const int first = s * cc.group_size;
            Judged j = sample_step(it, "coder", hashes(tasks), first, *coder_, prompts, c, st, &tasks);
            auto t0 = std::chrono::steady_clock::now();
            score_rollouts(j.rollouts, tasks.size(), rewards_, c, st);
            std::vector<RolloutRecord> out;
            std::vector<int> passed(tasks.size(), 0), judged(tasks.size(), 0);
            std::vector<double> speedups;
            for (size_t i = 0; i < j.rollouts.size(); ++i) {
                const Rollout& r = j.rollouts[i];
                if (!r.outcome.infra_error) ++judged[r.task], passed[r.task] += r.outcome.correct;
                if (r.outcome.correct && r.outcome.speedup_eager) speedups.push_back(*r.outcome.speedup_eager);
                out.push_back(record(it, "coder", tasks[r.task].hash, first + r.sample, prompts[r.task], r,
                                     j.verdicts[i], version("coder", it)));
            }
            append(out);
            if (!j.replayed) add_attempts(tasks, j, "coder@iter-" + std::to_string(it - 1));
            for (size_t t = 0; t < tasks.size(); ++t)
                if (judged[t]) frontier_.update(tasks[t].apis, passed[t], judged[t]);
            st.judge_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            const auto [begin, end] = block(tasks.size());
            update_policy(coder_->model(), coder_->optimizer(), prompts, rows_of(j.rollouts, begin, end), c, st, dp_);
            double geo = 0;
            for (double x : speedups) geo += std::log(x);
            steps.push_back(
                {{"step", s},
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
                 {"clip_fraction", st.clip_fraction},
                 {"grad_norm", st.grad_norm},
                 {"loss_tokens", st.loss_tokens},
                 {"updated", st.updated},
                 {"replayed", j.replayed},
                 {"generate_s", st.generate_s},
                 {"update_s", st.update_s}});
            bar.advance();
        }
        m["coder"] = {{"steps", steps}};
        if (rewards_.batch_correct_ema()) m["coder"]["batch_correct_ema"] = *rewards_.batch_correct_ema();
    }

    // Stage 4: bench's run on the held-out set, into eval/iter-K (resumable by itself).
    void evaluate(int64_t it, json& m) {
        BenchOptions bo;
        bo.out_dir = run_->eval_dir(it);
        bo.format = format_;
        bo.samples = cfg_.eval.samples;
        bo.ks = {1};
        if (cfg_.eval.samples >= 10) bo.ks.push_back(10);
        bo.resume = fs::exists(bo.out_dir + "/run.json");
        bo.progress = false;
        bo.in_flight = cfg_.verifier.in_flight;
        SamplingParams sp;
        sp.temperature = cfg_.eval.temperature;
        sp.seed = derive_seed(cfg_.seed, it, kEvalStage);
        bo.settings = {{"temperature", sp.temperature},
                       {"max_new_tokens", cfg_.eval.max_new_tokens},
                       {"model_version", "coder@iter-" + std::to_string(it)}};
        PolicySource source(coder_->model(), coder_->tokenizer(), coder_->stops(), sp, cfg_.eval.max_new_tokens, 8,
                            "coder@iter-" + std::to_string(it));
        BenchMetrics bm = run_bench(load_task_dirs(cfg_.eval.tasks), bo, &source, *verifier_, stop_);
        json o = bm.overall.to_json();
        m["eval"] = {{"tasks", o.value("tasks", 0)},
                     {"samples", o.value("samples", 0)},
                     {"correct", o.value("correct", 0)},
                     {"pass_at_k", o.value("pass_at_k", json::object())},
                     {"fast_p_eager", o.value("fast_p_eager", json::object())},
                     {"geomean_speedup_eager", o.value("geomean_speedup_eager", json(nullptr))},
                     {"report", bo.out_dir + "/report.html"}};
    }

    // Stage 5: everything an exact resume needs, in one directory renamed into place.
    void checkpoint(int64_t it, json& m) {
        m["frontier_size"] = frontier_.stats().size();
        m["stage_s"] = timer_.to_json();
        run_->commit_checkpoint(it, [&](const std::string& dir) {
            coder_->save(dir + "/coder");
            if (proposer_) proposer_->save(dir + "/proposer");
            json state = {{"iteration", it}, {"frontier", frontier_.to_json()}, {"metrics", m}};
            if (rewards_.batch_correct_ema()) state["batch_correct_ema"] = *rewards_.batch_correct_ema();
            write_file_atomic(dir + "/state.json", state.dump(2) + "\n");
        });
    }

    // Every rank restores from the leader's checkpoint (the run directory is shared).
    void restore(int64_t it) {
        const std::string dir = RunDir::checkpoint_path(run_path_, it);
        json state = json::parse(read_file(dir + "/state.json"));
        coder_->restore(dir + "/coder");
        if (proposer_) proposer_->restore(dir + "/proposer");
        frontier_.from_json(state.at("frontier"));
        if (state.contains("batch_correct_ema"))
            rewards_.set_batch_correct_ema(state["batch_correct_ema"].get<double>());
        // A no-op unless the crash came between checkpoint and metrics.
        if (leader()) run_->record_metrics(it, state.at("metrics"));
        std::fprintf(stderr, "[train] resumed after iteration %lld\n", static_cast<long long>(it));
    }

    static std::vector<std::string> hashes(const std::vector<StoredTask>& tasks) {
        std::vector<std::string> out;
        for (const auto& t : tasks) out.push_back(t.hash);
        return out;
    }

    const TrainConfig& cfg_;
    const std::atomic<bool>& stop_;
    Collective* dp_;  // null: one process
    int rank_, world_;
    std::string run_path_;
    int64_t last_iteration_;
    ApiCatalog catalog_;
    CoderFormat format_;
    CoderPrompt prompt_;
    FrontierTracker frontier_;
    CoderRewards rewards_;
    // The leader's alone: the run directory, its rollout records, the task store and its pipeline.
    std::unique_ptr<RunDir> run_;
    std::unique_ptr<RecordIndex> records_;
    std::unique_ptr<TaskStore> store_;
    std::unique_ptr<TaskPipeline> pipeline_;
    std::unique_ptr<TaskValidator> validator_;  // the other ranks' (the leader's is the pipeline's)
    std::unique_ptr<Policy> coder_, proposer_;
    std::unique_ptr<VerifyService> verifier_;
    StageTimer timer_;
    int64_t tokens_ = 0, verified_ = 0, samples_ = 0;  // since the last throughput(); tokens, verified: this rank's
    int64_t validation_rounds_ = 0;                    // validate_and_store calls so far: names their shared counters
    double verify_s_ = 0;
    // The last validate_and_store call's workers: some may still be finishing a validation it did not
    // need. Declared last, so joined first: they use the pipeline, the validator and dp_.
    struct JoinedThreads : std::vector<std::thread> {
        JoinedThreads() = default;
        JoinedThreads(const JoinedThreads&) = delete;
        JoinedThreads& operator=(const JoinedThreads&) = delete;
        ~JoinedThreads() { join_all(); }
        void join_all() {
            for (auto& t : *this) t.join();
            clear();
        }
    };
    JoinedThreads validation_threads_;
};

}  // namespace

int64_t run_training(const TrainConfig& cfg, const TrainOptions& opts, const std::atomic<bool>& stop) {
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
