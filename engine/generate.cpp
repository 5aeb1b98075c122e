#include "engine/generate.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include "engine/training.h"

namespace kz {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void sync(const Model& m) {
    if (m.device().is_cuda()) torch::cuda::synchronize(m.device().index());
}

void check_ids(const Model& m, const std::vector<int64_t>& ids, const char* what) {
    for (int64_t id : ids)
        if (id < 0 || id >= m.config().vocab_size)
            throw std::runtime_error(std::string(what) + " holds token id " + std::to_string(id) +
                                     ", outside the model's vocabulary of " + std::to_string(m.config().vocab_size));
}

}  // namespace

BatchDecoder::BatchDecoder(const Model& model, const std::vector<std::vector<int64_t>>& prompts, int64_t max_new_tokens,
                           bool cuda_graph)
    : model_(model) {
    if (prompts.empty()) throw std::runtime_error("no prompts");
    if (max_new_tokens < 0) throw std::runtime_error("max_new_tokens must be >= 0");
    P_ = 0;
    for (const auto& p : prompts) {
        if (p.empty()) throw std::runtime_error("empty prompt");
        check_ids(model, p, "a prompt");
        P_ = std::max<int64_t>(P_, static_cast<int64_t>(p.size()));
    }
    B_ = static_cast<int64_t>(prompts.size());
    S_ = P_ + max_new_tokens;
    if (S_ > model.config().max_position_embeddings)
        throw std::runtime_error("prompt (" + std::to_string(P_) + ") + max_new_tokens (" + std::to_string(max_new_tokens) +
                                 ") exceeds max_position_embeddings (" +
                                 std::to_string(model.config().max_position_embeddings) + ")");
    std::vector<int64_t> ids(B_ * P_, 0), pos(B_ * P_, 0), next(B_);
    std::vector<uint8_t> valid(B_ * S_, 0);
    for (int64_t b = 0; b < B_; ++b) {
        const auto& p = prompts[b];
        int64_t L = static_cast<int64_t>(p.size()), off = P_ - L;
        for (int64_t i = 0; i < L; ++i) {
            ids[b * P_ + off + i] = p[i];
            pos[b * P_ + off + i] = i;
            valid[b * S_ + off + i] = 1;
        }
        next[b] = L;
    }
    const auto dev = model.device();
    auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    ids_ = torch::from_blob(ids.data(), {B_, P_}, i64).clone().to(dev);
    positions_ = torch::from_blob(pos.data(), {B_, P_}, i64).clone().to(dev);
    valid_ = torch::from_blob(valid.data(), {B_, S_}, torch::kUInt8).to(torch::kBool).to(dev);
    pos_ = torch::from_blob(next.data(), {B_, 1}, i64).clone().to(dev);
    tokens_ = torch::zeros({B_}, i64.device(dev));
    slot_ = torch::full({1}, P_, i64.device(dev));
    cache_ = model.make_cache(B_, S_);
    if (cuda_graph && dev.is_cuda()) graph_ = std::make_unique<DecodeGraph>();
}

torch::Tensor BatchDecoder::prefill() {
    if (next_slot_ != 0) throw std::logic_error("prefill twice");
    torch::NoGradGuard no_grad;
    auto slots = torch::arange(P_, torch::TensorOptions().dtype(torch::kInt64).device(model_.device()));
    auto hidden = model_.forward(ids_, positions_, attention_mask(valid_, slots), &cache_, slots);  // (B, P, C)
    next_slot_ = P_;
    return model_.logits(hidden);  // (B, P, V)
}

torch::Tensor BatchDecoder::run_step() {
    valid_.index_fill_(1, slot_, true);
    auto hidden = model_.forward(tokens_.view({B_, 1}), pos_, attention_mask(valid_, slot_), &cache_, slot_);  // (B, 1, C)
    pos_.add_(1);
    slot_.add_(1);
    return model_.logits(hidden.select(1, 0));  // (B, V)
}

torch::Tensor BatchDecoder::step(const torch::Tensor& tokens) {
    if (next_slot_ < P_) throw std::logic_error("step before prefill");
    if (next_slot_ >= S_) throw std::runtime_error("the KV cache is full");
    torch::NoGradGuard no_grad;
    tokens_.copy_(tokens.view({B_}));
    torch::Tensor logits;
    if (!graph_) {
        logits = run_step();
    } else if (!graph_->captured()) {
        logits = graph_->run_and_capture([this] { return run_step(); });
    } else {
        graph_->replay();
        logits = graph_->output().clone();  // the graph overwrites its output at the next replay
    }
    ++next_slot_;
    return logits;
}

