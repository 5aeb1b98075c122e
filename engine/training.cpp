#include "engine/training.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

namespace kz {

namespace {

// log_softmax(h W^T)[target] per row, in chunks, with the backward recomputing each chunk's logits:
// grad logits = g (onehot(target) - softmax(logits)).
struct ChunkedLogprob : public torch::autograd::Function<ChunkedLogprob> {
    static torch::Tensor forward(torch::autograd::AutogradContext* ctx, torch::Tensor hidden, torch::Tensor weight,
                                 torch::Tensor targets, int64_t chunk) {
        ctx->save_for_backward({hidden, weight, targets});
        ctx->saved_data["chunk"] = chunk;
        torch::NoGradGuard no_grad;
        const int64_t N = hidden.size(0);  // hidden (N, C), weight (V, C), targets (N)
        auto out = torch::empty({N}, hidden.options().dtype(torch::kFloat32));
        for (int64_t s = 0; s < N; s += chunk) {
            int64_t e = std::min(N, s + chunk);
            auto logits = torch::nn::functional::linear(hidden.slice(0, s, e), weight);  // (n, V)
            out.slice(0, s, e).copy_(torch::log_softmax(logits, -1, torch::kFloat32)
                                         .gather(-1, targets.slice(0, s, e).unsqueeze(-1))
                                         .squeeze(-1));
        }
        return out;
    }
    static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                   torch::autograd::variable_list grad_out) {
        auto saved = ctx->get_saved_variables();
        auto hidden = saved[0], weight = saved[1], targets = saved[2];
        const int64_t chunk = ctx->saved_data["chunk"].toInt();
        auto g = grad_out[0].to(torch::kFloat32);  // (N)
        const int64_t N = hidden.size(0);
        const bool need_h = ctx->needs_input_grad(0), need_w = ctx->needs_input_grad(1);
        torch::Tensor grad_h = need_h ? torch::zeros_like(hidden) : torch::Tensor();
        torch::Tensor grad_w =
            need_w ? torch::zeros(weight.sizes(), weight.options().dtype(torch::kFloat32)) : torch::Tensor();
        for (int64_t s = 0; s < N; s += chunk) {
            int64_t e = std::min(N, s + chunk);
            auto h = hidden.slice(0, s, e);
            auto logits = torch::nn::functional::linear(h, weight);            // (n, V)
            auto gc = g.slice(0, s, e).unsqueeze(-1);                          // (n, 1)
            auto gl = torch::softmax(logits, -1, torch::kFloat32) * gc.neg();  // (n, V) fp32
            gl.scatter_add_(-1, targets.slice(0, s, e).unsqueeze(-1), gc);
            auto gl_w = gl.to(weight.scalar_type());  // (n, V): a bf16 model's autograd rounds here too
            if (need_h) grad_h.slice(0, s, e).copy_(torch::matmul(gl_w, weight));
            if (!need_w) continue;
            // (V, C) += (V, n) x (n, C), summed over chunks in fp32. CUDA multiplies 16-bit inputs on the
            // tensor cores with an fp32 result (mm's out_dtype; CPU has no such kernel); an fp32 product
            // would run as a SIMT sgemm, TF32 being off (docs/BENCHMARKS.md has its cost).
            if (weight.is_cuda() && weight.scalar_type() != torch::kFloat32)
                grad_w.add_(at::mm(gl_w.t(), h, torch::kFloat32));
            else
                grad_w.add_(torch::matmul(gl.t(), h.to(torch::kFloat32)));
        }
        return {grad_h, need_w ? grad_w.to(weight.scalar_type()) : torch::Tensor(), torch::Tensor(), torch::Tensor()};
    }
};

}  // namespace

torch::Tensor sequence_logprobs(const Model& model, const TrainBatch& batch, int64_t chunk, ScoredRows rows,
                                double temperature) {
    const int64_t B = batch.ids.size(0), T = batch.ids.size(1);
    if (T < 2) throw std::runtime_error("sequences need at least 2 tokens");
    if (!(temperature > 0)) throw std::runtime_error("log-probs need a temperature above 0");
    // Right padding only: a real token after padding would be attended to by nothing and see padding.
    auto v = batch.valid.to(torch::kCPU, torch::kInt64);
    if (v.slice(1, 1, T).gt(v.slice(1, 0, T - 1)).any().item<bool>())
        throw std::runtime_error("training rows must be right-padded (a real token follows padding)");
    auto valid = batch.valid.to(model.device());
    // Right padding: a row's tokens come first, so causal attention never lets a real token see
    // padding (padding positions compute garbage that weight 0 ignores).
    auto positions = (valid.to(torch::kInt64).cumsum(1) - 1).clamp_min(0);  // (B, T)
    auto hidden = model.forward(batch.ids.to(model.device()), positions);
    auto h = hidden.slice(1, 0, T - 1).reshape({B * (T - 1), hidden.size(2)});  // (N, C)
    // The logits are linear in h: (h / t) W^T = (h W^T) / t.
    if (temperature != 1.0) h = h / temperature;
    auto targets = batch.ids.to(model.device()).slice(1, 1, T).reshape({B * (T - 1)});
    if (rows == ScoredRows::all) return chunked_logprobs(h, model.lm_head(), targets, chunk).view({B, T - 1});
    auto scored = batch.weights.to(model.device()).slice(1, 1, T).reshape({B * (T - 1)}).ne(0).nonzero().squeeze(1);
    auto lp = chunked_logprobs(h.index_select(0, scored), model.lm_head(), targets.index_select(0, scored), chunk);
    return torch::zeros({B * (T - 1)}, lp.options()).index_add(0, scored, lp).view({B, T - 1});
}

