// Training the policy: completion-token log-probs in chunks (the (B, T, V) logits never exist at once,
// in the forward or the backward pass), a loss interface over per-token log-probs and weights (the RL
// losses plug in here), AdamW with fp32 state (fp32 master weights for a bf16 model), gradient
// clipping and accumulation. Shapes: B sequences, T tokens, C hidden, V vocabulary.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "engine/model.h"

namespace kz {

struct TrainBatch {
    torch::Tensor ids;      // (B, T) int64: prompt + completion, right-padded
    torch::Tensor valid;    // (B, T) bool: real tokens, then padding (right padding)
    torch::Tensor weights;  // (B, T) fp32: weight of predicting ids[:, t] (0 on prompt, padding and t = 0)
};

// Which positions sequence_logprobs scores. The vocabulary projection is most of a small model's
// work; supervised fine-tuning, whose loss reads only weighted positions, skips the prompt and padding.
enum class ScoredRows {
    all,       // every position
    weighted,  // positions with a nonzero weight; the others are 0 (and take no gradient)
};

// log p(ids[b, t] | ids[b, < t]) for every t >= 1: (B, T-1) fp32, differentiable in the trainable
// parameters. Logits are computed `chunk` positions at a time and recomputed in the backward pass.
// p is softmax(logits / temperature): the distribution a policy sampled at that temperature drew
// from (Sampled::logprobs), so that RL trains the policy it samples. Throws for temperature <= 0.
torch::Tensor sequence_logprobs(const Model& model, const TrainBatch& batch, int64_t chunk = 1024,
                                ScoredRows rows = ScoredRows::all, double temperature = 1.0);

// log_softmax(hidden W^T)[target] per row, `chunk` rows at a time, the backward recomputing each
// chunk's logits: hidden (N, C), weight (V, C), targets (N) int64 -> (N) fp32. Differentiable in
// hidden and weight; under NoGradGuard it is plain scoring.
torch::Tensor chunked_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                               int64_t chunk = 1024);

// A loss over the (B, T-1) log-probs of a batch; the RL module's losses have this form.
using LossFn = std::function<torch::Tensor(const torch::Tensor& logprobs, const TrainBatch& batch)>;
// -sum(w * logp) / (number of tokens with w != 0): supervised fine-tuning, and REINFORCE-style
// weighting by advantages, with token-level normalisation.
torch::Tensor weighted_nll(const torch::Tensor& logprobs, const TrainBatch& batch);

struct OptimConfig {
    double lr = 1e-5, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
    double max_grad_norm = 1.0;  // <= 0: no clipping
    // Step k (from 0) of the first warmup_steps takes lr * (k + 1) / warmup_steps, the rest lr: a
    // policy's first updates from a fresh AdamW are its largest (each moves every weight by ~lr). 0:
    // none. A caller with its own schedule (set_lr before each step) leaves it at 0.
    int64_t warmup_steps = 0;
};

// AdamW over named parameters (LoRA adapters, or every base weight for full fine-tuning). A parameter
// that is not fp32 is trained through an fp32 master copy, written back after each step.
class PolicyOptimizer {
public:
    PolicyOptimizer(std::vector<std::pair<std::string, torch::Tensor>> params, OptimConfig cfg);
    // Clips the accumulated gradients to max_grad_norm, takes one AdamW step, zeroes the gradients.
    // Returns the gradient norm before clipping.
    double step();
    void zero_grad();
    // The learning rate of the next steps (a schedule sets it before each step).
    void set_lr(double lr);
    const std::vector<std::pair<std::string, torch::Tensor>>& params() const { return params_; }
    int64_t steps() const { return steps_; }
    // The gradient norm AdamW's steps are divided by: the root of its bias-corrected second moments
    // summed over every parameter (0 before the first step). Under one gradient g it is |g|; a step
    // whose gradient was clipped far above the usual norms keeps it high for ~1 / (1 - beta2) steps,
    // and every step meanwhile moves the weights that much less than lr.
    double gradient_scale() const;

    // Exact resume: the fp32 master weights, AdamW's moments and step counts, and this object's step
    // count, in one file written atomically. load_state() needs an optimizer built over the same
    // parameter names (in the same order) and overwrites the parameters with the saved masters.
    void save_state(const std::string& path) const;
    void load_state(const std::string& path);

private:
    std::vector<std::pair<std::string, torch::Tensor>> params_;
    std::vector<torch::Tensor> masters_;  // what AdamW updates (the parameter itself when fp32)
    std::unique_ptr<torch::optim::AdamW> adam_;
    OptimConfig cfg_;
    int64_t steps_ = 0;
};

// Marks what full fine-tuning trains (every base weight) and returns it by name.
std::vector<std::pair<std::string, torch::Tensor>> full_parameters(Model& model);

// Forward + backward of one micro-batch: loss_fn(sequence_logprobs) / accumulation, so that N
// micro-batches followed by PolicyOptimizer::step() equal one batch of N times the size.
double accumulate(const Model& model, const TrainBatch& batch, const LossFn& loss_fn, int64_t accumulation = 1,
                  int64_t chunk = 1024, ScoredRows rows = ScoredRows::all, double temperature = 1.0);

}  // namespace kz
