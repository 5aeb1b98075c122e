// Policy-engine subcommands: tokenize, generate, score, init-model.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/chat.h"
#include "engine/config.h"
#include "engine/generate.h"
#include "engine/device_memory.h"
#include "engine/hf_checkpoint.h"
#include "engine/kernel_profile.h"
#include "engine/lora.h"
#include "engine/model.h"
#include "engine/tokenizer.h"
#include "engine/training.h"

namespace kz::cli {

using json = nlohmann::json;

namespace {

// The prompt as the model sees it: ChatML when asked for, else the text itself.
std::vector<int64_t> prompt_ids(const Tokenizer& tok, const std::string& text, bool chat, const std::string& system) {
    if (!chat) return tok.encode(text);
    std::vector<ChatMessage> msgs;
    if (!system.empty()) msgs.push_back({"system", system});
    msgs.push_back({"user", text});
    return tok.encode(ChatFormat::from_template(tok.chat_template()).render(msgs, true));
}

}  // namespace

Runner add_tokenize(CLI::App& app) {
    auto model = std::make_shared<std::string>(), jsonl = std::make_shared<std::string>();
    auto decode = std::make_shared<bool>(false);
    auto* cmd =
        app.add_subcommand("tokenize", "Token ids of each JSON string line of a JSONL file, one array per line");
    cmd->add_option("--model", *model, "Directory holding tokenizer.json")->required();
    cmd->add_option("--jsonl", *jsonl, "Input: one JSON string per line ('-' for standard input)")->required();
    cmd->add_flag("--decode", *decode,
                  "The reverse: each line a JSON array of ids, printed as a JSON string "
                  "(bytes that are not UTF-8 as U+FFFD)");
    auto chat = std::make_shared<bool>(false);
    cmd->add_flag("--chat", *chat,
                  "Each line a JSON array of {\"role\", \"content\"} messages: the ids of the "
                  "ChatML conversation with the assistant's generation prompt");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            Tokenizer tok = Tokenizer::load(*model);
            const ChatFormat format = ChatFormat::from_template(tok.chat_template());
            std::ifstream file;
            std::istream* in = &std::cin;
            if (*jsonl != "-") {
                file.open(*jsonl);
                if (!file) return usage_error("tokenize", "cannot read " + *jsonl);
                in = &file;
            }
            std::string line;
            for (int64_t n = 1; std::getline(*in, line); ++n) {
                json j;
                try {
                    j = json::parse(line);
                } catch (const json::parse_error& e) {
                    return usage_error("tokenize", *jsonl + " line " + std::to_string(n) + ": not JSON: " + e.what());
                }
                std::string where = *jsonl + " line " + std::to_string(n) + ": ";
                if (*chat) {
                    std::vector<ChatMessage> msgs;
                    if (!j.is_array()) return usage_error("tokenize", where + "not a JSON array of messages");
                    for (const auto& m : j) {
                        if (!m.is_object() || !m.contains("role") || !m.contains("content") || !m["role"].is_string() ||
                            !m["content"].is_string())
                            return usage_error("tokenize", where + "a message needs string \"role\" and \"content\"");
                        msgs.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
                    }
                    std::cout << json(tok.encode(format.render(msgs, true))).dump() << "\n";
                    continue;
                }
                if (*decode) {
                    if (!j.is_array()) return usage_error("tokenize", where + "not a JSON array of token ids");
                    std::vector<int64_t> ids;
                    for (const auto& x : j) {
                        if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= tok.vocab_size())
                            return usage_error("tokenize", where + x.dump() + " is not a token id");
                        ids.push_back(x.get<int64_t>());
                    }
                    std::cout << json(tok.decode(ids)).dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
                    continue;
                }
                if (!j.is_string()) return usage_error("tokenize", where + "not a JSON string");
                std::cout << json(tok.encode(j.get<std::string>())).dump() << "\n";
            }
            return 0;
        } catch (const std::exception& e) {
            return usage_error("tokenize", e.what());
        }
    };
}

