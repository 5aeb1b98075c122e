// Batched generation with a preallocated KV cache: prompts of different lengths are right-padded
// into one batch, prefilled in one call, then decoded one token per step for every row (each at its
// own cache slot) until each row meets a stop token or max_new_tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/decode_graph.h"
#include "engine/model.h"
#include "engine/sampling.h"

namespace kz {

struct GenerateRequest {
    std::vector<std::vector<int64_t>> prompts;  // token ids, each non-empty
    int64_t max_new_tokens = 256;
    std::vector<int64_t> stop_ids;  // generation of a row ends after one of these
    SamplingParams sampling;
    bool cuda_graph = true;  // replay the decode step as a CUDA graph (GPU only)
};

struct Completion {
    std::vector<int64_t> tokens;  // completion only; ends with the stop token when one was met
    std::vector<float> logprobs;  // one per token (see Sampled::logprobs)
    bool stopped = false;         // true: a stop token; false: max_new_tokens
    // The tokens of the completion's text: `tokens` without the stop token.
    std::vector<int64_t> text_tokens() const {
        return stopped ? std::vector<int64_t>(tokens.begin(), tokens.end() - 1) : tokens;
    }
};

struct GenerateStats {
    int64_t prompt_tokens = 0, new_tokens = 0, steps = 0;
    double prefill_s = 0, decode_s = 0;
};

// Called after every decode step with the row and the token it received (only rows still running).
using TokenCallback = std::function<void(size_t row, int64_t token)>;

// The batch of one generation: right-padded prompts (row b's prompt in slots 0..L_b-1), a KV cache of
// capacity P + max_new_tokens (P the longest prompt), and each row's length, which is also the slot
// and the position of its next token. generate() drives it; tests drive it with chosen tokens
// (teacher forcing through the cache).
class BatchDecoder {
public:
    // Throws std::runtime_error for an empty prompt, an id outside the vocabulary or a capacity
    // beyond max_position_embeddings.
    BatchDecoder(const Model& model, const std::vector<std::vector<int64_t>>& prompts, int64_t max_new_tokens,
                 bool cuda_graph = true);
    // Runs the prompts; returns the logits after each prompt's last token, (B, V), or with
    // `all_positions` those of every slot, (B, P, V) (slots past a prompt hold garbage). Call once,
    // first.
    torch::Tensor prefill(bool all_positions = false);
    // Appends one token per row (B) int64 on the model's device; returns the next logits (B, V).
    torch::Tensor step(const torch::Tensor& tokens);
    int64_t batch() const { return B_; }
    int64_t prompt_slots() const { return P_; }
    int64_t steps_left() const { return S_ - next_slot_; }

private:
    // One decode step over the persistent state: reads tokens_, writes the cache and lens_ in place
    // (what a CUDA graph can replay). Returns the logits (B, V).
    torch::Tensor run_step();

    const Model& model_;
    int64_t B_, P_, S_, next_slot_ = 0;  // next_slot_: the longest row's length
    torch::Tensor ids_, last_;           // (B, P) right-padded prompts; (B) b * P + L_b - 1
    torch::Tensor tokens_, lens_;        // (B) next tokens; (B) tokens cached per row
    torch::Tensor row_base_;             // (B) b * S, see DecodeSlots
    KVCache cache_;
    std::unique_ptr<DecodeGraph> graph_;  // GPU only
};

// Throws std::runtime_error for an empty prompt, an id outside the vocabulary, a prompt + budget
// beyond max_position_embeddings, or bad sampling parameters.
std::vector<Completion> generate(const Model& model, const GenerateRequest& req, const TokenCallback& on_token = {},
                                 GenerateStats* stats = nullptr);

// Log-probabilities (fp32, temperature 1) of `completion` given `prompt`, one per completion token.
std::vector<float> score(const Model& model, const std::vector<int64_t>& prompt,
                         const std::vector<int64_t>& completion);

}  // namespace kz
