#include "engine/model.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "engine/fused_ops.h"
#include "engine/lora_projection.h"
#include "engine/safetensors.h"
#include "engine/tensor_io.h"
#include "engine/sampling.h"

namespace kz {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

// Activation recomputation of one decoder layer (what torch.utils.checkpoint does, reentrant
// form): forward runs the layer without recording, keeping only its input; backward runs it again
// with recording and back-propagates through that, which also accumulates the parameters' grads.
struct RecomputedLayer : public torch::autograd::Function<RecomputedLayer> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor h, int64_t model_ptr,
                                 int64_t layer, torch::Tensor cos, torch::Tensor sin_signed) {
        ctx->saved_data["model"] = model_ptr;
        ctx->saved_data["layer"] = layer;
        ctx->save_for_backward({h, cos, sin_signed});
        torch::NoGradGuard no_grad;
        const auto* m = reinterpret_cast<const Model*>(model_ptr);
        return m->layer_forward(layer, h, Rope{cos, sin_signed}, nullptr, nullptr);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad_out) {
        auto saved = ctx->get_saved_variables();
        const auto* m = reinterpret_cast<const Model*>(ctx->saved_data["model"].toInt());
        const int64_t layer = ctx->saved_data["layer"].toInt();
        auto h = saved[0].detach().requires_grad_(true);
        {
            torch::AutoGradMode enable(true);
            auto out = m->layer_forward(layer, h, Rope{saved[1], saved[2]}, nullptr, nullptr);
            torch::autograd::backward({out}, {grad_out[0]});
        }
        return {h.grad(), torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

bool lora_active(const Model& m, const Linear& l) { return m.lora_enabled && l.lora_a.defined(); }

// silu(gate) * up of gu (..., 2I) -> (..., I), rounded after each op as transformers computes it.
// One autograd node: composed of ATen ops, the two halves' gradients would each be a zero fill of
// the full (..., 2I) plus a copy, then added; here they are written into one (..., 2I) gradient.
// With `fused` (a GPU, bf16 / fp16), one kernel each way (engine/cuda_kernels.cu).
struct SiluMul : public torch::autograd::Function<SiluMul> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor gu, bool fused) {
        ctx->save_for_backward({gu});
        ctx->saved_data["fused"] = fused;
        if (fused) return fused::silu_mul(gu);
        const int64_t I = gu.size(-1) / 2;
        return torch::silu(gu.narrow(-1, 0, I)) * gu.narrow(-1, I, I);
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad_out) {
        const auto gu = ctx->get_saved_variables()[0];
        if (ctx->saved_data["fused"].toBool()) return {fused::silu_mul_backward(grad_out[0], gu), torch::Tensor()};
        const int64_t I = gu.size(-1) / 2;
        const auto gate = gu.narrow(-1, 0, I), up = gu.narrow(-1, I, I);
        const auto& grad = grad_out[0];                                   // (..., I)
        auto d_gu = torch::empty_like(gu, at::MemoryFormat::Contiguous);  // (..., 2I)
        auto d_gate = d_gu.narrow(-1, 0, I), d_up = d_gu.narrow(-1, I, I);
        at::mul_out(d_up, grad, torch::silu(gate));
        at::silu_backward_out(d_gate, grad * up, gate);
        return {d_gu, torch::Tensor()};
    }
};

// Causal attention over the T tokens: q (B, T, H, D), k and v (B, T, G, D) (views are fine) ->
// (B, T, H, D). Causal without a mask lets SDPA pick its fused (flash / memory-efficient) kernels
// instead of materialising (B, H, T, T) scores.
torch::Tensor causal_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v, double scale) {
    return at::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), {}, 0.0, true,
                                            scale,
                                            /*enable_gqa=*/k.size(2) != q.size(2))
        .transpose(1, 2);
}

}  // namespace

torch::Device device_from_name(const std::string& name) {
    if (name == "auto")
        return torch::cuda::is_available() ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
    torch::Device d(name);
    if (d.is_cuda() && !torch::cuda::is_available()) throw std::runtime_error("device " + name + ": no GPU is visible");
    return d;
}

