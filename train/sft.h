// Supervised fine-tuning (design 6.6): the Coder on (prompt, completion) pairs from JSONL, loss on the
// completion tokens only (the stop token included, so the model learns to end), with the engine's
// LoRA or full fine-tuning, AdamW and chunked log-probs. Each JSONL line:
//   {"prompt": "text" | [{"role": ..., "content": ...}, ...], "completion": "text"}
// A string prompt is one user message; both are rendered with the model's chat template. The result
// is a PEFT adapter (sft.out/adapter) that `train` starts from with coder.adapter, or, for full
// fine-tuning, a Hugging Face directory (sft.out/model).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "train/train_config.h"

namespace kz {

struct SftResult {
    int64_t pairs = 0, skipped = 0, steps = 0, tokens = 0;
    double first_loss = 0, last_loss = 0, seconds = 0;
    std::string out;
    nlohmann::json to_json() const;
};

// Throws std::runtime_error naming the file and line of a malformed pair, or a missing sft.data / out.
SftResult run_sft(const TrainConfig& cfg, const std::atomic<bool>& stop);

}  // namespace kz
