// The co-evolution trainer (design 6.5). Iteration k runs named, timed stages over one run directory
// (train/run_dir.h), each in a file of its own (train/stage_<name>.cpp; the loop is Trainer::iteration
// in train/trainer.cpp):
//   warm_start    iteration 1 only, with warm_start = true: SFT of the Coder on [sft] (design 6.6)
//   propose       draw API sets from the frontier; the Proposer writes modules; validation and the
//                 task store; the symbolic generator fills in when too few are valid; the Coder is
//                 measured on each valid module (p-hat over G samples, verified); frontier updated;
//                 Proposer rewards (6.2) and one Proposer update
//   refresh_pool  modules with p-hat in the band, plus replay of older stored tasks
//   coder         CA-GRPO steps (6.3, 6.4) on the pool
//   eval          the Coder on the fixed held-out task set (bench's metrics and report)
//   checkpoint    both policies, optimizer states, rewards' and frontier's state, the iteration's metrics
//
// Every sampled completion becomes a rollout record, appended durably once its step is judged. A run
// killed anywhere resumes from its last checkpoint: the unfinished iteration runs again with the
// same seeds, and every step whose records are already complete is replayed from them (no new
// sampling, no new verification), so nothing recorded is lost or recorded twice.
#pragma once

#include <atomic>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/train_config.h"

namespace kz {

struct TrainOptions {
    std::string out_dir;
    bool resume = false;
    std::optional<int> iterations;  // overrides the configuration's
    // Seconds since the epoch (the system clock) by which the run should have stopped, or none. An
    // iteration that would end later by iteration_estimate_s is not started: on a machine that ends
    // each command at a deadline, an iteration cut there is lost with the seconds it ran.
    std::optional<double> deadline;
};

struct TrainOutcome {
    int64_t last_iteration = 0;        // the last finished iteration
    bool stopped_by_deadline = false;  // the next iteration was not started (TrainOptions::deadline)
};

// Runs iterations up to the configured number. Throws std::runtime_error naming the cause (bad run
// directory, model, verifier start); when `stop` is set it returns at the next step boundary without
// checkpointing the unfinished iteration.
TrainOutcome run_training(const TrainConfig& cfg, const TrainOptions& opts, const std::atomic<bool>& stop);

// Seconds the next iteration will take, from the metrics of the run's finished iterations
// (metrics.jsonl's records, in order; their "stage_s"): the longest of the last four, evaluation and
// warm_start apart (the first iterations of a process pay its warm-up), plus, where the next one
// evaluates (`evaluates`), the longest evaluation recorded, or the iteration's own estimate again
// where none is. 0 without a finished iteration: a run's first iteration starts unless the deadline
// has passed.
double iteration_estimate_s(const std::vector<nlohmann::json>& finished, bool evaluates);

}  // namespace kz