torch::ScalarType dtype_from_name(const std::string& name, torch::Device device) {
    if (name == "auto") return device.is_cuda() ? torch::kBFloat16 : torch::kFloat32;
    if (name == "float32" || name == "fp32") return torch::kFloat32;
    if (name == "bfloat16" || name == "bf16") return torch::kBFloat16;
    if (name == "float16" || name == "fp16") return torch::kFloat16;
    throw std::runtime_error("unsupported dtype \"" + name + "\" (float32, bfloat16, float16)");
}

torch::Tensor rms_norm(const torch::Tensor& x, const torch::Tensor& weight, double eps) {
    // ATen's fused kernel (one launch on CUDA instead of seven) computes in fp32 and rounds once;
    // transformers rounds the normalised value before scaling it: equal in fp32, within one bf16 ulp.
    return at::rms_norm(x, {x.size(-1)}, weight, eps);
}

void apply_rope_(torch::Tensor x, const Rope& rope) {
    const int64_t D = x.size(-1);
    auto swapped = x.unflatten(-1, {2, D / 2}).flip(-2).flatten(-2);  // (x2, x1): a copy, taken before x changes
    x.mul_(rope.cos).addcmul_(swapped, rope.sin_signed);
}

DecodeSlots DecodeSlots::make(const torch::Tensor& lens, const torch::Tensor& row_base, int64_t S, bool fused) {
    DecodeSlots d;
    d.lens = lens;
    if (!fused) {
        d.write = row_base + lens;
        d.mask = (torch::arange(S, lens.options()).view({1, S}) <= lens.view({-1, 1})).view({-1, 1, 1, S});
    }
    return d;
}

Model::Model(ModelConfig cfg, torch::Device device, torch::ScalarType dtype)
    : cfg_(std::move(cfg)), device_(device), dtype_(dtype) {
    const int64_t D = cfg_.head_dim;
    auto idx = torch::arange(0, D, 2, torch::TensorOptions().dtype(torch::kInt64)).to(torch::kFloat32);
    inv_freq_ = (1.0 / torch::pow(cfg_.rope_theta, idx / static_cast<double>(D))).to(device_);  // (D/2)
}

Model Model::load(const std::string& dir, torch::Device device, torch::ScalarType dtype) {
    ModelConfig cfg = ModelConfig::load(dir);
    Checkpoint ck(dir);
    Model m(cfg, device, dtype);
    auto get = [&](const std::string& name, std::vector<int64_t> shape) -> torch::Tensor {
        const TensorView& v = ck.at(name);
        if (v.shape != shape)
            throw std::runtime_error(dir + ": tensor " + name + " has shape " + shape_str(v.shape) + ", expected " +
                                     shape_str(shape));
        return to_tensor(v, device, dtype);
    };
    const int64_t C = cfg.hidden_size, H = cfg.num_heads, G = cfg.num_kv_heads, D = cfg.head_dim,
                  I = cfg.intermediate_size, V = cfg.vocab_size;
    m.embed_ = get("model.embed_tokens.weight", {V, C});
    m.final_norm_ = get("model.norm.weight", {C});
    if (cfg.tie_word_embeddings) {
        m.lm_head_ = m.embed_;
    } else {
        m.lm_head_ = get("lm_head.weight", {V, C});
    }
    for (int64_t i = 0; i < cfg.num_layers; ++i) {
        std::string p = "model.layers." + std::to_string(i) + ".";
        Layer l;
        l.input_norm = get(p + "input_layernorm.weight", {C});
        l.post_attn_norm = get(p + "post_attention_layernorm.weight", {C});
        l.q.weight = get(p + "self_attn.q_proj.weight", {H * D, C});
        l.k.weight = get(p + "self_attn.k_proj.weight", {G * D, C});
        l.v.weight = get(p + "self_attn.v_proj.weight", {G * D, C});
        l.o.weight = get(p + "self_attn.o_proj.weight", {C, H * D});
        if (cfg.qkv_bias) {
            l.q.bias = get(p + "self_attn.q_proj.bias", {H * D});
            l.k.bias = get(p + "self_attn.k_proj.bias", {G * D});
            l.v.bias = get(p + "self_attn.v_proj.bias", {G * D});
        }
        if (cfg.o_bias) l.o.bias = get(p + "self_attn.o_proj.bias", {C});
        if (cfg.qk_norm) {
            l.q_norm = get(p + "self_attn.q_norm.weight", {D});
            l.k_norm = get(p + "self_attn.k_norm.weight", {D});
        }
        l.gate.weight = get(p + "mlp.gate_proj.weight", {I, C});
        l.up.weight = get(p + "mlp.up_proj.weight", {I, C});
        l.down.weight = get(p + "mlp.down_proj.weight", {C, I});
        m.layers_.push_back(std::move(l));
    }
    m.fuse_projections();
    return m;
}

