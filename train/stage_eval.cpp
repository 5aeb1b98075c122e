// Stage eval: bench's run of the Coder on the fixed held-out task set, into eval/iter-K (resumable by
// itself; the leader alone). Adds "eval" (pass@k, fast_p and geomean speedup against eager and
// torch.compile, the report's path) to the metrics.
#include "train/trainer_impl.h"

#include <filesystem>

#include "bench/bench_run.h"
#include "train/seeds.h"

namespace kz {

using json = nlohmann::json;

void Trainer::evaluate(int64_t it, json& m) {
    BenchOptions bo;
    bo.out_dir = run_->eval_dir(it);
    bo.format = format_;
    bo.samples = cfg_.eval.samples;
    bo.ks = {1};
    if (cfg_.eval.samples >= 10) bo.ks.push_back(10);
    bo.resume = std::filesystem::exists(bo.out_dir + "/run.json");
    bo.progress = false;
    bo.in_flight = cfg_.verifier.in_flight;
    SamplingParams sp;
    sp.temperature = cfg_.eval.temperature;
    sp.seed = derive_seed(cfg_.seed, it, kEvalStage);
    bo.settings = {{"temperature", sp.temperature},
                   {"max_new_tokens", cfg_.eval.max_new_tokens},
                   {"model_version", "coder@iter-" + std::to_string(it)}};
    PolicySource source(coder_->model(), coder_->tokenizer(), coder_->stops(), sp, cfg_.eval.max_new_tokens, 8,
                        "coder@iter-" + std::to_string(it));
    BenchMetrics bm = run_bench(load_task_dirs(cfg_.eval.tasks), bo, &source, *verifier_, stop_);
    json o = bm.overall.to_json();
    m["eval"] = {{"tasks", o.value("tasks", 0)},
                 {"samples", o.value("samples", 0)},
                 {"correct", o.value("correct", 0)},
                 {"pass_at_k", o.value("pass_at_k", json::object())},
                 {"fast_p_eager", o.value("fast_p_eager", json::object())},
                 {"geomean_speedup_eager", o.value("geomean_speedup_eager", json(nullptr))},
                 {"fast_p_compile", o.value("fast_p_compile", json::object())},
                 {"geomean_speedup_compile", o.value("geomean_speedup_compile", json(nullptr))},
                 {"report", bo.out_dir + "/report.html"}};
}

}  // namespace kz
