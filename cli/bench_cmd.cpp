// kernelzero bench: a Coder (the policy engine, or the reference self-test) on KernelBench-format
// task sets, with KernelBench's metrics and reports (bench/bench_run.h).
#include <cstdio>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "bench/bench_run.h"
#include "bench/openai_client.h"
#include "cli/commands.h"
#include "cli/model_options.h"
#include "engine/chat.h"
#include "engine/generate.h"
#include "engine/lora.h"
#include "train/policy.h"
#include "verify/farm.h"
#include "verify/verifier.h"

namespace kz::cli {

namespace {

// The policy engine as a completion source (train/policy.h), owning its model and tokenizer. The
// weights load at the first complete(): a resumed run whose completions are all recorded never loads
// them, and still has its run.json checked. The tokenizer, config and adapter config are read at once,
// so that a wrong --model or --adapter fails before run.json is written.
class EngineSource : public CompletionSource {
public:
    EngineSource(const ModelArgs& args, SamplingParams sampling, int64_t max_new_tokens, int batch)
        : args_(args),
          tok_(Tokenizer::load(args.model)),
          stops_(stop_ids(tok_, ModelConfig::load(args.model), GenerationDefaults::load(args.model))),
          sampling_(sampling),
          max_new_tokens_(max_new_tokens),
          batch_(batch),
          describe_(args.model + (args.adapter.empty() ? "" : " + " + args.adapter)) {
        if (!args.adapter.empty()) read_peft_adapter_config(args.adapter);
    }
    std::vector<std::vector<std::string>> complete(const std::vector<std::vector<ChatMessage>>& prompts,
                                                   int n) override {
        if (!source_) {
            model_ = std::make_unique<Model>(load_model(args_));
            source_ =
                std::make_unique<PolicySource>(*model_, tok_, stops_, sampling_, max_new_tokens_, batch_, describe_);
        }
        return source_->complete(prompts, n);
    }
    std::string describe() const override { return describe_; }
    int batch_prompts() const override { return batch_; }

private:
    ModelArgs args_;
    Tokenizer tok_;
    std::vector<int64_t> stops_;
    SamplingParams sampling_;
    int64_t max_new_tokens_;
    int batch_;
    std::string describe_;
    std::unique_ptr<Model> model_;
    std::unique_ptr<PolicySource> source_;  // refers to *model_ and tok_
};

struct BenchArgs : ModelArgs {
    std::vector<std::string> tasks;
    std::string backend, format, out, policy = "strict", cache_dir, endpoint, served_model, verifier;
    int samples = 1, workers = 0, batch = 8, trials = kVerifyDefaults.trials, concurrency = 8;
    std::vector<int64_t> ks = {1};
    std::optional<double> temperature;
    double top_p = 1.0, timeout = kVerifyDefaults.timeout_s;
    int64_t max_new_tokens = 4096;
    uint64_t seed = 0;
    bool resume = false, as_json = false, no_progress = false;
};

// The Coder the run samples from: the policy engine on --model, or an --endpoint.
std::unique_ptr<CompletionSource> completion_source(const BenchArgs& a, const std::string& device,
                                                    const SamplingParams& sp) {
    if (!a.endpoint.empty()) {
        EndpointOptions eo;
        eo.url = a.endpoint;
        eo.model = a.served_model;
        eo.temperature = sp.temperature;
        eo.top_p = sp.top_p;
        eo.max_tokens = a.max_new_tokens;
        eo.seed = sp.seed;
        eo.concurrency = a.concurrency;
        return std::make_unique<EndpointSource>(eo);
    }
    ModelArgs margs = a;
    margs.device = device;
    return std::make_unique<EngineSource>(margs, sp, a.max_new_tokens, a.batch);
}

VerifyOptions bench_verify_options(const BenchArgs& a, const std::string& device, bool reference) {
    VerifyOptions vo;
    vo.device = device;
    vo.trials = a.trials;
    vo.strict = !reference && a.policy == "strict";
    vo.require_custom_kernel = !reference;
    vo.timeout_s = a.timeout;
    vo.lanes = a.workers;
    vo.compile_workers = a.workers;  // 0 (auto): as many as lanes
    vo.cache_dir = a.cache_dir;
    return vo;
}

void print_metrics(const BenchMetrics& m, const BenchArgs& a) {
    const auto& o = m.overall;
    if (a.as_json) {
        nlohmann::json j = m.to_json();
        j.erase("tasks");
        std::cout << j.dump() << std::endl;
        return;
    }
    std::printf("%lld tasks, %lld samples: %lld correct", static_cast<long long>(o.tasks),
                static_cast<long long>(o.samples), static_cast<long long>(o.correct));
    for (const auto& [k, v] : o.pass_at)
        if (v) std::printf(", pass@%lld %.1f%%", static_cast<long long>(k), 100 * *v);
    std::printf(", fast_1 %.1f%%", 100 * o.fast_eager.at(1.0));
    if (o.geomean_speedup_eager) std::printf(", geomean speedup %.2fx", *o.geomean_speedup_eager);
    std::printf("\nreport: %s/report.html\n", a.out.c_str());
}

int run_bench_cmd(const BenchArgs& a) {
    if (a.model.empty() == a.endpoint.empty())
        return usage_error("bench", "give one of --model DIR, --model reference, --endpoint URL");
    if (!a.endpoint.empty() && a.served_model.empty())
        return usage_error("bench", "--endpoint needs --served-model NAME");
    const bool reference = a.model == "reference";
    const std::string device = verifier_device(a.device);
    if (device.empty())
        return usage_error("bench", "--device must be cpu, cuda, cuda:N or auto, not '" + a.device + "'");
    if (a.backend == "cuda" && device == "cpu") return usage_error("bench", "backend cuda needs a GPU (--device cuda)");
    if (reference && !a.adapter.empty()) return usage_error("bench", "--adapter needs a model, not --model reference");
    try {
        BenchOptions opts;
        opts.out_dir = a.out;
        opts.format = coder_format(a.backend, a.format);
        opts.samples = a.samples;
        opts.ks = a.ks;
        opts.resume = a.resume;
        opts.progress = !a.no_progress;
        std::vector<BenchTask> tasks = load_task_dirs(a.tasks);
        std::unique_ptr<CompletionSource> source;
        if (!reference) {
            SamplingParams sp;
            sp.temperature = a.temperature.value_or(a.samples > 1 ? 1.0 : 0.0);
            sp.top_p = a.top_p;
            sp.seed = a.seed;
            sp.validate();
            opts.settings = {{"temperature", sp.temperature},
                             {"top_p", sp.top_p},
                             {"seed", sp.seed},
                             {"max_new_tokens", a.max_new_tokens},
                             {"policy", a.policy}};
            source = completion_source(a, device, sp);
        } else {
            opts.settings = {{"policy", "lenient"}};
        }
        catch_stop_signals();
        std::unique_ptr<VerifyService> service =
            start_verifier("bench", a.verifier, bench_verify_options(a, device, reference));
        if (!service) return 3;
        // Lanes counted by the verifier itself (auto) are known once it started.
        opts.in_flight = std::max(2, 2 * service->options().lanes);
        if (a.verifier.empty() && a.workers == 0)
            std::fprintf(stderr, "[bench] %d verifier lanes (auto)\n", service->options().lanes);
        print_metrics(run_bench(tasks, opts, source.get(), *service, g_stop), a);
        return 0;
    } catch (const std::exception& e) {
        if (g_stop) {
            std::fprintf(stderr, "kernelzero bench: interrupted; --resume continues the run\n");
            return 130;
        }
        return usage_error("bench", e.what());
    }
}

}  // namespace

Runner add_bench(CLI::App& app) {
    auto a = std::make_shared<BenchArgs>();
    auto* cmd =
        app.add_subcommand("bench", "Evaluate a Coder on KernelBench-format task sets (pass@k, fast_p, speedups)");
    cmd->add_option("--tasks", a->tasks, "A directory of task files (repeat for several; each is a group, e.g. level1)")
        ->required();
    cmd->add_option("--backend", a->backend, "cuda or triton")->required()->check(CLI::IsMember({"cuda", "triton"}));
    cmd->add_option("--format", a->format, "cuda: nvrtc (kernelzero.cuda, default) or inline (load_inline)")
        ->check(CLI::IsMember({"nvrtc", "inline"}));
    add_model_options(cmd, *a, /*required=*/false);
    cmd->get_option("--model")->description("Hugging Face model directory, or `reference` (the harness self-test)");
    cmd->add_option("--endpoint", a->endpoint,
                    "An OpenAI-compatible server instead of --model (http://host:port[/v1])");
    cmd->add_option("--served-model", a->served_model, "The model name the --endpoint serves");
    cmd->add_option("--concurrency", a->concurrency, "--endpoint: requests in flight")->check(CLI::Range(1, 1024));
    cmd->add_option("--samples", a->samples, "Completions per task")->check(CLI::Range(1, 1024));
    cmd->add_option("--k", a->ks, "pass@k for these k (comma-separated, each <= --samples)")
        ->delimiter(',')
        ->check(CLI::Range(int64_t{1}, int64_t{1024}));
    cmd->add_option("--temperature", a->temperature,
                    "Sampling temperature (default: 0, greedy, for one sample; 1 for more)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--top-p", a->top_p, "Nucleus mass")->check(CLI::Range(0.0, 1.0));
    cmd->add_option("--max-new-tokens", a->max_new_tokens, "Most tokens per completion")
        ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
    cmd->add_option("--seed", a->seed, "Sampling seed");
    cmd->add_option("--batch", a->batch, "Tasks per generation batch (their samples decode together)")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--out", a->out, "Run directory (samples, verdicts, metrics, reports)")->required();
    cmd->add_flag("--resume", a->resume, "Continue the run in --out: what is recorded is kept, the rest is done");
    cmd->add_option("--policy", a->policy, "Verification policy for model samples (the reference self-test is lenient)")
        ->check(CLI::IsMember({"strict", "lenient"}));
    add_workers_option(cmd, a->workers, "Verifier lanes");
    cmd->add_option("--trials", a->trials, "Correctness trials per sample")->check(CLI::Range(1, 1000));
    cmd->add_option("--timeout", a->timeout, "Seconds for one candidate run")->check(CLI::PositiveNumber);
    cmd->add_option("--cache-dir", a->cache_dir, "Verifier build cache and baselines (default ~/.cache/kernelzero)");
    cmd->add_option("--verifier", a->verifier, "local (default) or redis://host:port/db: a farm of verifier daemons");
    cmd->add_flag("--json", a->as_json, "Print the metrics as JSON on the last line");
    cmd->add_flag("--no-progress", a->no_progress, "No progress output");
    return [a, cmd]() -> int {
        if (!cmd->parsed()) return -1;
        return run_bench_cmd(*a);
    };
}

}  // namespace kz::cli