Model Model::random(const ModelConfig& cfg, torch::Device device, torch::ScalarType dtype, uint64_t seed) {
    Model m(cfg, device, dtype);
    // Drawn on the target device (a 7B model's weights in seconds on a GPU), so the same seed gives
    // different weights on the CPU and on a GPU.
    auto gen = make_generator(device, seed);
    auto opts = torch::TensorOptions().dtype(torch::kFloat32).device(device);
    auto normal = [&](std::vector<int64_t> shape) {
        auto t = torch::empty(shape, opts.dtype(dtype));
        t.normal_(0.0, cfg.initializer_range, gen);
        return t;
    };
    auto ones = [&](int64_t n) { return torch::ones({n}, opts).to(device, dtype); };
    auto zeros = [&](int64_t n) { return torch::zeros({n}, opts).to(device, dtype); };
    const int64_t C = cfg.hidden_size, H = cfg.num_heads, G = cfg.num_kv_heads, D = cfg.head_dim,
                  I = cfg.intermediate_size, V = cfg.vocab_size;
    m.embed_ = normal({V, C});
    m.final_norm_ = ones(C);
    m.lm_head_ = cfg.tie_word_embeddings ? m.embed_ : normal({V, C});
    for (int64_t i = 0; i < cfg.num_layers; ++i) {
        Layer l;
        l.input_norm = ones(C);
        l.post_attn_norm = ones(C);
        l.q.weight = normal({H * D, C});
        l.k.weight = normal({G * D, C});
        l.v.weight = normal({G * D, C});
        l.o.weight = normal({C, H * D});
        if (cfg.qkv_bias) l.q.bias = zeros(H * D), l.k.bias = zeros(G * D), l.v.bias = zeros(G * D);
        if (cfg.o_bias) l.o.bias = zeros(C);
        if (cfg.qk_norm) l.q_norm = ones(D), l.k_norm = ones(D);
        l.gate.weight = normal({I, C});
        l.up.weight = normal({I, C});
        l.down.weight = normal({C, I});
        m.layers_.push_back(std::move(l));
    }
    m.fuse_projections();
    return m;
}

std::vector<std::pair<std::string, torch::Tensor>> Model::named_parameters() const {
    std::vector<std::pair<std::string, torch::Tensor>> out;
    out.emplace_back("model.embed_tokens.weight", embed_);
    for (size_t i = 0; i < layers_.size(); ++i) {
        const Layer& l = layers_[i];
        std::string p = "model.layers." + std::to_string(i) + ".";
        out.emplace_back(p + "input_layernorm.weight", l.input_norm);
        out.emplace_back(p + "post_attention_layernorm.weight", l.post_attn_norm);
        const std::pair<const char*, const Linear*> lins[] = {{"self_attn.q_proj", &l.q}, {"self_attn.k_proj", &l.k},
                                                              {"self_attn.v_proj", &l.v}, {"self_attn.o_proj", &l.o},
                                                              {"mlp.gate_proj", &l.gate}, {"mlp.up_proj", &l.up},
                                                              {"mlp.down_proj", &l.down}};
        for (const auto& [name, lin] : lins) {
            out.emplace_back(p + name + ".weight", lin->weight);
            if (lin->bias.defined()) out.emplace_back(p + name + ".bias", lin->bias);
        }
        if (l.q_norm.defined()) {
            out.emplace_back(p + "self_attn.q_norm.weight", l.q_norm);
            out.emplace_back(p + "self_attn.k_norm.weight", l.k_norm);
        }
    }
    out.emplace_back("model.norm.weight", final_norm_);
    if (!cfg_.tie_word_embeddings) out.emplace_back("lm_head.weight", lm_head_);
    return out;
}