Runner add_generate(CLI::App& app) {
    struct Args : ModelArgs {
        std::string prompt, system;
        bool chat = false, as_json = false;
        int64_t max_new = 256, n = 1;
        std::optional<double> temperature, top_p;
        std::optional<int64_t> top_k;
        uint64_t seed = 0;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("generate", "Sample completions of a prompt");
    add_model_options(cmd, *a);
    cmd->add_option("--prompt", a->prompt, "Prompt text (special tokens in it are matched as tokens)")->required();
    cmd->add_flag("--chat", a->chat, "Wrap the prompt as a ChatML user turn with a generation prompt");
    cmd->add_option("--system", a->system, "System message (with --chat)");
    cmd->add_option("--max-new-tokens", a->max_new, "Most tokens per completion")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 20));
    cmd->add_option("--temperature", a->temperature, "0 = greedy (default: generation_config.json, else 1)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--top-p", a->top_p, "Nucleus mass (default: generation_config.json, else 1)")
        ->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--top-k", a->top_k, "Most likely tokens kept, 0 = all")->check(CLI::NonNegativeNumber);
    cmd->add_option("--seed", a->seed, "Sampling seed");
    cmd->add_option("--n", a->n, "Samples (one batch)")->check(CLI::Range(int64_t{1}, int64_t{4096}));
    cmd->add_flag("--json", a->as_json, "One {\"text\", \"token_ids\", \"logprobs\"} object per sample and line");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            Tokenizer tok = Tokenizer::load(a->model);
            Model model = load_model(*a);
            GenerationDefaults g = GenerationDefaults::load(a->model);
            GenerateRequest req;
            auto ids = prompt_ids(tok, a->prompt, a->chat, a->system);
            req.prompts.assign(a->n, ids);
            req.max_new_tokens = a->max_new;
            req.stop_ids = stop_ids(tok, model.config(), g);
            bool greedy_default = g.do_sample && !*g.do_sample;
            req.sampling.temperature = a->temperature.value_or(greedy_default ? 0.0 : g.temperature.value_or(1.0));
            req.sampling.top_p = a->top_p.value_or(g.top_p.value_or(1.0));
            req.sampling.top_k = a->top_k.value_or(g.top_k.value_or(0));
            req.sampling.seed = a->seed;
            if (req.sampling.top_p <= 0.0) return usage_error("generate", "--top-p must be > 0");
            // Streams the first sample as text; holds back the bytes of a character split across tokens.
            std::string pending;
            std::set<int64_t> stops(req.stop_ids.begin(), req.stop_ids.end());
            TokenCallback stream;
            if (!a->as_json)
                stream = [&](size_t row, int64_t token) {
                    if (row != 0 || stops.count(token)) return;
                    pending += tok.token_bytes(token);
                    size_t n = complete_utf8_prefix(pending);
                    std::cout << pending.substr(0, n) << std::flush;
                    pending.erase(0, n);
                };
            auto outs = generate(model, req, stream);
            if (!a->as_json) {
                std::cout << pending << "\n";
                for (size_t i = 1; i < outs.size(); ++i)
                    std::cout << "--- sample " << i << "\n" << tok.decode(outs[i].text_tokens()) << "\n";
                return 0;
            }
            for (const auto& c : outs) {
                std::string text = tok.decode(c.text_tokens());
                json j = {{"text", text}, {"token_ids", c.tokens}, {"logprobs", c.logprobs}, {"stopped", c.stopped}};
                // Bytes that are not UTF-8 (a completion cut inside a character) print as U+FFFD.
                std::cout << j.dump(-1, ' ', false, json::error_handler_t::replace) << "\n";
            }
            return 0;
        } catch (const std::exception& e) {
            return usage_error("generate", e.what());
        }
    };
}

