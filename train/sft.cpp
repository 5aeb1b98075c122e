#include "train/sft.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>

#include "engine/hf_checkpoint.h"
#include "train/policy.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

json SftResult::to_json() const {
    return {{"pairs", pairs},           {"skipped", skipped},     {"steps", steps}, {"tokens", tokens},
            {"first_loss", first_loss}, {"last_loss", last_loss}, {"seconds", seconds}, {"out", out}};
}

namespace {

struct Pair {
    std::vector<int64_t> prompt, completion;
};

std::vector<ChatMessage> prompt_messages(const json& p, const std::string& where) {
    if (p.is_string()) return {{"user", p.get<std::string>()}};
    if (!p.is_array() || p.empty()) throw std::runtime_error(where + ": \"prompt\" must be a string or a list of messages");
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

SftResult run_sft(const TrainConfig& cfg, const std::atomic<bool>& stop) {
    const auto& s = cfg.sft;
    if (s.data.empty()) throw std::runtime_error("sft.data is not set (a JSONL file of prompt/completion pairs)");
    if (s.out.empty()) throw std::runtime_error("sft.out is not set (where the adapter goes)");
    if (s.epochs < 1 || s.batch_size < 1) throw std::runtime_error("sft.epochs and sft.batch_size must be >= 1");
    std::ifstream in(s.data);
    if (!in) throw std::runtime_error("cannot read sft.data " + s.data);
    auto t0 = std::chrono::steady_clock::now();
    fs::create_directories(s.out);
    const std::string model_dir = materialise_model(cfg.coder, s.out + "/base", cfg.seed);
    Policy policy("coder", cfg.coder, model_dir, cfg.device, cfg.seed);

    SftResult r;
    r.out = s.out;
    std::vector<Pair> pairs;
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
        Pair p;
        p.prompt = policy.encode_chat(prompt_messages(j["prompt"], where));
        p.completion = policy.tokenizer().encode(j["completion"].get<std::string>());
        if (!policy.stops().empty()) p.completion.push_back(policy.stops().front());
        // The chat template's end of turn when the tokenizer has one: what generation stops on.
        if (auto im_end = policy.tokenizer().token_id("<|im_end|>")) p.completion.back() = *im_end;
        if (static_cast<int64_t>(p.prompt.size() + p.completion.size()) > s.max_tokens) {
            ++r.skipped;
            continue;
        }
        pairs.push_back(std::move(p));
    }
    r.pairs = static_cast<int64_t>(pairs.size());
    if (pairs.empty()) throw std::runtime_error(s.data + " holds no usable pair (" + std::to_string(r.skipped) + " too long)");

    std::mt19937_64 rng(cfg.seed);
    const torch::Device dev = policy.model().device();
    for (int e = 0; e < s.epochs && !stop; ++e) {
        std::vector<size_t> order(pairs.size());
        for (size_t i = 0; i < order.size(); ++i) order[i] = i;
        std::shuffle(order.begin(), order.end(), rng);
        for (size_t b = 0; b < order.size() && !stop; b += static_cast<size_t>(s.batch_size)) {
            const size_t n = std::min(order.size() - b, static_cast<size_t>(s.batch_size));
            int64_t T = 0;
            for (size_t k = 0; k < n; ++k) {
                const Pair& p = pairs[order[b + k]];
                T = std::max<int64_t>(T, static_cast<int64_t>(p.prompt.size() + p.completion.size()));
            }
            const auto B = static_cast<int64_t>(n);
            auto ids = torch::zeros({B, T}, torch::kInt64);
            auto valid = torch::zeros({B, T}, torch::kBool);
            auto weights = torch::zeros({B, T}, torch::kFloat32);  // 1 where ids[:, t] is a completion token
            for (int64_t k = 0; k < B; ++k) {
                const Pair& p = pairs[order[b + static_cast<size_t>(k)]];
                const auto P = static_cast<int64_t>(p.prompt.size()), L = static_cast<int64_t>(p.completion.size());
                for (int64_t t = 0; t < P; ++t) ids[k][t] = p.prompt[static_cast<size_t>(t)];
                for (int64_t t = 0; t < L; ++t) ids[k][P + t] = p.completion[static_cast<size_t>(t)];
                valid[k].slice(0, 0, P + L).fill_(true);
                weights[k].slice(0, P, P + L).fill_(1.0);
                r.tokens += L;
            }
            TrainBatch batch{ids.to(dev), valid.to(dev), weights.to(dev)};
            const double loss = accumulate(policy.model(), batch, weighted_nll, 1);
            policy.optimizer().step();
            if (r.steps == 0) r.first_loss = loss;
            r.last_loss = loss;
            ++r.steps;
            std::fprintf(stderr, "[sft] epoch %d step %lld loss %.4f\n", e + 1, static_cast<long long>(r.steps), loss);
        }
    }
    if (cfg.coder.full_finetune) {
        save_hf_model(policy.model(), s.out + "/model", policy.model().dtype(), model_dir);
    } else {
        policy.save(s.out);
    }
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
}

}  // namespace kz
