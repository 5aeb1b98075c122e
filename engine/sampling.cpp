#include "engine/sampling.h"

#include <stdexcept>
#include <string>

#include "engine/fused_ops.h"

namespace kz {

void SamplingParams::validate() const {
    if (!(temperature >= 0.0)) throw std::runtime_error("temperature must be >= 0, got " + std::to_string(temperature));
    if (!(top_p > 0.0 && top_p <= 1.0))
        throw std::runtime_error("top_p must be in (0, 1], got " + std::to_string(top_p));
    if (top_k < 0) throw std::runtime_error("top_k must be >= 0, got " + std::to_string(top_k));
}

at::Generator make_generator(torch::Device device, uint64_t seed) {
    at::Generator g = at::globalContext().defaultGenerator(device).clone();
    g.set_current_seed(seed);
    return g;
}

Sampled sample(const torch::Tensor& logits, const SamplingParams& p, at::Generator& gen) {
    const int64_t V = logits.size(-1);
    // Plain sampling from the whole softmax (what rollouts use) on the engine's kernel, in one pass
    // over the logits; the same distribution, another random stream than ATen's below.
    if (p.temperature > 0.0 && (p.top_k == 0 || p.top_k >= V) && p.top_p >= 1.0 && logits.dim() == 2 &&
        fused::elementwise_usable(logits) && gen.device().is_cuda()) {
        auto [tokens, lp] = fused::sample(logits, p.temperature, gen);
        return {tokens, lp};
    }
    auto x = logits.to(torch::kFloat32);  // (B, V)
    if (p.temperature == 0.0) {
        auto tokens = x.argmax(-1);
        auto lp = torch::log_softmax(x, -1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1);
        return {tokens, lp};
    }
    x = x / p.temperature;
    auto logp = torch::log_softmax(x, -1);  // (B, V)
    auto filtered = x;
    if (p.top_k > 0 && p.top_k < V) {
        auto kth = std::get<0>(x.topk(p.top_k, -1)).select(-1, p.top_k - 1).unsqueeze(-1);  // (B, 1)
        filtered = filtered.masked_fill(filtered < kth, -std::numeric_limits<float>::infinity());
    }
    if (p.top_p < 1.0) {
        // Keep the smallest set of most likely tokens whose mass reaches top_p (always the first one).
        auto [sorted, order] = filtered.sort(-1, /*descending=*/true);
        auto probs = torch::softmax(sorted, -1);
        auto before = probs.cumsum(-1) - probs;  // mass of the strictly more likely tokens
        auto drop_sorted = before >= p.top_p;
        auto drop = torch::zeros_like(drop_sorted).scatter(-1, order, drop_sorted);
        filtered = filtered.masked_fill(drop, -std::numeric_limits<float>::infinity());
    }
    auto probs = filtered.is_same(x) ? logp.exp() : torch::softmax(filtered, -1);
    auto tokens = probs.multinomial(1, false, gen).squeeze(-1);  // (B)
    return {tokens, logp.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)};
}

}  // namespace kz
