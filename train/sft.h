// Supervised fine-tuning (design 6.6): the Coder on (prompt, completion) pairs from JSONL, loss on the
// completion tokens only (the stop token included, so the model learns to end), with the engine's
// LoRA or full fine-tuning, AdamW and chunked log-probs. Each JSONL line:
//   {"prompt": "text" | [{"role": ..., "content": ...}, ...], "completion": "text"}
// A string prompt is one user message; both are rendered with the model's chat template. Pairs can
// also come from a task directory and a candidate directory (sft.tasks, sft.candidates). The result
// is a PEFT adapter (sft.out/adapter) that `train` starts from with coder.adapter, or, for full
// fine-tuning, a Hugging Face directory (sft.out/model).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/train_config.h"

namespace kz {

struct SftResult {
    int64_t pairs = 0, skipped = 0, steps = 0, total_steps = 0, tokens = 0;
    double first_loss = 0, last_loss = 0, seconds = 0;  // seconds: of every session of the run
    std::vector<double> held_out_loss;                  // after each epoch, on the held-out pairs (if any)
    bool stopped = false;  // `stop` ended it before its last step (its state is in the checkpoint)
    std::string out;
    nlohmann::json to_json() const;
};

class Policy;

struct SftPair {
    std::vector<int64_t> prompt, completion;  // completion ends with the end-of-turn token
};

// The pairs of cfg.sft (JSONL and/or task and candidate directories), tokenised for `policy`; pairs
// longer than sft.max_tokens are counted in *skipped. Throws std::runtime_error naming the file and
// line of a malformed pair.
std::vector<SftPair> load_sft_pairs(const TrainConfig& cfg, const Policy& policy, int64_t* skipped);
// The pairs of sft.eval_data, tokenised and filtered the same way; none when it is not set.
std::vector<SftPair> load_sft_eval_pairs(const TrainConfig& cfg, const Policy& policy, int64_t* skipped);

// The mean loss per completion token of `pairs` under the policy's model, without gradients: what
// an SFT epoch is judged by on pairs it never trains on. Batches of `batch_size`.
double sft_held_out_loss(Policy& policy, const std::vector<SftPair>& pairs, int batch_size);

// The learning rate of step `step` (0-based) of `total`: sft.warmup_steps of linear warm-up from 0
// to `base`, then `base` (schedule "constant") or a cosine from `base` to base / 10 ("cosine").
double sft_lr(const SftSpec& s, double base, int64_t step, int64_t total);

// An epoch's order of the pairs with the given total lengths: a shuffle by `rng`, then, with
// `group_by_length`, each run of 16 * batch_size positions sorted by length, longest first (ties keep
// the shuffle's order).
std::vector<size_t> sft_epoch_order(const std::vector<int64_t>& lengths, int batch_size, bool group_by_length,
                                    std::mt19937_64& rng);

// How sft_train keeps a run resumable, and what it measures beside training. `checkpoints`: a directory of step-NNNNNN
// checkpoints (the optimizer's exact state, the epoch's data order, the random state and the counters), one written
// after every epoch and one when `stop` ends the run early, the newest kept; a run given a directory
// that holds one continues from it, and ends with the weights an uninterrupted run would have. Empty:
// nothing kept. `after_step(steps)`: called after each optimizer step (tests stop a run through it).
struct SftRunOptions {
    std::string checkpoints;
    std::function<void(int64_t steps)> after_step;
    // Pairs never trained on: their loss after every epoch goes into SftResult::held_out_loss (and
    // the checkpoints, so that a resumed run keeps the curve). Measuring it changes no weight.
    std::vector<SftPair> held_out;
};

// What sft.deterministic needs of the process before cuBLAS makes its first handle and before other
// threads run (setenv is not safe beside them): CUBLAS_WORKSPACE_CONFIG=:4096:8, unless the environment
// sets one (PyTorch's strict mode then names the variable if its value is not a deterministic one). A
// no-op without sft.deterministic. run_sft and the trainer (for its warm start) call it first thing;
// sft_train calls it too, for callers that did not.
void prepare_deterministic_sft(const SftSpec& s);

// Epochs of AdamW (sft.lr, or the policy's, on sft.schedule) over the policy's trainable parameters, loss on the
// completion tokens. The policy's own optimizer is left untouched: Policy::reset_optimizer() before
// training the policy further with it. Throws std::runtime_error when a checkpoint to resume from is
// of another number of pairs.
SftResult sft_train(Policy& policy, const std::vector<SftPair>& pairs, const TrainConfig& cfg,
                    const std::atomic<bool>& stop, const SftRunOptions& run = {});

// `kernelzero sft`: the Coder of cfg trained, its checkpoints in sft.out/checkpoints while it runs,
// and the result written to sft.out (full fine-tuning: sft.out/model, renamed into place complete;
// LoRA: sft.out/adapter) once every epoch is done; then the checkpoints go. A stopped run writes no
// result: `resume` continues it. sft.out/sft.json records what a resume must match (seed, backend,
// [coder], [sft] but its out, and a digest of the tokenised pairs); sft.out/sft.lock is held while it
// runs. Throws std::runtime_error naming the cause: a malformed pair, a missing sft.data / sft.tasks /
// sft.out, sft.out in use by another run, an interrupted run without `resume`, `resume` with nothing
// to resume, a resume with another configuration or other pairs.
SftResult run_sft(const TrainConfig& cfg, const std::atomic<bool>& stop, bool resume = false);

}  // namespace kz
