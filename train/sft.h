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
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "train/train_config.h"

namespace kz {

struct SftResult {
    int64_t pairs = 0, skipped = 0, steps = 0, tokens = 0;
    double first_loss = 0, last_loss = 0, seconds = 0;
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

// The learning rate of step `step` (0-based) of `total`: sft.warmup_steps of linear warm-up from 0
// to `base`, then `base` (schedule "constant") or a cosine from `base` to base / 10 ("cosine").
double sft_lr(const SftSpec& s, double base, int64_t step, int64_t total);

// Epochs of AdamW (sft.lr, or the policy's, on sft.schedule) over the policy's trainable parameters, loss on the
// completion tokens. The policy's own optimizer is left untouched: Policy::reset_optimizer() before
// training the policy further with it.
SftResult sft_train(Policy& policy, const std::vector<SftPair>& pairs, const TrainConfig& cfg,
                    const std::atomic<bool>& stop);

// `kernelzero sft`: the Coder of cfg, trained and written to sft.out. Throws std::runtime_error naming
// a malformed pair, or a missing sft.data / sft.tasks / sft.out.
SftResult run_sft(const TrainConfig& cfg, const std::atomic<bool>& stop);

}  // namespace kz
