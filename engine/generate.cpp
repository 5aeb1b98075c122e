#include "engine/generate.h"

#include <chrono>
#include <stdexcept>
#include <string>

#include <ATen/cuda/CUDAEvent.h>

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

// A device-to-host copy that the host can wait for without also waiting for the work queued after
// it (an event on CUDA; on the CPU the copy is done when start() returns).
class HostCopy {
public:
    HostCopy(torch::Device dev, std::vector<int64_t> shape)
        : cuda_(dev.is_cuda()),
          host_(torch::empty(shape, torch::TensorOptions().dtype(torch::kFloat64).pinned_memory(cuda_))) {}
    void start(const torch::Tensor& src) {
        host_.copy_(src, /*non_blocking=*/cuda_);
        if (cuda_) ready_.record();
    }
    const torch::Tensor& wait() {
        if (cuda_) ready_.synchronize();
        return host_;
    }

private:
    bool cuda_;
    torch::Tensor host_;
    at::cuda::CUDAEvent ready_;
};

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
        throw std::runtime_error("prompt (" + std::to_string(P_) + ") + max_new_tokens (" +
                                 std::to_string(max_new_tokens) + ") exceeds max_position_embeddings (" +
                                 std::to_string(model.config().max_position_embeddings) + ")");
    std::vector<int64_t> ids(B_ * P_, 0), lens(B_), last(B_);
    for (int64_t b = 0; b < B_; ++b) {
        const auto& p = prompts[b];
        std::copy(p.begin(), p.end(), ids.begin() + b * P_);
        lens[b] = static_cast<int64_t>(p.size());
        last[b] = b * P_ + lens[b] - 1;
    }
    const auto dev = model.device();
    auto i64 = torch::TensorOptions().dtype(torch::kInt64);
    ids_ = torch::tensor(ids, i64).view({B_, P_}).to(dev);
    lens_ = torch::tensor(lens, i64).to(dev);
    last_ = torch::tensor(last, i64).to(dev);
    tokens_ = torch::zeros({B_}, i64.device(dev));
    row_base_ = torch::arange(B_, i64.device(dev)) * S_;
    cache_ = model.make_cache(B_, S_);
    if (cuda_graph && dev.is_cuda()) graph_ = std::make_unique<DecodeGraph>();
}

torch::Tensor BatchDecoder::prefill(bool all_positions) {
    if (next_slot_ != 0) throw std::logic_error("prefill twice");
    torch::NoGradGuard no_grad;
    auto positions = torch::arange(P_, ids_.options()).expand({B_, P_});  // (B, P)
    auto hidden = model_.forward(ids_, positions, &cache_);               // (B, P, C)
    next_slot_ = P_;
    if (all_positions) return model_.logits(hidden);                                      // (B, P, V)
    return model_.logits(hidden.view({B_ * P_, hidden.size(2)}).index_select(0, last_));  // (B, V)
}

torch::Tensor BatchDecoder::run_step() {
    auto slots = DecodeSlots::make(lens_, row_base_, S_, model_.fused_generation());
    auto hidden = model_.forward(tokens_.view({B_, 1}), lens_.view({B_, 1}), &cache_, &slots);  // (B, 1, C)
    lens_.add_(1);
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
    auto logits = dec.prefill();  // (B, V)
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
    HostCopy sampled(model.device(), {2, B});  // tokens (exact in fp64) and their log-probs
    for (int64_t t = 0; t < req.max_new_tokens; ++t) {
        Sampled s = sample(logits, req.sampling, gen);
        sampled.start(torch::stack({s.tokens.to(torch::kFloat64), s.logprobs.to(torch::kFloat64)}));  // (2, B)
        // The next step is queued before the host reads this one, so the GPU never waits for the
        // host's bookkeeping. Finished rows keep decoding (their outputs are discarded): the batch
        // keeps one shape; after the last row stops, one queued step is wasted.
        const bool last = t + 1 == req.max_new_tokens;
        if (!last) logits = dec.step(s.tokens);
        const double* tk = sampled.wait().data_ptr<double>();
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
        if (all_done || last) break;
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

std::vector<float> score(const Model& model, const std::vector<int64_t>& prompt,
                         const std::vector<int64_t>& completion) {
    if (prompt.empty()) throw std::runtime_error("empty prompt");
    if (completion.empty()) return {};
    check_ids(model, prompt, "the prompt");
    check_ids(model, completion, "the completion");
    torch::NoGradGuard no_grad;
    std::vector<int64_t> all(prompt);
    all.insert(all.end(), completion.begin(), completion.end());
    const int64_t T = static_cast<int64_t>(all.size()), P = static_cast<int64_t>(prompt.size());
    if (T > model.config().max_position_embeddings)
        throw std::runtime_error("prompt + completion (" + std::to_string(T) +
                                 " tokens) exceeds max_position_embeddings");
    auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(model.device());
    auto ids = torch::tensor(all, torch::kInt64).to(model.device()).view({1, T});
    auto positions = torch::arange(T, i64).view({1, T});
    auto hidden = model.forward(ids, positions);  // (1, T, C)
    // The token at position i is predicted by the hidden state at i-1.
    auto h = hidden.slice(1, P - 1, T - 1).reshape({T - P, hidden.size(2)});                              // (n, C)
    auto lp = chunked_logprobs(h, model.lm_head(), ids.slice(1, P, T).reshape({T - P})).to(torch::kCPU);  // (n)
    return std::vector<float>(lp.data_ptr<float>(), lp.data_ptr<float>() + lp.numel());
}

}  // namespace kz