Runner add_score(CLI::App& app) {
    struct Args : ModelArgs {
        std::string prompt, completion;
        bool as_json = false;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("score", "Per-token log-probabilities of a completion given a prompt");
    add_model_options(cmd, *a);
    cmd->add_option("--prompt", a->prompt, "Prompt text")->required();
    cmd->add_option("--completion", a->completion, "Completion text (tokenized on its own)")->required();
    cmd->add_flag("--json", a->as_json, "Print {\"token_ids\", \"logprobs\", \"sum\"}");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            Tokenizer tok = Tokenizer::load(a->model);
            Model model = load_model(*a);
            auto p = tok.encode(a->prompt), c = tok.encode(a->completion);
            auto lp = score(model, p, c);
            double sum = 0;
            for (float x : lp) sum += x;
            if (a->as_json) {
                std::cout << json{{"token_ids", c}, {"logprobs", lp}, {"sum", sum}}.dump() << "\n";
            } else {
                for (size_t i = 0; i < c.size(); ++i)
                    std::cout << c[i] << "\t" << lp[i] << "\t"
                              << json(tok.token_bytes(c[i])).dump(-1, ' ', false, json::error_handler_t::replace)
                              << "\n";
                std::cout << "sum\t" << sum << "\n";
            }
            return 0;
        } catch (const std::exception& e) {
            return usage_error("score", e.what());
        }
    };
}

Runner add_init_model(CLI::App& app) {
    struct Args {
        std::string arch = "qwen2", preset = "tiny", tokenizer, out, dtype = "auto";
        uint64_t seed = 0;
        std::optional<double> init_range;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("init-model", "Write a randomly initialised model in Hugging Face format");
    cmd->add_option("--arch", a->arch, "qwen2 or qwen3")->check(CLI::IsMember({"qwen2", "qwen3"}));
    cmd->add_option("--preset", a->preset, "Model shape (engine/config.h)")
        ->check(CLI::IsMember(ModelConfig::preset_names()));
    cmd->add_option("--tokenizer", a->tokenizer, "Directory with tokenizer.json (copied; sets the vocabulary)")
        ->required();
    cmd->add_option("--out", a->out, "Output directory")->required();
    cmd->add_option("--seed", a->seed, "Initialisation seed");
    cmd->add_option("--init-range", a->init_range, "Standard deviation of the weights (default 0.02)")
        ->check(CLI::PositiveNumber);
    cmd->add_option("--dtype", a->dtype, "Saved dtype: float32, bfloat16 or auto (bf16 for 7b-shape, fp32 otherwise)");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            Tokenizer tok = Tokenizer::load(a->tokenizer);
            int64_t vocab = a->preset == "7b-shape" ? std::max<int64_t>(152064, tok.vocab_size())
                                                    : (tok.vocab_size() + 127) / 128 * 128;
            ModelConfig cfg = ModelConfig::preset(arch_from_name(a->arch), a->preset, vocab);
            if (a->init_range) cfg.initializer_range = *a->init_range;
            if (auto e = tok.eos_id()) cfg.eos_token_ids = {*e};
            if (auto e = tok.token_id("<|endoftext|>")) cfg.bos_token_id = *e;
            torch::ScalarType dt = a->dtype == "auto" ? (a->preset == "7b-shape" ? torch::kBFloat16 : torch::kFloat32)
                                                      : dtype_from_name(a->dtype);
            Model m = Model::random(cfg, torch::kCPU, dt, a->seed);
            save_hf_model(m, a->out, dt, a->tokenizer);
            std::cout << a->out << "\n";
            return 0;
        } catch (const std::exception& e) {
            return usage_error("init-model", e.what());
        }
    };
}

}  // namespace kz::cli

