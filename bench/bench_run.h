// `kernelzero bench`: evaluation of a Coder on KernelBench-format task sets. For every task, N
// completions come from a CompletionSource (the engine, an OpenAI-compatible server, or nothing:
// the reference self-test), their candidates are extracted and verified in one batch, and the run
// directory gets:
//   run.json          the run's settings (a resumed run must match them)
//   completions.jsonl {task, sample, completion} per sample, appended and fsync'ed as generated
//   jobs.jsonl        the verifier's batch (extracted candidates)
//   verdicts.jsonl    {id, ...verdict} per sample, appended and fsync'ed as verified
//   samples.jsonl     one joined record per sample (task, group, sample, verdict fields)
//   metrics.json      BenchMetrics; report.md and report.html (self-contained, with charts)
// --resume skips what is already recorded; nothing recorded is ever lost or redone.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "prompts/coder_prompt.h"
#include "bench/metrics.h"
#include "engine/chat.h"

namespace kz {

class VerifyService;

struct BenchTask {
    std::string id;     // "<group>/<file stem>"
    std::string group;  // the directory's name ("level1", ...)
    std::string path, source;
};

// Every *.py file of each directory, sorted by name. Throws std::runtime_error for a directory that
// is missing or holds no .py file, or two directories with the same name.
std::vector<BenchTask> load_task_dirs(const std::vector<std::string>& dirs);

// Produces completions; implementations: the engine (cli), an HTTP endpoint, test doubles.
class CompletionSource {
public:
    virtual ~CompletionSource() = default;
    // `n` completions for each conversation, in order. Throws std::runtime_error on failure (the run
    // stops; what was recorded stays).
    virtual std::vector<std::vector<std::string>> complete(const std::vector<std::vector<ChatMessage>>& prompts,
                                                           int n) = 0;
    virtual std::string describe() const = 0;        // recorded in run.json
    virtual int batch_prompts() const { return 8; }  // conversations per complete() call
};

struct BenchOptions {
    std::string out_dir;
    CoderFormat format = CoderFormat::triton;
    int samples = 1;
    std::vector<int64_t> ks = {1};
    bool resume = false;
    bool progress = true;
    int in_flight = 2;        // verification jobs in flight
    nlohmann::json settings;  // extra settings recorded in run.json (model, temperature, ...)
};

// With `source` null: the reference self-test (each task's Model wrapped as ModelNew). Throws
// std::runtime_error for a run directory in use by a different run, or when a completion source
// fails. `stop` is polled: an interrupted run keeps what it recorded.
BenchMetrics run_bench(const std::vector<BenchTask>& tasks, const BenchOptions& opts, CompletionSource* source,
                       VerifyService& verifier, const std::atomic<bool>& stop);

// The candidate of the reference self-test: the task's module, with `ModelNew` as `Model`.
std::string reference_candidate(const std::string& task_source);

}  // namespace kz