KVCache Model::make_cache(int64_t batch, int64_t capacity) const {
    KVCache c;
    auto opts = torch::TensorOptions().dtype(dtype_).device(device_);
    for (int64_t i = 0; i < cfg_.num_layers; ++i) {
        c.kv.push_back(torch::zeros({batch, capacity, 2 * cfg_.num_kv_heads, cfg_.head_dim}, opts));
    }
    return c;
}

bool Model::fused_generation() const {
    return use_fused_kernels &&
           fused::usable(device_, dtype_, cfg_.hidden_size, cfg_.num_heads, cfg_.num_kv_heads, cfg_.head_dim);
}

torch::Tensor Model::project(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                             std::initializer_list<const Linear*> layers) const {
    std::vector<LoraPart> parts;
    torch::ScalarType adapter_dtype = x.scalar_type();
    bool adapted = false;
    for (const Linear* l : layers) {
        const bool on = lora_active(*this, *l);
        if (on) adapter_dtype = l->lora_a.scalar_type(), adapted = true;
        parts.push_back(
            {on ? l->lora_a : torch::Tensor(), on ? l->lora_b : torch::Tensor(), l->lora_scale, l->weight.size(0)});
    }
    if (!adapted) return torch::nn::functional::linear(x, weight, bias);
    return lora_projection(x, weight, bias, parts, lora_in_base_dtype ? x.scalar_type() : adapter_dtype);
}

torch::Tensor Model::linear(const Linear& l, const torch::Tensor& x) const {
    return project(x, l.weight, l.bias, {&l});
}

void Model::fuse_projections() {
    torch::NoGradGuard no_grad;
    for (Layer& l : layers_) {
        const int64_t nq = l.q.weight.size(0), nk = l.k.weight.size(0), ni = l.gate.weight.size(0);
        l.qkv_weight = torch::cat({l.q.weight, l.k.weight, l.v.weight});  // ((H+2G)*D, C)
        l.q.weight = l.qkv_weight.slice(0, 0, nq);
        l.k.weight = l.qkv_weight.slice(0, nq, nq + nk);
        l.v.weight = l.qkv_weight.slice(0, nq + nk, nq + 2 * nk);
        if (l.q.bias.defined()) {
            l.qkv_bias = torch::cat({l.q.bias, l.k.bias, l.v.bias});
            l.q.bias = l.qkv_bias.slice(0, 0, nq);
            l.k.bias = l.qkv_bias.slice(0, nq, nq + nk);
            l.v.bias = l.qkv_bias.slice(0, nq + nk, nq + 2 * nk);
        }
        l.gate_up_weight = torch::cat({l.gate.weight, l.up.weight});  // (2I, C)
        l.gate.weight = l.gate_up_weight.slice(0, 0, ni);
        l.up.weight = l.gate_up_weight.slice(0, ni, 2 * ni);
    }
}

torch::Tensor Model::project_qkv(const Layer& l, const torch::Tensor& x, bool with_bias) const {
    if (l.q.weight.requires_grad()) {  // a full fine-tune: the views are the trained parameters
        auto proj = [&](const Linear& p) { return project(x, p.weight, with_bias ? p.bias : torch::Tensor(), {&p}); };
        return torch::cat({proj(l.q), proj(l.k), proj(l.v)}, -1);
    }
    return project(x, l.qkv_weight, with_bias ? l.qkv_bias : torch::Tensor(), {&l.q, &l.k, &l.v});  // (B, T, (H+2G)*D)
}

torch::Tensor Model::project_gate_up(const Layer& l, const torch::Tensor& x) const {
    if (l.gate.weight.requires_grad()) return torch::cat({linear(l.gate, x), linear(l.up, x)}, -1);
    return project(x, l.gate_up_weight, torch::Tensor(), {&l.gate, &l.up});  // (B, T, 2I)
}