namespace kz::cli {

namespace {

// GPU time per kernel over `steps` runs of something, per run: the total, the kernel count and the
// `top` kernels by time.
json kernel_summary(const std::vector<KernelTime>& kernels, int64_t steps, size_t top_n) {
    double total = 0;
    int64_t calls = 0;
    for (const auto& k : kernels) total += k.total_us, calls += k.calls;
    json top = json::array();
    for (size_t i = 0; i < kernels.size() && i < top_n; ++i)
        top.push_back({{"kernel", kernels[i].name.substr(0, 120)},
                       {"calls_per_step", static_cast<double>(kernels[i].calls) / steps},
                       {"us_per_step", kernels[i].total_us / steps}});
    return {{"gpu_us_per_step", total / steps}, {"kernels_per_step", static_cast<double>(calls) / steps}, {"top", top}};
}

// GPU time per kernel of one eager decode step (with sampling), averaged over 8 steps; under
// "prefill", that of the prefill.
json profile_decode(const Model& model, const std::vector<std::vector<int64_t>>& prompts, const SamplingParams& sp) {
    constexpr int64_t kSteps = 8;
    BatchDecoder dec(model, prompts, kSteps, /*cuda_graph=*/false);
    torch::NoGradGuard no_grad;
    torch::Tensor logits;
    auto prefill = profile_kernels([&] { logits = dec.prefill(); });
    at::Generator gen = make_generator(model.device(), 0);
    auto kernels = profile_kernels([&] {
        for (int64_t s = 0; s < kSteps; ++s) logits = dec.step(sample(logits, sp, gen).tokens);
    });
    auto j = kernel_summary(kernels, kSteps, 25);
    j["prefill"] = kernel_summary(prefill, 1, 25);
    return j;
}

struct BenchEngineArgs {
    std::string model, arch = "qwen2", preset = "7b-shape", device = "auto", dtype = "auto";
    std::vector<int64_t> batches = {1, 16, 64};
    int64_t prompt_len = 256, new_tokens = 256, repeats = 1;
    bool as_json = false, no_graph = false, profile = false;
    std::string mode = "generate";
    int64_t lora_rank = 64, train_batch = 8, seq_len = 2048, steps = 4;
    double lora_alpha = 128;
    bool full = false, no_recompute = false;
    std::string lora_compute = "adapter";
};

// --mode train: optimizer steps on random token batches; the median step's time.
int bench_train(Model& model, const BenchEngineArgs& a, torch::Device dev, int64_t vocab) {
    LoraConfig lc;
    lc.rank = a.lora_rank;
    lc.alpha = a.lora_alpha;
    std::vector<std::pair<std::string, torch::Tensor>> params;
    if (a.full) {
        params = full_parameters(model);
    } else {
        attach_lora(model, lc, 0);
        params = lora_parameters(model);
    }
    model.recompute_layers = !a.no_recompute;
    model.lora_in_base_dtype = a.lora_compute == "base";
    PolicyOptimizer opt(params, OptimConfig{});
    const int64_t B = a.train_batch, T = a.seq_len;
    auto random_batch = [&] {
        return TrainBatch{torch::randint(vocab, {B, T}, torch::TensorOptions().dtype(torch::kInt64)).to(dev),
                          torch::ones({B, T}, torch::TensorOptions().dtype(torch::kBool).device(dev)),
                          torch::ones({B, T}, torch::TensorOptions().dtype(torch::kFloat32).device(dev))};
    };
    reset_peak_allocated(dev);
    std::vector<double> secs;
    double loss = 0;
    for (int64_t i = 0; i < a.steps; ++i) {
        TrainBatch batch = random_batch();
        if (dev.is_cuda()) torch::cuda::synchronize();
        auto t1 = std::chrono::steady_clock::now();
        loss = accumulate(model, batch, weighted_nll);
        opt.step();
        if (dev.is_cuda()) torch::cuda::synchronize();
        if (i > 0) secs.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
    }
    std::sort(secs.begin(), secs.end());
    double med = secs[secs.size() / 2];
    json profile;
    if (a.profile && dev.is_cuda()) {  // one more step, under the profiler
        TrainBatch batch = random_batch();
        profile = kernel_summary(profile_kernels([&] {
                                     accumulate(model, batch, weighted_nll);
                                     opt.step();
                                 }),
                                 1, 40);
    }
    int64_t trainable = 0;
    for (auto& [n, p] : params) trainable += p.numel();
    json j = {{"mode", "train"},
              {"batch", B},
              {"seq_len", T},
              {"seconds_per_step", med},
              {"seconds_min", secs.front()},
              {"seconds_max", secs.back()},
              {"tokens_per_s", static_cast<double>(B * T) / med},
              {"loss", loss},
              {"peak_allocated_gb", static_cast<double>(peak_allocated_bytes(dev)) / 1e9},
              {"trainable_parameters", trainable},
              {"lora_rank", a.full ? 0 : a.lora_rank},
              {"lora_compute", a.lora_compute},
              {"recompute", !a.no_recompute},
              {"device", dev.str()},
              {"timed_steps", secs.size()}};
    if (!profile.is_null()) j["profile"] = profile;
    if (a.as_json)
        std::cout << j.dump() << std::endl;
    else
        std::printf("train %s B=%lld T=%lld: %.2f s/step  %.0f tok/s  peak %.1f GB\n",
                    a.full ? "full" : ("LoRA r" + std::to_string(a.lora_rank)).c_str(), static_cast<long long>(B),
                    static_cast<long long>(T), med, j["tokens_per_s"].get<double>(),
                    j["peak_allocated_gb"].get<double>());
    return 0;
}

// --mode generate: every batch size, prompts of random tokens, each row to --new-tokens.
int bench_generate(Model& model, const BenchEngineArgs& a, torch::Device dev, int64_t vocab) {
    for (int64_t B : a.batches) {
        auto prompts_t = torch::randint(vocab, {B, a.prompt_len}, torch::TensorOptions().dtype(torch::kInt64));
        std::vector<std::vector<int64_t>> prompts(B);
        for (int64_t b = 0; b < B; ++b)
            prompts[b].assign(prompts_t[b].data_ptr<int64_t>(), prompts_t[b].data_ptr<int64_t>() + a.prompt_len);
        GenerateRequest req;
        req.prompts = prompts;
        req.sampling.temperature = 1.0;
        req.cuda_graph = !a.no_graph;
        req.max_new_tokens = 8;
        generate(model, req);  // warm-up: allocator, kernels
        req.max_new_tokens = a.new_tokens;
        std::vector<double> totals, steps_ms;
        GenerateStats st;
        for (int64_t r = 0; r < a.repeats; ++r) {
            req.sampling.seed = static_cast<uint64_t>(r);
            auto t1 = std::chrono::steady_clock::now();
            generate(model, req, {}, &st);
            totals.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count());
            steps_ms.push_back(st.decode_s / std::max<int64_t>(1, st.steps) * 1e3);
        }
        std::sort(totals.begin(), totals.end());
        std::sort(steps_ms.begin(), steps_ms.end());
        double total = totals[totals.size() / 2];
        json j = {{"batch", B},
                  {"prompt_len", a.prompt_len},
                  {"new_tokens", a.new_tokens},
                  {"seconds", total},
                  {"seconds_min", totals.front()},
                  {"seconds_max", totals.back()},
                  {"tokens_per_s", static_cast<double>(B * a.new_tokens) / total},
                  {"decode_ms_per_step", steps_ms[steps_ms.size() / 2]},
                  {"prefill_s", st.prefill_s},
                  {"device", dev.str()},
                  {"repeats", a.repeats},
                  {"cuda_graph", req.cuda_graph && dev.is_cuda()}};
        if (a.profile && dev.is_cuda()) j["profile"] = profile_decode(model, prompts, req.sampling);
        if (a.as_json) {
            std::cout << j.dump() << std::endl;
        } else {
            std::printf("batch %4lld  prompt %lld  new %lld: %.2f s  %.0f tok/s  %.2f ms/step  (prefill %.3f s)\n",
                        static_cast<long long>(B), static_cast<long long>(a.prompt_len),
                        static_cast<long long>(a.new_tokens), total, j["tokens_per_s"].get<double>(),
                        j["decode_ms_per_step"].get<double>(), st.prefill_s);
            std::fflush(stdout);
        }
    }
    return 0;
}

}  // namespace

