#include "train/sft.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>

#include "bench/bench_run.h"
#include "prompts/coder_prompt.h"
#include "common/files.h"
#include "common/hash.h"
#include "engine/hf_checkpoint.h"
#include "train/checkpoint_series.h"
#include "train/policy.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

json SftResult::to_json() const {
    return {{"pairs", pairs},
            {"skipped", skipped},
            {"steps", steps},
            {"total_steps", total_steps},
            {"stopped", stopped},
            {"tokens", tokens},
            {"first_loss", first_loss},
            {"last_loss", last_loss},
            {"seconds", seconds},
            {"out", out},
            {"held_out_loss", held_out_loss}};
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

// Reads pairs from a JSONL file (sft.data's format), each to `add`; `key` names the setting in errors.
void read_jsonl_pairs(const std::string& path, const std::string& key,
                      const std::function<void(const std::vector<ChatMessage>&, const std::string&)>& add) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error("cannot read " + key + " " + path);
    std::string line;
    for (int n = 1; std::getline(in, line); ++n) {
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        const std::string where = path + ":" + std::to_string(n);
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

// Tokenises pairs for `policy` into `pairs`; those over sft.max_tokens are counted in `too_long`.
struct PairTokeniser {
    const Policy& policy;
    int64_t max_tokens;
    std::vector<SftPair>& pairs;
    int64_t& too_long;
    void operator()(const std::vector<ChatMessage>& prompt, const std::string& completion) const {
        SftPair p;
        p.prompt = policy.encode_chat(prompt);
        p.completion = policy.tokenizer().encode(completion);
        // The chat template's end of turn when the tokenizer has one: what generation stops on.
        if (auto im_end = policy.tokenizer().token_id("<|im_end|>"))
            p.completion.push_back(*im_end);
        else if (!policy.stops().empty())
            p.completion.push_back(policy.stops().front());
        if (static_cast<int64_t>(p.prompt.size() + p.completion.size()) > max_tokens)
            ++too_long;
        else
            pairs.push_back(std::move(p));
    }
};

}  // namespace

std::vector<SftPair> load_sft_pairs(const TrainConfig& cfg, const Policy& policy, int64_t* skipped) {
    const auto& s = cfg.sft;
    std::vector<SftPair> pairs;
    int64_t too_long = 0;
    const PairTokeniser add{policy, s.max_tokens, pairs, too_long};
    if (!s.data.empty()) read_jsonl_pairs(s.data, "sft.data", add);
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

std::vector<SftPair> load_sft_eval_pairs(const TrainConfig& cfg, const Policy& policy, int64_t* skipped) {
    std::vector<SftPair> pairs;
    int64_t too_long = 0;
    if (!cfg.sft.eval_data.empty())
        read_jsonl_pairs(cfg.sft.eval_data, "sft.eval_data",
                         PairTokeniser{policy, cfg.sft.max_tokens, pairs, too_long});
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

namespace {

// What a checkpoint holds beside the optimizer's state: where in which epoch the run stands.
struct SftPosition {
    int epoch = 0;
    size_t next = 0;            // the first pair (index into order) not yet trained on
    std::vector<size_t> order;  // the epoch's data order; empty: the epoch has not begun
    double epoch_loss = 0;
    int64_t epoch_steps = 0;
};

// sft.deterministic: PyTorch's deterministic algorithms, strict, and cuDNN's, while alive; the settings
// before it are restored after, so that a `train` run's warm start does not leave its RL steps in them.
// Strict mode is what makes attention deterministic: scaled_dot_product_attention then skips its cuDNN
// backend and runs flash attention's deterministic backward.
class DeterministicScope {
public:
    explicit DeterministicScope(const SftSpec& s)
        : on_(s.deterministic),
          was_(at::globalContext().deterministicAlgorithms()),
          was_warn_only_(at::globalContext().deterministicAlgorithmsWarnOnly()),
          was_cudnn_(at::globalContext().deterministicCuDNN()) {
        if (!on_) return;
        prepare_deterministic_sft(s);
        at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
        at::globalContext().setDeterministicCuDNN(true);
    }
    ~DeterministicScope() {
        if (!on_) return;
        at::globalContext().setDeterministicAlgorithms(was_, was_warn_only_);
        at::globalContext().setDeterministicCuDNN(was_cudnn_);
    }
    DeterministicScope(const DeterministicScope&) = delete;
    DeterministicScope& operator=(const DeterministicScope&) = delete;

private:
    bool on_, was_, was_warn_only_, was_cudnn_;
};

std::string pairs_digest(const std::vector<SftPair>& pairs) {
    std::string bytes;
    for (const auto& p : pairs)
        for (const auto* part : {&p.prompt, &p.completion}) {
            bytes.append(reinterpret_cast<const char*>(part->data()), part->size() * sizeof(int64_t));
            bytes.push_back('\0');  // where one part ends: [1][2 3] differs from [1 2][3]
        }
    return sha256_hex(bytes);
}

}  // namespace

void prepare_deterministic_sft(const SftSpec& s) {
    if (s.deterministic && !std::getenv("CUBLAS_WORKSPACE_CONFIG"))
        ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
}

std::vector<size_t> sft_epoch_order(const std::vector<int64_t>& lengths, int batch_size, bool group_by_length,
                                    std::mt19937_64& rng) {
    std::vector<size_t> order(lengths.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::shuffle(order.begin(), order.end(), rng);
    if (!group_by_length) return order;
    const size_t run = 16 * static_cast<size_t>(std::max(1, batch_size));
    for (size_t b = 0; b < order.size(); b += run)
        std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(b),
                         order.begin() + static_cast<std::ptrdiff_t>(std::min(order.size(), b + run)),
                         [&](size_t x, size_t y) { return lengths[x] > lengths[y]; });
    return order;
}

namespace {

// The pairs `which` as one padded batch on `dev`; `*tokens` grows by their completion tokens.
TrainBatch sft_batch(const std::vector<SftPair>& pairs, const std::vector<size_t>& which, const torch::Device& dev,
                     int64_t* tokens) {
    int64_t T = 0;
    for (size_t i : which) T = std::max(T, static_cast<int64_t>(pairs[i].prompt.size() + pairs[i].completion.size()));
    const auto B = static_cast<int64_t>(which.size());
    auto ids = torch::zeros({B, T}, torch::kInt64);        // (B, T)
    auto valid = torch::zeros({B, T}, torch::kBool);       // (B, T)
    auto weights = torch::zeros({B, T}, torch::kFloat32);  // (B, T): 1 where ids[:, t] is a completion token
    for (int64_t k = 0; k < B; ++k) {
        const SftPair& p = pairs[which[static_cast<size_t>(k)]];
        const auto P = static_cast<int64_t>(p.prompt.size()), L = static_cast<int64_t>(p.completion.size());
        ids[k].slice(0, 0, P).copy_(torch::tensor(p.prompt, torch::kInt64));
        ids[k].slice(0, P, P + L).copy_(torch::tensor(p.completion, torch::kInt64));
        valid[k].slice(0, 0, P + L).fill_(true);
        weights[k].slice(0, P, P + L).fill_(1.0);
        *tokens += L;
    }
    return {ids.to(dev), valid.to(dev), weights.to(dev)};
}

}  // namespace

double sft_held_out_loss(Policy& policy, const std::vector<SftPair>& pairs, int batch_size) {
    const torch::NoGradGuard no_grad;
    const torch::Device dev = policy.model().device();
    double sum = 0;
    int64_t tokens = 0;
    for (size_t b = 0; b < pairs.size(); b += static_cast<size_t>(batch_size)) {
        std::vector<size_t> which;
        for (size_t i = b; i < std::min(pairs.size(), b + static_cast<size_t>(batch_size)); ++i) which.push_back(i);
        int64_t n = 0;
        const TrainBatch batch = sft_batch(pairs, which, dev, &n);
        const torch::Tensor logprobs =
            sequence_logprobs(policy.model(), batch, 1024, ScoredRows::weighted);  // (B, T-1)
        // weighted_nll is the mean over the batch's completion tokens: weighted by their count.
        sum += weighted_nll(logprobs, batch).item<double>() * static_cast<double>(n);
        tokens += n;
    }
    return tokens ? sum / static_cast<double>(tokens) : 0.0;
}

SftResult sft_train(Policy& policy, const std::vector<SftPair>& pairs, const TrainConfig& cfg,
                    const std::atomic<bool>& stop, const SftRunOptions& run) {
    const auto& s = cfg.sft;
    const DeterministicScope deterministic(s);
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
    r.total_steps = batches * s.epochs;
    SftPosition at;
    double seconds_before = 0;  // of the sessions before this one
    std::optional<CheckpointSeries> series;
    if (!run.checkpoints.empty()) {
        series.emplace(run.checkpoints, "step-");
        if (auto n = series->latest()) {
            const std::string dir = series->path(*n);
            const json p = json::parse(read_file(dir + "/progress.json"));
            if (p.at("pairs").get<int64_t>() != r.pairs)
                throw std::runtime_error(dir + " is a checkpoint of " + std::to_string(p.at("pairs").get<int64_t>()) +
                                         " pairs, not of these " + std::to_string(r.pairs));
            opt.load_state(dir + "/optimizer.pt");
            std::istringstream(p.at("rng").get<std::string>()) >> rng;
            at = {p.at("epoch").get<int>(), p.at("next").get<size_t>(), p.at("order").get<std::vector<size_t>>(),
                  p.at("epoch_loss").get<double>(), p.at("epoch_steps").get<int64_t>()};
            r.steps = p.at("steps").get<int64_t>();
            r.tokens = p.at("tokens").get<int64_t>();
            r.first_loss = p.at("first_loss").get<double>();
            r.last_loss = p.at("last_loss").get<double>();
            r.held_out_loss = p.value("held_out_loss", std::vector<double>{});
            seconds_before = p.at("seconds").get<double>();
            std::fprintf(stderr, "[sft] resumed at step %lld of %lld (epoch %d)\n", static_cast<long long>(r.steps),
                         static_cast<long long>(r.total_steps), at.epoch + 1);
        }
    }
    auto elapsed = [&] {
        return seconds_before + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    auto checkpoint = [&] {
        if (!series || series->latest() == r.steps) return;
        series->commit(r.steps, [&](const std::string& dir) {
            opt.save_state(dir + "/optimizer.pt");
            std::ostringstream rs;
            rs << rng;
            json p = {{"pairs", r.pairs},
                      {"epoch", at.epoch},
                      {"next", at.next},
                      {"order", at.order},
                      {"rng", rs.str()},
                      {"epoch_loss", at.epoch_loss},
                      {"epoch_steps", at.epoch_steps},
                      {"steps", r.steps},
                      {"tokens", r.tokens},
                      {"first_loss", r.first_loss},
                      {"last_loss", r.last_loss},
                      {"held_out_loss", r.held_out_loss},
                      {"seconds", elapsed()}};
            write_file_atomic(dir + "/progress.json", p.dump() + "\n");
        });
        series->prune(1);
    };
    std::vector<int64_t> lengths;
    for (const SftPair& p : pairs) lengths.push_back(static_cast<int64_t>(p.prompt.size() + p.completion.size()));
    while (at.epoch < s.epochs && !stop) {
        if (at.order.empty()) {
            at.order = sft_epoch_order(lengths, s.batch_size, s.group_by_length, rng);
            at.next = 0;
            at.epoch_loss = 0;
            at.epoch_steps = 0;
        }
        const std::vector<size_t>& order = at.order;
        for (; at.next < order.size() && !stop; at.next += static_cast<size_t>(s.batch_size)) {
            const size_t n = std::min(order.size() - at.next, static_cast<size_t>(s.batch_size));
            const TrainBatch batch = sft_batch(pairs,
                                               {order.begin() + static_cast<std::ptrdiff_t>(at.next),
                                                order.begin() + static_cast<std::ptrdiff_t>(at.next + n)},
                                               dev, &r.tokens);
            opt.set_lr(sft_lr(s, oc.lr, r.steps, r.total_steps));
            const double loss = accumulate(policy.model(), batch, weighted_nll, 1, 1024, ScoredRows::weighted);
            opt.step();
            if (r.steps == 0) r.first_loss = loss;
            r.last_loss = loss;
            ++r.steps;
            at.epoch_loss += loss;
            ++at.epoch_steps;
            if (run.after_step) run.after_step(r.steps);
        }
        if (at.next < order.size()) break;  // stopped part-way through the epoch
        std::string held_out;
        if (!run.held_out.empty()) {
            r.held_out_loss.push_back(sft_held_out_loss(policy, run.held_out, s.batch_size));
            char buf[48];
            std::snprintf(buf, sizeof buf, ", held-out loss %.4f", r.held_out_loss.back());
            held_out = buf;
        }
        if (at.epoch_steps)
            std::fprintf(stderr, "[sft] epoch %d: %lld steps, mean loss %.4f%s, lr %.2e, %.0f s\n", at.epoch + 1,
                         static_cast<long long>(at.epoch_steps), at.epoch_loss / static_cast<double>(at.epoch_steps),
                         held_out.c_str(), sft_lr(s, oc.lr, r.steps - 1, r.total_steps), elapsed());
        at = {at.epoch + 1, 0, {}, 0, 0};  // a finished epoch's checkpoint points at the next one
        checkpoint();
    }
    r.stopped = r.steps < r.total_steps;
    if (r.stopped) checkpoint();
    r.seconds = elapsed();
    return r;
}

SftResult run_sft(const TrainConfig& cfg, const std::atomic<bool>& stop, bool resume) {
    const auto& s = cfg.sft;
    if (s.data.empty() && s.tasks.empty())
        throw std::runtime_error("sft.data (a JSONL file of prompt/completion pairs) or sft.tasks is not set");
    if (s.out.empty()) throw std::runtime_error("sft.out is not set (where the adapter goes)");
    fs::create_directories(s.out);
    const FileLock lock(s.out + "/sft.lock", s.out + " is in use by another SFT run");
    const std::string checkpoints = s.out + "/checkpoints";
    const bool interrupted = fs::is_directory(checkpoints) && CheckpointSeries(checkpoints, "step-").latest();
    if (interrupted && !resume)
        throw std::runtime_error(s.out + " holds an interrupted SFT run (" + checkpoints +
                                 "): pass --resume to continue it, or another --out");
    if (!interrupted && resume)
        throw std::runtime_error(s.out + " holds no interrupted SFT run to resume (no checkpoint in " + checkpoints +
                                 ")");
    prepare_deterministic_sft(s);  // the strict mode itself is sft_train's
    const std::string model_dir = materialise_model(cfg.coder, s.out + "/base", cfg.seed);
    Policy policy("coder", cfg.coder, model_dir, cfg.device, cfg.seed);
    int64_t skipped = 0;
    auto pairs = load_sft_pairs(cfg, policy, &skipped);
    if (pairs.empty()) throw std::runtime_error("no usable pair (" + std::to_string(skipped) + " too long)");

    const json full = cfg.to_json();
    json record = {{"seed", full.at("seed")},
                   {"backend", full.at("backend")},
                   {"format", full.at("format")},
                   {"coder", full.at("coder")},
                   {"sft", full.at("sft")},
                   {"pairs", pairs.size()},
                   {"pairs_sha256", pairs_digest(pairs)}};
    record["sft"].erase("out");
    const std::string record_path = s.out + "/sft.json";
    if (resume) {
        const json was = json::parse(read_file(record_path));
        std::string diff;
        for (const auto& [k, v] : record.items())
            if (!was.contains(k) || was[k] != v) diff += (diff.empty() ? "" : ", ") + k;
        if (!diff.empty())
            throw std::runtime_error(
                s.out + " was started with another configuration or other pairs (differs in: " + diff + ")");
    } else {
        write_file_atomic(record_path, record.dump(2) + "\n");
    }

    int64_t eval_skipped = 0;
    SftRunOptions run{checkpoints, {}, load_sft_eval_pairs(cfg, policy, &eval_skipped)};
    if (!s.eval_data.empty() && run.held_out.empty())
        throw std::runtime_error("sft.eval_data " + s.eval_data + " has no usable pair (" +
                                 std::to_string(eval_skipped) + " too long)");
    SftResult r = sft_train(policy, pairs, cfg, stop, run);
    r.skipped = skipped;
    r.out = s.out;
    if (r.stopped) return r;
    if (cfg.coder.full_finetune) {
        // Renamed into place whole: a directory named model is a finished one.
        const std::string model = s.out + "/model", tmp = model + ".tmp";
        fs::remove_all(tmp);
        save_hf_model(policy.model(), tmp, policy.model().dtype(), model_dir);
        fs::remove_all(model);
        fs::rename(tmp, model);
    } else {
        policy.save(s.out);
    }
    fs::remove_all(checkpoints);
    return r;
}

}  // namespace kz
