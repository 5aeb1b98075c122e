// Hugging Face model directories out: config.json, model.safetensors, generation_config.json and
// the tokenizer files, which transformers loads unchanged. Every file is written atomically.
#pragma once

#include <string>

#include "engine/model.h"

namespace kz {

// Writes the base weights of `model` (merged LoRA is the caller's business) in `dtype` to `out_dir`;
// copies tokenizer.json and tokenizer_config.json from `tokenizer_dir` when given.
void save_hf_model(const Model& model, const std::string& out_dir, torch::ScalarType dtype,
                   const std::string& tokenizer_dir = "");

}  // namespace kz