std::vector<Completion> generate(const Model& model, const GenerateRequest& req, const TokenCallback& on_token,
                                 GenerateStats* stats) {
    req.sampling.validate();
    if (req.prompts.empty()) return {};
    check_ids(model, req.stop_ids, "the stop tokens");
    BatchDecoder dec(model, req.prompts, req.max_new_tokens, req.cuda_graph);
    const int64_t B = dec.batch();
    auto t0 = std::chrono::steady_clock::now();
    auto logits = dec.prefill().select(1, dec.prompt_slots() - 1);  // (B, V)
    sync(model);
    if (stats) {
        stats->prefill_s = seconds_since(t0);
        stats->prompt_tokens = 0;
        for (const auto& p : req.prompts) stats->prompt_tokens += static_cast<int64_t>(p.size());
    }
    at::Generator gen = make_generator(model.device(), req.sampling.seed);
    std::vector<Completion> out(B);
    std::vector<bool> done(B, false);
    t0 = std::chrono::steady_clock::now();
    int64_t steps = 0;
    for (int64_t t = 0; t < req.max_new_tokens; ++t) {
        Sampled s = sample(logits, req.sampling, gen);
        // One device-to-host copy per step (ids are exact in fp64).
        auto both = torch::stack({s.tokens.to(torch::kFloat64), s.logprobs.to(torch::kFloat64)}).to(torch::kCPU);  // (2, B)
        const double* tk = both.data_ptr<double>();
        const double* lp = tk + B;
        bool all_done = true;
        for (int64_t b = 0; b < B; ++b) {
            if (done[b]) continue;
            const auto token = static_cast<int64_t>(tk[b]);
            out[b].tokens.push_back(token);
            out[b].logprobs.push_back(static_cast<float>(lp[b]));
            if (on_token) on_token(static_cast<size_t>(b), token);
            for (int64_t st : req.stop_ids)
                if (token == st) done[b] = out[b].stopped = true;
            all_done = all_done && done[b];
        }
        ++steps;
        if (all_done || t + 1 == req.max_new_tokens) break;
        // Finished rows keep decoding (their outputs are discarded): the batch keeps one shape.
        logits = dec.step(s.tokens);
    }
    sync(model);
    if (stats) {
        stats->decode_s = seconds_since(t0);
        stats->steps = steps;
        stats->new_tokens = 0;
        for (const auto& c : out) stats->new_tokens += static_cast<int64_t>(c.tokens.size());
    }
    return out;
}

std::vector<float> score(const Model& model, const std::vector<int64_t>& prompt, const std::vector<int64_t>& completion) {
    if (prompt.empty()) throw std::runtime_error("empty prompt");
    if (completion.empty()) return {};
    check_ids(model, prompt, "the prompt");
    check_ids(model, completion, "the completion");
    torch::NoGradGuard no_grad;
    std::vector<int64_t> all(prompt);
    all.insert(all.end(), completion.begin(), completion.end());
    const int64_t T = static_cast<int64_t>(all.size()), P = static_cast<int64_t>(prompt.size());
    if (T > model.config().max_position_embeddings)
        throw std::runtime_error("prompt + completion (" + std::to_string(T) + " tokens) exceeds max_position_embeddings");
    auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(model.device());
    auto ids = torch::tensor(all, torch::kInt64).to(model.device()).view({1, T});
    auto positions = torch::arange(T, i64).view({1, T});
    auto valid = torch::ones({1, T}, i64.dtype(torch::kBool));
    auto hidden = model.forward(ids, positions, attention_mask(valid, torch::arange(T, i64)));  // (1, T, C)
    // The token at position i is predicted by the hidden state at i-1.
    auto h = hidden.slice(1, P - 1, T - 1).reshape({T - P, hidden.size(2)});                       // (n, C)
    auto lp = chunked_logprobs(h, model.lm_head(), ids.slice(1, P, T).reshape({T - P})).to(torch::kCPU);  // (n)
    return std::vector<float>(lp.data_ptr<float>(), lp.data_ptr<float>() + lp.numel());
}

}  // namespace kz