torch::Tensor chunked_logprobs(const torch::Tensor& hidden, const torch::Tensor& weight, const torch::Tensor& targets,
                               int64_t chunk) {
    return ChunkedLogprob::apply(hidden, weight, targets, chunk);
}

torch::Tensor weighted_nll(const torch::Tensor& logprobs, const TrainBatch& batch) {
    auto w = batch.weights.to(logprobs.device(), torch::kFloat32).slice(1, 1, batch.weights.size(1));  // (B, T-1)
    auto count = (w != 0).sum().clamp_min(1).to(torch::kFloat32);
    return -(w * logprobs).sum() / count;
}

double accumulate(const Model& model, const TrainBatch& batch, const LossFn& loss_fn, int64_t accumulation,
                  int64_t chunk, ScoredRows rows, double temperature) {
    if (accumulation < 1) throw std::runtime_error("gradient accumulation must be >= 1");
    auto loss = loss_fn(sequence_logprobs(model, batch, chunk, rows, temperature), batch);
    (loss / static_cast<double>(accumulation)).backward();
    return loss.item<double>();
}

std::vector<std::pair<std::string, torch::Tensor>> full_parameters(Model& model) {
    auto params = model.named_parameters();
    for (auto& [name, t] : params) t.requires_grad_(true);
    return params;
}

PolicyOptimizer::PolicyOptimizer(std::vector<std::pair<std::string, torch::Tensor>> params, OptimConfig cfg)
    : params_(std::move(params)), cfg_(cfg) {
    if (params_.empty()) throw std::runtime_error("nothing to train: no parameters");
    for (auto& [name, p] : params_) {
        if (!p.requires_grad()) throw std::runtime_error("parameter " + name + " does not require grad");
        masters_.push_back(p.scalar_type() == torch::kFloat32 ? p
                                                              : p.detach().to(torch::kFloat32).requires_grad_(true));
    }
    adam_ = std::make_unique<torch::optim::AdamW>(
        masters_,
        torch::optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(cfg.weight_decay));
}

void PolicyOptimizer::zero_grad() {
    for (auto& [n, p] : params_) p.mutable_grad() = torch::Tensor();
    for (auto& m : masters_) m.mutable_grad() = torch::Tensor();
}

void PolicyOptimizer::set_lr(double lr) {
    for (auto& group : adam_->param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
}

double PolicyOptimizer::step() {
    for (size_t i = 0; i < params_.size(); ++i) {
        auto& p = params_[i].second;
        if (masters_[i].unsafeGetTensorImpl() != p.unsafeGetTensorImpl())
            masters_[i].mutable_grad() = p.grad().defined() ? p.grad().to(torch::kFloat32) : torch::Tensor();
    }
    double norm = torch::nn::utils::clip_grad_norm_(
        masters_, cfg_.max_grad_norm > 0 ? cfg_.max_grad_norm : std::numeric_limits<double>::infinity());
    if (cfg_.warmup_steps > 0)
        set_lr(cfg_.lr * static_cast<double>(std::min(steps_ + 1, cfg_.warmup_steps)) /
               static_cast<double>(cfg_.warmup_steps));
    adam_->step();
    {
        torch::NoGradGuard no_grad;
        for (size_t i = 0; i < params_.size(); ++i)
            if (masters_[i].unsafeGetTensorImpl() != params_[i].second.unsafeGetTensorImpl())
                params_[i].second.copy_(masters_[i]);
    }
    zero_grad();
    ++steps_;
    return norm;
}

double PolicyOptimizer::gradient_scale() const {
    torch::NoGradGuard no_grad;
    std::vector<torch::Tensor> sums;  // one scalar per parameter, summed on its device
    for (const auto& m : masters_) {
        auto found = adam_->state().find(m.unsafeGetTensorImpl());
        if (found == adam_->state().end()) continue;
        const auto& s = static_cast<const torch::optim::AdamWParamState&>(*found->second);
        const double unbias = 1.0 - std::pow(cfg_.beta2, static_cast<double>(s.step()));
        sums.push_back(s.exp_avg_sq().sum().to(torch::kFloat64) / unbias);
    }
    if (sums.empty()) return 0.0;
    return std::sqrt(torch::stack(sums).sum().item<double>());
}

void PolicyOptimizer::save_state(const std::string& path) const {
    torch::serialize::OutputArchive ar;
    ar.write("steps", torch::tensor(steps_));
    for (size_t i = 0; i < params_.size(); ++i) ar.write("master/" + params_[i].first, masters_[i].detach());
    torch::serialize::OutputArchive adam;
    adam_->save(adam);
    ar.write("adamw", adam);
    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    ar.save_to(tmp);
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        throw std::runtime_error("cannot rename " + tmp + " to " + path);
    }
}

void PolicyOptimizer::load_state(const std::string& path) {
    torch::serialize::InputArchive ar;
    try {
        ar.load_from(path);
    } catch (const c10::Error& e) {
        throw std::runtime_error(path + ": not a trainer state file (" + std::string(e.what_without_backtrace()) + ")");
    }
    torch::Tensor steps;
    ar.read("steps", steps);
    torch::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
        torch::Tensor m;
        if (!ar.try_read("master/" + params_[i].first, m))
            throw std::runtime_error(path + ": no saved state for parameter " + params_[i].first);
        if (!m.sizes().equals(masters_[i].sizes()))
            throw std::runtime_error(path + ": saved " + params_[i].first + " has another shape");
        masters_[i].copy_(m);
        if (masters_[i].unsafeGetTensorImpl() != params_[i].second.unsafeGetTensorImpl()) params_[i].second.copy_(m);
    }
    torch::serialize::InputArchive adam;
    ar.read("adamw", adam);
    adam_->load(adam);
    steps_ = steps.item<int64_t>();
}

}  // namespace kz
