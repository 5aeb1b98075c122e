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

// Per-layer key/value storage for generation, allocated once for B rows and S slots. Row b's tokens
// fill slots 0, 1, .. in order (its prompt, then what it generates), so rows of different lengths
// need no padding in front and a decode step attends a prefix of each row.
struct KVCache {
    std::vector<torch::Tensor> kv;  // per layer (B, S, 2G, D): keys in [:, :, :G], values in [:, :, G:]
    int64_t capacity() const { return kv.empty() ? 0 : kv[0].size(1); }
};

// Where one decode step (T = 1) appends to the cache and what it attends: row b writes its token at
// slot lens[b] (also its position) and attends slots 0..lens[b]. Built inside the step from the
// device tensor `lens`, so that a CUDA graph of the step stays valid as the rows grow.
struct DecodeSlots {
    torch::Tensor lens;  // (B) int64
    // For ATen's kernels (the engine's own CUDA kernels need only lens):
    torch::Tensor write;  // (B) int64: b * S + lens[b], a row of the cache viewed as (B*S, 2G, D)
    torch::Tensor mask;   // (B, 1, 1, S) bool, for SDPA

    // `row_base` (B) int64 = b * S.
    static DecodeSlots make(const torch::Tensor& lens, const torch::Tensor& row_base, int64_t S, bool fused);
};

// RoPE tables for positions (B, T): cos and sin with its first half negated, (B, T, 1, D) in the
// model's dtype (computed in fp32, as transformers builds them).
struct Rope {
    torch::Tensor cos, sin_signed;
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
    // positions. Attention is causal over the T tokens, right for rows whose padding comes after
    // their tokens (padding positions compute values nobody reads). With a cache and no `decode`
    // (prefill): the T tokens' keys and values also fill slots 0..T-1 of every row. With `decode`
    // (T = 1): each row appends at its own slot and attends its cached prefix (DecodeSlots).
    torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& positions, KVCache* cache = nullptr,
                          const DecodeSlots* decode = nullptr) const;
    // Whether generation (a forward with a cache) runs on the engine's own CUDA kernels
    // (engine/fused_ops.h): a GPU, 16-bit, a build with them, and use_fused_kernels.
    bool fused_generation() const;
    // (..., C) -> (..., V) logits in the model's dtype.
    torch::Tensor logits(const torch::Tensor& hidden) const;
    const torch::Tensor& lm_head() const;  // (V, C): the embedding when tied

    // Every base parameter by its Hugging Face name (shared storage: editing one edits the model).
    std::vector<std::pair<std::string, torch::Tensor>> named_parameters() const;
    // Every linear layer by its Hugging Face module path ("model.layers.0.self_attn.q_proj", ...),
    // for LoRA to attach to and merge into.
    std::vector<std::pair<std::string, Linear*>> linears();

    // One decoder layer: (B, T, C) -> (B, T, C). Public for the recomputation wrapper.
    torch::Tensor layer_forward(int64_t layer, const torch::Tensor& h, const Rope& rope, KVCache* cache,
                                const DecodeSlots* decode) const;

    bool lora_enabled = true;
    // LoRA products in the activations' dtype (bf16 on a GPU), the adapters cast to it, as autocast
    // computes them (Hugging Face Trainer with bf16, verl's mixed precision); off: in the adapters'
    // dtype (fp32), as peft computes them without autocast. On is faster; the adapters' gradients
    // then come through bf16 products.
    bool lora_in_base_dtype = false;
    // Off: ATen's kernels only (tests compare the two). On: generation on a GPU in bf16 / fp16 runs
    // the engine's fused kernels, and training their SiLU x up (forward and backward).
    bool use_fused_kernels = true;
    // While training (grad mode on, no cache): keep only each layer's input and recompute the layer
    // in the backward pass (activation memory of one layer instead of all).
    bool recompute_layers = false;

private:
    Model(ModelConfig cfg, torch::Device device, torch::ScalarType dtype);
    torch::Tensor attention(const Layer& l, const torch::Tensor& x, const Rope& rope, KVCache* cache, int64_t layer,
                            const DecodeSlots* decode) const;
    Rope rope(const torch::Tensor& positions) const;
    // qkv (B, T, H+2G, D) with q and k RMS-normalised per head (Qwen3); qkv itself otherwise.
    torch::Tensor qk_normed(const Layer& l, const torch::Tensor& qkv) const;
    // forward() with a cache on the engine's CUDA kernels: residual adds fused into the norms, RoPE
    // into the cache write, SiLU into the product, decode attention split over key chunks.
    torch::Tensor forward_fused(const torch::Tensor& ids, const torch::Tensor& positions, KVCache& cache,
                                const DecodeSlots* decode) const;
    // q|k|v (B, T, (H+2G)*D) and gate|up (B, T, 2I): one matrix multiply while the base is frozen.
    torch::Tensor project_qkv(const Layer& l, const torch::Tensor& x, bool with_bias = true) const;
    torch::Tensor project_gate_up(const Layer& l, const torch::Tensor& x) const;
    torch::Tensor linear(const Linear& l, const torch::Tensor& x) const;
    // x through `weight` (the layers' frozen weights stacked, or one layer's) plus the LoRA update of
    // each layer whose adapter is active, in that layer's columns (engine/lora_projection.h).
    torch::Tensor project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                          std::initializer_list<const Linear*> layers) const;
    void fuse_projections();

    ModelConfig cfg_;
    torch::Device device_;
    torch::ScalarType dtype_;
    torch::Tensor embed_;  // (V, C)
    torch::Tensor final_norm_;
    torch::Tensor lm_head_;   // (V, C); same tensor as embed_ when tied
    torch::Tensor inv_freq_;  // (D/2) fp32
    std::vector<Layer> layers_;
};

// RMSNorm as transformers computes it: in fp32, cast back, then scaled.
torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps);

// x * cos + rotate_half(x) * sin, in place on x (B, T, N, D) (a view is fine); three kernels
// instead of rotate_half's five, since rotate_half(x) * sin = swap_halves(x) * sin_signed.
void apply_rope_(torch::Tensor x, const Rope& rope);

// "float32" | "bfloat16" | "float16", or "auto": bf16 on a GPU, fp32 on the CPU.
torch::ScalarType dtype_from_name(const std::string& name, torch::Device device = torch::kCPU);
// "cpu" | "cuda" | "cuda:N", or "auto": the first GPU when one is visible. Throws when a GPU is named
// and none is visible.
torch::Device device_from_name(const std::string& name);

}  // namespace kz
