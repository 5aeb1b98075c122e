// Qwen2 / Qwen2.5 / Qwen3 decoder-only transformers in libtorch, computed exactly as Hugging Face
// transformers computes them (RMSNorm in fp32, RoPE tables in fp32, SDPA attention with grouped KV
// heads). Weights are plain tensors, so that generation, training, LoRA and recomputation all see
// the same parameters; one instance serves sampling and training.
//
// Shapes: B batch, T tokens in this call, S key/value positions (cache capacity or T), C hidden size,
// H query heads, G key/value heads, D head_dim, V vocabulary, I intermediate size.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "engine/config.h"

namespace kz {

// y = x W^T + b, plus a LoRA update (x A^T B^T) * alpha / r while `lora_enabled` on the model.
struct Linear {
    torch::Tensor weight;  // (out, in)
    torch::Tensor bias;    // (out) or undefined
    torch::Tensor lora_a;  // (r, in) or undefined
    torch::Tensor lora_b;  // (out, r) or undefined
    double lora_scale = 0.0;
};

struct Layer {
    torch::Tensor input_norm, post_attn_norm;  // (C)
    Linear q, k, v, o;                         // q: (H*D, C) k, v: (G*D, C) o: (C, H*D)
    torch::Tensor q_norm, k_norm;              // (D), Qwen3 only
    Linear gate, up, down;                     // gate, up: (I, C) down: (C, I)
    // One storage for q|k|v ((H+2G)*D, C) and one for gate|up (2I, C): the weights above are views
    // into them, so one matrix multiply serves three (two) projections while the base weights are
    // frozen; a full fine-tune, whose views are trained, uses the views one by one.
    torch::Tensor qkv_weight, qkv_bias, gate_up_weight;
};

// Per-layer key/value storage for generation, allocated once for B rows and S positions.
struct KVCache {
    std::vector<torch::Tensor> k, v;  // per layer (B, G, S, D)
    int64_t capacity() const { return k.empty() ? 0 : k[0].size(2); }
};

class Model {
public:
    // Loads config.json and the safetensors weights of a Hugging Face directory onto `device` in
    // `dtype`. Throws std::runtime_error naming a missing tensor or one of the wrong shape.
    static Model load(const std::string& dir, torch::Device device, torch::ScalarType dtype);
    // A randomly initialised model (normal(0, initializer_range) weights, zero biases, unit norms),
    // as transformers initialises one; deterministic for a seed.
    static Model random(const ModelConfig& cfg, torch::Device device, torch::ScalarType dtype, uint64_t seed);

    const ModelConfig& config() const { return cfg_; }
    torch::Device device() const { return device_; }
    torch::ScalarType dtype() const { return dtype_; }

    KVCache make_cache(int64_t batch, int64_t capacity) const;

    // Hidden states after the final norm, (B, T, C). `ids` (B, T) int64; `positions` (B, T) int64 RoPE
    // positions. With a cache: the T new tokens are written at cache slots `slots` (T) int64, and
    // attention covers the whole cache under `mask`. Without: attention covers the T tokens.
    // `mask` (B, 1, T, S) bool, true where a query may attend a key; undefined (no cache only): causal
    // over the T tokens, right for rows whose padding comes after their tokens.
    torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& positions, const torch::Tensor& mask,
                          KVCache* cache = nullptr, const torch::Tensor& slots = {}) const;
    // (..., C) -> (..., V) logits in the model's dtype.
    torch::Tensor logits(const torch::Tensor& hidden) const;
    const torch::Tensor& lm_head() const;  // (V, C): the embedding when tied

    // Every base parameter by its Hugging Face name (shared storage: editing one edits the model).
    std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
    // Every linear layer by its Hugging Face module path ("model.layers.0.self_attn.q_proj", ...),
    // for LoRA to attach to and merge into.
    std::vector<std::pair<std::string, Linear*>> linears();

    // One decoder layer: (B, T, C) -> (B, T, C). Public for the recomputation wrapper.
    torch::Tensor layer_forward(int64_t layer, const torch::Tensor& h, const torch::Tensor& cos,
                                const torch::Tensor& sin, const torch::Tensor& mask, KVCache* cache,
                                const torch::Tensor& slots) const;

    bool lora_enabled = true;
    // While training (grad mode on, no cache): keep only each layer's input and recompute the layer
    // in the backward pass (activation memory of one layer instead of all).
    bool recompute_layers = false;

private:
    Model(ModelConfig cfg, torch::Device device, torch::ScalarType dtype);
    torch::Tensor attention(const Layer& l, const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                            const torch::Tensor& mask, KVCache* cache, int64_t layer, const torch::Tensor& slots) const;
    torch::Tensor linear(const Linear& l, const torch::Tensor& x) const;
    // y + the LoRA update of `l` for input x (y itself when no adapter is active).
    torch::Tensor add_lora(const Linear& l, const torch::Tensor& x, const torch::Tensor& y) const;
    void fuse_projections();

    ModelConfig cfg_;
    torch::Device device_;
    torch::ScalarType dtype_;
    torch::Tensor embed_;     // (V, C)
    torch::Tensor final_norm_;
    torch::Tensor lm_head_;   // (V, C); same tensor as embed_ when tied
    torch::Tensor inv_freq_;  // (D/2) fp32
    std::vector<Layer> layers_;
};

// RMSNorm as transformers computes it: in fp32, cast back, then scaled.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// Attention mask (B, 1, T, S) bool for queries at cache slots `slots` (T) int64 over S key slots:
// a query attends every valid key at or before its own slot (causal), and always itself, so that a
// padding query (whose own key is not valid) has no empty row (an all-masked row would be NaN).
// `key_valid` (B, S) bool marks the slots holding real tokens.
torch::Tensor attention_mask(const torch::Tensor& key_valid, const torch::Tensor& slots);

// "float32" | "bfloat16" | "float16", or "auto": bf16 on a GPU, fp32 on the CPU.
torch::ScalarType dtype_from_name(const std::string& name, torch::Device device = torch::kCPU);
// "cpu" | "cuda" | "cuda:N", or "auto": the first GPU when one is visible. Throws when a GPU is named
// and none is visible.
torch::Device device_from_name(const std::string& name);

}  // namespace kz
