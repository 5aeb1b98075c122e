// The trainer's state and stages (train/trainer.h says what an iteration does). For train/ only:
// trainer.cpp holds the loop and the rollout plumbing every stage uses; each stage is in a file of
// its own (stage_*.cpp) whose header comment states what it reads and what it returns.
#pragma once

#include <atomic>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "prompts/coder_prompt.h"
#include "tasks/api_catalog.h"
#include "tasks/frontier.h"
#include "tasks/pipeline.h"
#include "tasks/task_store.h"
#include "tasks/validation.h"
#include "train/coder_step.h"
#include "train/module_validation.h"
#include "train/policy.h"
#include "train/ranks.h"
#include "train/replay.h"
#include "train/run_dir.h"
#include "train/stored_task.h"
#include "train/trainer.h"
#include "verify/service.h"

namespace kz {

class Trainer {
    using json = nlohmann::json;

public:
    Trainer(const TrainConfig& cfg, const TrainOptions& opts, const std::atomic<bool>& stop, Collective* dp);
    // Iterations from the last checkpoint (or the first) to the configured last.
    TrainOutcome run();

private:
    // One iteration: the stages in order; false when stopped part-way (nothing of it is checkpointed).
    bool iteration(int64_t it);
    // Whether iteration `it` would end past the deadline (TrainOptions::deadline), on every rank alike.
    bool past_deadline(int64_t it);

    // ---- the stages (stage_*.cpp); `m` is the iteration's metrics, each stage adds its own.
    void warm_start(json& m);
    std::vector<StoredTask> propose(int64_t it, json& m);
    // propose's parts, in order (stage_propose.cpp)
    struct ProposeRound;
    void draw_api_sets(int64_t it, ProposeRound& r);
    void store_proposals(int64_t it, ProposeRound& r);
    void fill_with_symbolic(int64_t it, ProposeRound& r);
    void probe_coder(int64_t it, ProposeRound& r);
    void update_proposer(int64_t it, ProposeRound& r);
    std::vector<StoredTask> refresh_pool(int64_t it, const std::vector<StoredTask>& band, json& m);
    void coder_phase(int64_t it, const std::vector<StoredTask>& pool, json& m);
    void evaluate(int64_t it, json& m);
    void checkpoint(int64_t it, json& m);
    void restore(int64_t it);

    // ---- what the stages share (trainer.cpp)
    // Stage metrics every rank contributes to: sampled tokens, verifications, samples per second.
    void throughput(json& m);
    CoderStepConfig coder_cfg(int G, int64_t max_new_tokens, double temperature, double top_p, uint64_t seed) const;
    RolloutRecord record(int64_t it, const std::string& role, const std::string& hash, int sample,
                         const std::vector<int64_t>& prompt, const Rollout& r, json verdict,
                         const std::string& version) const;
    void append(const std::vector<RolloutRecord>& recs);
    // The task store's name for iteration `it`'s submissions: the leader's alone (it owns the run);
    // empty on the other ranks.
    std::string leader_submission(int64_t it) const {
        return run_ ? run_->run_id() + "/iter-" + std::to_string(it) : std::string();
    }
    std::string version(const std::string& who, int64_t it) const { return who + "@iter-" + std::to_string(it - 1); }
    JudgedStep sample_step(int64_t it, const std::string& role, const std::vector<std::string>& keys, int first_sample,
                           Policy& policy, const std::vector<std::vector<int64_t>>& prompts, const CoderStepConfig& c,
                           CoderStepStats& st, const std::vector<StoredTask>* judged_tasks);
    void judge(const std::vector<StoredTask>& tasks, JudgedStep& j);
    void add_attempts(const std::vector<StoredTask>& tasks, const JudgedStep& j, const std::string& who);

    const TrainConfig& cfg_;
    const std::atomic<bool>& stop_;
    Ranks ranks_;
    std::string run_path_;
    int64_t last_iteration_;
    std::optional<double> deadline_;  // TrainOptions::deadline
    ApiCatalog catalog_;
    std::set<std::string> excluded_sets_;  // propose.exclude_sets: sorted, comma-joined API sets
    CoderFormat format_;
    CoderPrompt prompt_;
    FrontierTracker frontier_;
    CoderRewards rewards_;
    // The leader's alone: the run directory, its rollout records, the task store and its pipeline.
    std::unique_ptr<RunDir> run_;
    std::unique_ptr<RecordIndex> records_;
    std::unique_ptr<TaskStore> store_;
    // Declared before the validators, so destroyed after them: they reserve from its device budget.
    std::unique_ptr<VerifyService> verifier_;
    std::unique_ptr<TaskPipeline> pipeline_;
    std::unique_ptr<TaskValidator> validator_;  // the other ranks' (the leader's is the pipeline's)
    std::unique_ptr<Policy> coder_, proposer_;
    StageTimer timer_;
    // The run's spending through the last finished iteration, all ranks (verification_budget, token_budget).
    int64_t spent_verified_ = 0, spent_tokens_ = 0;
    // Whether the budget is spent, or would be with more_verified and more_tokens spent on top.
    bool budget_spent(int64_t more_verified = 0, int64_t more_tokens = 0) const;
    // Whether iteration `it` ends with an evaluation: every eval.every iterations and the last one (the
    // configured last, or one that spends the budget: `spends_budget`).
    bool evaluated(int64_t it, bool spends_budget) const;
    int64_t tokens_ = 0, verified_ = 0, samples_ = 0;  // since the last throughput(); tokens, verified: this rank's
    double verify_s_ = 0;
    // Declared last, so destroyed first: its workers may still be validating with the pipeline or the
    // validator.
    std::unique_ptr<ModuleValidation> validation_;
};

}  // namespace kz
