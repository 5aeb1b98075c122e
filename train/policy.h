// A trainable policy of the trainer (the Coder or the Proposer): tokenizer, chat format, stop tokens,
// the model on its device with LoRA adapters (or every base weight trainable), and its optimizer.
// Checkpoints hold the optimizer's state (fp32 masters of every trainable parameter, AdamW moments,
// step count: an exact resume) and, for LoRA, a PEFT adapter directory that peft loads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "bench/bench_run.h"
#include "engine/chat.h"
#include "engine/generate.h"
#include "engine/lora.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "engine/training.h"
#include "train/train_config.h"

namespace kz {

class Policy {
public:
    // Loads `model_dir` (a Hugging Face directory; "init:" models are materialised by the caller) on
    // `device`, attaches fresh LoRA adapters seeded by `seed` (or, with spec.adapter, loads that
    // adapter), and builds the optimizer.
    Policy(std::string name, const PolicySpec& spec, const std::string& model_dir, const std::string& device,
           uint64_t seed);

    const std::string& name() const { return name_; }
    Model& model() { return model_; }
    const Tokenizer& tokenizer() const { return tok_; }
    const std::vector<int64_t>& stops() const { return stops_; }
    PolicyOptimizer& optimizer() { return *opt_; }
    // A fresh optimizer over the current weights: after they were changed outside it (SFT with its
    // own optimizer), whose fp32 masters of a bf16 model would otherwise write the old weights back.
    void reset_optimizer();
    std::vector<int64_t> encode_chat(const std::vector<ChatMessage>& messages) const;

    // DIR/optimizer.pt and, for LoRA, DIR/adapter/ (PEFT format).
    void save(const std::string& dir) const;
    // Restores the trainable parameters and the optimizer from save()'s directory.
    void restore(const std::string& dir);

private:
    std::string name_, model_dir_;
    PolicySpec spec_;
    Tokenizer tok_;
    Model model_;
    ChatFormat chat_;
    std::vector<int64_t> stops_;
    LoraConfig lora_;
    OptimConfig optim_;
    std::unique_ptr<PolicyOptimizer> opt_;
};

// "init:<preset>" specs are written once to `dir` (a random Qwen2 of that shape, the spec's tokenizer,
// seeded); a directory spec is returned as is. Returns the model directory to load.
std::string materialise_model(const PolicySpec& spec, const std::string& dir, uint64_t seed);

// Completions from a model for bench's run loop: each conversation rendered with the chat template,
// its n samples decoded in one batch with the other conversations of the call. Borrows everything.
class PolicySource : public CompletionSource {
public:
    PolicySource(Model& model, const Tokenizer& tok, std::vector<int64_t> stops, SamplingParams sampling,
                 int64_t max_new_tokens, int batch, std::string describe);
    std::vector<std::vector<std::string>> complete(const std::vector<std::vector<ChatMessage>>& prompts,
                                                   int n) override;
    std::string describe() const override { return describe_; }
    int batch_prompts() const override { return batch_; }

private:
    Model& model_;
    const Tokenizer& tok_;
    ChatFormat chat_;
    std::vector<int64_t> stops_;
    SamplingParams sampling_;
    int64_t max_new_tokens_;
    int batch_;
    uint64_t calls_ = 0;
    std::string describe_;
};

}  // namespace kz
