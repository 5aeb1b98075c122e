#include "train/sft.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include "bench/bench_run.h"
#include "prompts/coder_prompt.h"
#include "common/files.h"
#include "engine/hf_checkpoint.h"
#include "train/policy.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

json SftResult::to_json() const {
    return {{"pairs", pairs},           {"skipped", skipped},     {"steps", steps},     {"tokens", tokens},
            {"first_loss", first_loss}, {"last_loss", last_loss}, {"seconds", seconds}, {"out", out}};
}

namespace {

std::vector<ChatMessage> prompt_messages(const json& p, const std::string& where) {
    if (p.is_string()) return {{"user", p.get<std::string>()}};
    if (!p.is_array() || p.empty())
        throw std::runtime_error(where + ": \"prompt\" must be a string or a list of messages");
    std::vector<ChatMessage> out;
    for (const auto& m : p) {
        if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
            !m["content"].is_string())
            throw std::runtime_error(where + ": every message needs string \"role\" and \"content\"");
        out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
    return out;
}

}  // namespace

std::vector<SftPair> load_sft_pairs(const TrainConfig& cfg, const Policy& policy, int64_t* skipped) {
    const auto& s = cfg.sft;
    std::vector<SftPair> pairs;
    int64_t too_long = 0;
    auto add = [&](const std::vector<ChatMessage>& prompt, const std::string& completion) {
        SftPair p;
        p.prompt = policy.encode_chat(prompt);
        p.completion = policy.tokenizer().encode(completion);
        // The chat template's end of turn when the tokenizer has one: what generation stops on.
        if (auto im_end = policy.tokenizer().token_id("<|im_end|>"))
            p.completion.push_back(*im_end);
        else if (!policy.stops().empty())
            p.completion.push_back(policy.stops().front());
        if (static_cast<int64_t>(p.prompt.size() + p.completion.size()) > s.max_tokens)
            ++too_long;
        else
            pairs.push_back(std::move(p));
    };
    if (!s.data.empty()) {
        std::ifstream in(s.data);
        if (!in) throw std::runtime_error("cannot read sft.data " + s.data);
        std::string line;
        for (int n = 1; std::getline(in, line); ++n) {
            if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
            const std::string where = s.data + ":" + std::to_string(n);
            json j;
            try {
                j = json::parse(line);
            } catch (const json::exception& e) {
                throw std::runtime_error(where + ": not JSON (" + std::string(e.what()) + ")");
            }
            if (!j.is_object() || !j.contains("prompt") || !j.contains("completion") || !j["completion"].is_string())
                throw std::runtime_error(where + ": needs \"prompt\" and a string \"completion\"");
            add(prompt_messages(j["prompt"], where), j["completion"].get<std::string>());
        }
    }
    if (!s.tasks.empty()) {
        CoderPrompt prompt = CoderPrompt::load(coder_format(cfg.backend, cfg.format));
        for (const auto& t : load_task_dirs({s.tasks})) {
            const fs::path cand = fs::path(s.candidates) / fs::path(t.path).filename();
            if (!fs::is_regular_file(cand)) continue;  // tasks without a candidate are not pairs
            add(prompt.messages(t.source), coder_answer(read_file(cand.string())));
        }
    }
    if (skipped) *skipped = too_long;
    return pairs;
}

double sft_lr(const SftSpec& s, double base, int64_t step, int64_t total) {
    if (step < s.warmup_steps) return base * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
    if (s.schedule == "constant") return base;
    const int64_t span = std::max<int64_t>(1, total - s.warmup_steps - 1);
    const double progress = std::min(1.0, static_cast<double>(step - s.warmup_steps) / static_cast<double>(span));
    return base * (0.1 + 0.9 * 0.5 * (1.0 + std::cos(M_PI * progress)));
}