Runner add_bench_engine(CLI::App& app) {
    auto a = std::make_shared<BenchEngineArgs>();
    auto* cmd =
        app.add_subcommand("bench-engine", "Generation throughput: random prompts, every row runs to --new-tokens");
    cmd->add_option("--model", a->model,
                    "Hugging Face model directory (default: a random --preset model built on the device)");
    cmd->add_option("--arch", a->arch, "qwen2 or qwen3 (with --preset)")->check(CLI::IsMember({"qwen2", "qwen3"}));
    cmd->add_option("--preset", a->preset, "Model shape (engine/config.h)")
        ->check(CLI::IsMember(ModelConfig::preset_names()));
    cmd->add_option("--batch", a->batches, "Comma-separated batch sizes")
        ->delimiter(',')
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--prompt-len", a->prompt_len, "Prompt tokens per row")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--new-tokens", a->new_tokens, "New tokens per row")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--repeats", a->repeats, "Timed runs per batch size (median reported)")->check(CLI::Range(1, 100));
    cmd->add_option("--device", a->device, "cpu, cuda, cuda:N or auto");
    cmd->add_option("--dtype", a->dtype, "float32, bfloat16, float16 or auto");
    cmd->add_flag("--json", a->as_json, "One JSON object per batch size");
    cmd->add_flag("--no-cuda-graph", a->no_graph, "Launch the decode step's kernels one by one");
    cmd->add_flag("--profile", a->profile,
                  "also report GPU time per kernel: of 8 eager decode steps (generate, with sampling) or one more "
                  "training step (train)");
    cmd->add_option("--mode", a->mode, "generate, or train (one optimizer step per batch of random tokens)")
        ->check(CLI::IsMember({"generate", "train"}));
    cmd->add_option("--lora-compute", a->lora_compute,
                    "train: LoRA products in the adapters' dtype (adapter: fp32, as peft) or the base's (base: bf16, "
                    "as autocast)")
        ->check(CLI::IsMember({"adapter", "base"}));
    cmd->add_option("--lora-rank", a->lora_rank, "train: LoRA rank on all linear layers")->check(CLI::Range(1, 4096));
    cmd->add_option("--lora-alpha", a->lora_alpha, "train: LoRA alpha")->check(CLI::PositiveNumber);
    cmd->add_flag("--full", a->full, "train: full fine-tuning instead of LoRA");
    cmd->add_option("--train-batch", a->train_batch, "train: sequences per step")->check(CLI::Range(1, 4096));
    cmd->add_option("--seq-len", a->seq_len, "train: tokens per sequence")->check(CLI::Range(2, 1 << 20));
    cmd->add_option("--steps", a->steps, "train: steps (the first is warm-up, the median of the rest is reported)")
        ->check(CLI::Range(2, 1000));
    cmd->add_flag("--no-recompute", a->no_recompute, "train: keep every layer's activations");
    return [=]() -> int {
        if (!cmd->parsed()) return -1;
        try {
            torch::Device dev = device_from_name(a->device);
            torch::ScalarType dt = dtype_from_name(a->dtype, dev);
            auto t0 = std::chrono::steady_clock::now();
            Model model =
                a->model.empty()
                    ? Model::random(ModelConfig::preset(arch_from_name(a->arch), a->preset, 152064), dev, dt, 0)
                    : Model::load(a->model, dev, dt);
            double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            std::cerr << "[bench-engine] model ready in " << load_s << " s\n";
            const int64_t vocab = std::min<int64_t>(model.config().vocab_size, 150000);
            return a->mode == "train" ? bench_train(model, *a, dev, vocab) : bench_generate(model, *a, dev, vocab);
        } catch (const std::exception& e) {
            return usage_error("bench-engine", e.what());
        }
    };
}

}  // namespace kz::cli