torch::Tensor Model::attention(const Layer& l, const torch::Tensor& x, const Rope& rope, KVCache* cache, int64_t layer,
                               const DecodeSlots* decode) const {
    const int64_t B = x.size(0), T = x.size(1), H = cfg_.num_heads, G = cfg_.num_kv_heads, D = cfg_.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    auto qkv = qk_normed(l, project_qkv(l, x).view({B, T, H + 2 * G, D}));  // (B, T, H+2G, D)
    apply_rope_(qkv.narrow(2, 0, H + G), rope);                             // q and k in one pass
    auto q = qkv.narrow(2, 0, H);                                           // (B, T, H, D)
    auto kv = qkv.narrow(2, H, 2 * G);  // (B, T, 2G, D): k then v, the cache's layout
    torch::Tensor out;
    if (decode) {
        if (T != 1) throw std::logic_error("a decode step takes one token per row");
        auto k = cache->kv[layer].narrow(2, 0, G).transpose(1, 2);  // (B, G, S, D)
        auto v = cache->kv[layer].narrow(2, G, G).transpose(1, 2);
        cache->kv[layer].view({-1, 2 * G, D}).index_copy_(0, decode->write, kv.select(1, 0));
        out = at::scaled_dot_product_attention(q.transpose(1, 2), k, v, decode->mask, 0.0, false, scale,
                                               /*enable_gqa=*/G != H)
                  .transpose(1, 2);  // (B, 1, H, D)
    } else {
        if (cache) cache->kv[layer].narrow(1, 0, T).copy_(kv);                     // prefill: slots 0..T-1
        out = causal_attention(q, kv.narrow(2, 0, G), kv.narrow(2, G, G), scale);  // (B, T, H, D)
    }
    return linear(l.o, out.reshape({B, T, H * D}));
}

torch::Tensor Model::qk_normed(const Layer& l, const torch::Tensor& qkv) const {
    if (!cfg_.qk_norm) return qkv;
    const int64_t H = cfg_.num_heads, G = cfg_.num_kv_heads;
    return torch::cat({rms_norm(qkv.narrow(2, 0, H), l.q_norm, cfg_.rms_norm_eps),
                       rms_norm(qkv.narrow(2, H, G), l.k_norm, cfg_.rms_norm_eps), qkv.narrow(2, H + G, G)},
                      2);
}

Rope Model::rope(const torch::Tensor& positions) const {
    // In fp32, as transformers builds them, then in the activations' dtype.
    auto freqs = positions.to(torch::kFloat32).unsqueeze(-1) * inv_freq_;  // (B, T, D/2)
    auto sin = freqs.sin();
    return {torch::cat({freqs, freqs}, -1).cos().to(dtype_).unsqueeze(2),
            torch::cat({-sin, sin}, -1).to(dtype_).unsqueeze(2)};  // (B, T, 1, D)
}

torch::Tensor Model::forward_fused(const torch::Tensor& ids, const torch::Tensor& positions, KVCache& cache,
                                   const DecodeSlots* decode) const {
    const int64_t B = ids.size(0), T = ids.size(1), H = cfg_.num_heads, G = cfg_.num_kv_heads, D = cfg_.head_dim;
    const double scale = 1.0 / std::sqrt(static_cast<double>(D)), eps = cfg_.rms_norm_eps;
    if (decode && T != 1) throw std::logic_error("a decode step takes one token per row");
    auto h = embed_.index_select(0, ids.reshape(-1)).view({B, T, cfg_.hidden_size});  // (B, T, C): the residual
    auto x = fused::add_rms_norm_(h, {}, layers_[0].input_norm, eps);                 // (B, T, C)
    // A decode step's projections with no adapter on go to cuBLASLt with a timed algorithm.
    auto plain = [&](std::initializer_list<const Linear*> ls) {
        return decode && std::none_of(ls.begin(), ls.end(), [&](const Linear* p) { return lora_active(*this, *p); });
    };
    for (size_t i = 0; i < layers_.size(); ++i) {
        const Layer& l = layers_[i];
        // Qwen3 normalises q and k before RoPE, so there the bias (if any) goes in with the matmul.
        const bool qkv_bias = cfg_.qk_norm && l.qkv_bias.defined();
        auto qkv = qk_normed(l, (plain({&l.q, &l.k, &l.v}) && !qkv_bias ? fused::decode_linear(x, l.qkv_weight)
                                                                        : project_qkv(l, x, /*with_bias=*/cfg_.qk_norm))
                                    .view({B, T, H + 2 * G, D}));
        auto& kv = cache.kv[i];  // (B, S, 2G, D)
        auto q =
            fused::rope_qkv_to_cache(qkv, cfg_.qk_norm ? torch::Tensor() : l.qkv_bias, positions, inv_freq_, kv, H, G);
        torch::Tensor attn;  // (B, T, H, D)
        if (decode) {
            attn = fused::decode_attention(q.view({B, H, D}), kv, decode->lens, scale).view({B, 1, H, D});
        } else {                                // prefill: the T tokens just written are slots 0..T-1
            auto written = kv.narrow(1, 0, T);  // (B, T, 2G, D)
            attn = causal_attention(q, written.narrow(2, 0, G), written.narrow(2, G, G), scale);
        }
        auto o_in = attn.reshape({B, T, H * D});
        x = fused::add_rms_norm_(h, plain({&l.o}) ? fused::decode_linear(o_in, l.o.weight) : linear(l.o, o_in),
                                 l.post_attn_norm, eps);
        auto gu = plain({&l.gate, &l.up}) ? fused::decode_linear(x, l.gate_up_weight) : project_gate_up(l, x);
        auto act = fused::silu_mul(gu);
        auto mlp = plain({&l.down}) ? fused::decode_linear(act, l.down.weight) : linear(l.down, act);
        x = fused::add_rms_norm_(h, mlp, i + 1 < layers_.size() ? layers_[i + 1].input_norm : final_norm_, eps);
    }
    return x;  // the final norm's output
}

