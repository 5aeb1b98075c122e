// Next-token selection on the device: greedy, or temperature / top-k / top-p sampling from a seeded
// generator. Shapes: B rows, V vocabulary.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace kz {

struct SamplingParams {
    double temperature = 1.0;  // 0: greedy
    double top_p = 1.0;        // nucleus mass kept, (0, 1]
    int64_t top_k = 0;         // 0: no limit
    uint64_t seed = 0;
    void validate() const;  // throws std::runtime_error naming the bad value
};

struct Sampled {
    torch::Tensor tokens;  // (B) int64
    // (B) fp32: log-probability of each chosen token under softmax(logits / temperature) over the
    // whole vocabulary (temperature 1 when greedy): the quantity the trainer recomputes, so that
    // importance ratios start at exactly 1; top-k / top-p truncation changes which tokens can be
    // drawn, not this value.
    torch::Tensor logprobs;
};

// `logits` (B, V) in any float dtype; computed in fp32. Plain sampling (temperature > 0, no top-k
// or top-p) of bf16 / fp16 logits on a GPU takes the engine's one-pass kernel (fused::sample): the
// same distribution as ATen's path, another random stream for the same seed.
Sampled sample(const torch::Tensor& logits, const SamplingParams& p, at::Generator& gen);

// A generator for `device`, seeded.
at::Generator make_generator(torch::Device device, uint64_t seed);

}  // namespace kz