SftResult sft_train(Policy& policy, const std::vector<SftPair>& pairs, const TrainConfig& cfg,
                    const std::atomic<bool>& stop) {
    const auto& s = cfg.sft;
    auto t0 = std::chrono::steady_clock::now();
    SftResult r;
    r.pairs = static_cast<int64_t>(pairs.size());
    OptimConfig oc;
    oc.lr = s.lr > 0 ? s.lr : cfg.coder.lr;
    oc.weight_decay = cfg.coder.weight_decay;
    oc.max_grad_norm = cfg.coder.max_grad_norm;
    PolicyOptimizer opt(policy.optimizer().params(), oc);
    std::mt19937_64 rng(cfg.seed);
    const torch::Device dev = policy.model().device();
    const auto batches = static_cast<int64_t>((pairs.size() + static_cast<size_t>(s.batch_size) - 1) /
                                              static_cast<size_t>(s.batch_size));
    const int64_t total_steps = batches * s.epochs;
    for (int e = 0; e < s.epochs && !stop; ++e) {
        std::vector<size_t> order(pairs.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng);
        double epoch_loss = 0;
        int64_t epoch_steps = 0;
        for (size_t b = 0; b < order.size() && !stop; b += static_cast<size_t>(s.batch_size)) {
            const size_t n = std::min(order.size() - b, static_cast<size_t>(s.batch_size));
            int64_t T = 0;
            for (size_t k = 0; k < n; ++k) {
                const SftPair& p = pairs[order[b + k]];
                T = std::max<int64_t>(T, static_cast<int64_t>(p.prompt.size() + p.completion.size()));
            }
            const auto B = static_cast<int64_t>(n);
            auto ids = torch::zeros({B, T}, torch::kInt64);        // (B, T)
            auto valid = torch::zeros({B, T}, torch::kBool);       // (B, T)
            auto weights = torch::zeros({B, T}, torch::kFloat32);  // (B, T): 1 where ids[:, t] is a completion token
            for (int64_t k = 0; k < B; ++k) {
                const SftPair& p = pairs[order[b + static_cast<size_t>(k)]];
                const auto P = static_cast<int64_t>(p.prompt.size()), L = static_cast<int64_t>(p.completion.size());
                ids[k].slice(0, 0, P).copy_(torch::tensor(p.prompt, torch::kInt64));
                ids[k].slice(0, P, P + L).copy_(torch::tensor(p.completion, torch::kInt64));
                valid[k].slice(0, 0, P + L).fill_(true);
                weights[k].slice(0, P, P + L).fill_(1.0);
                r.tokens += L;
            }
            TrainBatch batch{ids.to(dev), valid.to(dev), weights.to(dev)};
            opt.set_lr(sft_lr(s, oc.lr, r.steps, total_steps));
            const double loss = accumulate(policy.model(), batch, weighted_nll, 1, 1024, ScoredRows::weighted);
            opt.step();
            if (r.steps == 0) r.first_loss = loss;
            r.last_loss = loss;
            ++r.steps;
            epoch_loss += loss;
            ++epoch_steps;
        }
        if (epoch_steps)
            std::fprintf(stderr, "[sft] epoch %d: %lld steps, mean loss %.4f, lr %.2e, %.0f s\n", e + 1,
                         static_cast<long long>(epoch_steps), epoch_loss / static_cast<double>(epoch_steps),
                         sft_lr(s, oc.lr, r.steps - 1, total_steps),
                         std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

SftResult run_sft(const TrainConfig& cfg, const std::atomic<bool>& stop) {
    const auto& s = cfg.sft;
    if (s.data.empty() && s.tasks.empty())
        throw std::runtime_error("sft.data (a JSONL file of prompt/completion pairs) or sft.tasks is not set");
    if (s.out.empty()) throw std::runtime_error("sft.out is not set (where the adapter goes)");
    fs::create_directories(s.out);
    const std::string model_dir = materialise_model(cfg.coder, s.out + "/base", cfg.seed);
    Policy policy("coder", cfg.coder, model_dir, cfg.device, cfg.seed);
    int64_t skipped = 0;
    auto pairs = load_sft_pairs(cfg, policy, &skipped);
    if (pairs.empty()) throw std::runtime_error("no usable pair (" + std::to_string(skipped) + " too long)");
    SftResult r = sft_train(policy, pairs, cfg, stop);
    r.skipped = skipped;
    r.out = s.out;
    if (cfg.coder.full_finetune)
        save_hf_model(policy.model(), s.out + "/model", policy.model().dtype(), model_dir);
    else
        policy.save(s.out);
    return r;
}

}  // namespace kz