torch::Tensor Model::forward(const torch::Tensor& ids, const torch::Tensor& positions, KVCache* cache,
                             const DecodeSlots* decode) const {
    if (decode && !cache) throw std::logic_error("a decode step needs a cache");
    if (cache && fused_generation()) return forward_fused(ids, positions, *cache, decode);
    auto h = embed_.index_select(0, ids.reshape(-1)).view({ids.size(0), ids.size(1), cfg_.hidden_size});  // (B, T, C)
    const Rope r = rope(positions);
    const bool recompute = recompute_layers && cache == nullptr && torch::GradMode::is_enabled();
    // A recomputed layer is differentiated only if its input requires grad (frozen embeddings under
    // LoRA do not); the same fix as transformers' enable_input_require_grads.
    if (recompute && !h.requires_grad()) h = h.detach().requires_grad_(true);
    for (size_t i = 0; i < layers_.size(); ++i) {
        const auto li = static_cast<int64_t>(i);
        h = recompute ? RecomputedLayer::apply(h, reinterpret_cast<int64_t>(this), li, r.cos, r.sin_signed)
                      : layer_forward(li, h, r, cache, decode);
    }
    return rms_norm(h, final_norm_, cfg_.rms_norm_eps);
}

torch::Tensor Model::layer_forward(int64_t layer, const torch::Tensor& h_in, const Rope& rope, KVCache* cache,
                                   const DecodeSlots* decode) const {
    const Layer& l = layers_[layer];
    auto h = h_in + attention(l, rms_norm(h_in, l.input_norm, cfg_.rms_norm_eps), rope, cache, layer, decode);
    auto gu = project_gate_up(l, rms_norm(h, l.post_attn_norm, cfg_.rms_norm_eps));  // (B, T, 2I)
    return h + linear(l.down, SiluMul::apply(gu, use_fused_kernels && fused::elementwise_usable(gu)));
}

std::vector<std::pair<std::string, Linear*>> Model::linears() {
    std::vector<std::pair<std::string, Linear*>> out;
    for (size_t i = 0; i < layers_.size(); ++i) {
        Layer& l = layers_[i];
        std::string p = "model.layers." + std::to_string(i) + ".";
        out.emplace_back(p + "self_attn.q_proj", &l.q);
        out.emplace_back(p + "self_attn.k_proj", &l.k);
        out.emplace_back(p + "self_attn.v_proj", &l.v);
        out.emplace_back(p + "self_attn.o_proj", &l.o);
        out.emplace_back(p + "mlp.gate_proj", &l.gate);
        out.emplace_back(p + "mlp.up_proj", &l.up);
        out.emplace_back(p + "mlp.down_proj", &l.down);
    }
    return out;
}

torch::Tensor Model::logits(const torch::Tensor& hidden) const {
    return torch::nn::functional::linear(hidden, lm_head_);
}

const torch::Tensor& Model::lm_head() const { return lm_head_; }

}  // namespace kz
