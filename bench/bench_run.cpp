#include "bench/bench_run.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <stdexcept>

#include "bench/report.h"
#include "common/files.h"
#include "verify/batch.h"
#include "verify/verifier.h"

namespace kz {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string sample_id(const std::string& task, int sample) { return task + "#" + std::to_string(sample); }

// run.json: written on the first run; a resumed run must agree on what decides the samples.
// Returns the run's settings.
json check_or_write_run(const BenchOptions& opts, const std::vector<BenchTask>& tasks, const std::string& source) {
    const std::string path = opts.out_dir + "/run.json";
    json run = {{"prompt_version", kCoderPromptVersion},
                {"format", format_name(opts.format)},
                {"backend", backend_of(opts.format)},
                {"samples", opts.samples},
                {"source", source},
                {"settings", opts.settings}};
    json ids = json::array();
    for (const auto& t : tasks) ids.push_back(t.id);
    run["tasks"] = ids;
    if (fs::exists(path)) {
        if (!opts.resume)
            throw std::runtime_error(opts.out_dir +
                                     " already holds a run (run.json): pass --resume to continue it, or "
                                     "choose a new --out");
        json old = json::parse(read_file(path), nullptr, false);
        for (const char* key : {"prompt_version", "format", "samples", "source", "settings", "tasks"})
            if (!old.is_object() || old.value(key, json()) != run[key])
                throw std::runtime_error("--resume: " + std::string(key) + " differs from the run in " + path +
                                         " (was " + (old.is_object() ? old.value(key, json()).dump() : "?") + ")");
        return old;
    }
    if (opts.resume && fs::exists(opts.out_dir) && !fs::is_empty(opts.out_dir))
        throw std::runtime_error("--resume: " + opts.out_dir + " has no run.json");
    write_file_atomic(path, run.dump(2) + "\n");
    return run;
}

}  // namespace

std::vector<BenchTask> load_task_dirs(const std::vector<std::string>& dirs) {
    std::vector<BenchTask> tasks;
    std::set<std::string> groups;
    for (const auto& dir : dirs) {
        if (!fs::is_directory(dir)) throw std::runtime_error("--tasks " + dir + ": not a directory");
        std::string group = fs::path(dir).lexically_normal().filename().string();
        if (group.empty()) group = fs::path(dir).lexically_normal().parent_path().filename().string();
        if (!groups.insert(group).second)
            throw std::runtime_error("--tasks: two directories are named " + group + " (task ids would collide)");
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(dir))
            if (e.is_regular_file() && e.path().extension() == ".py") files.push_back(e.path());
        if (files.empty()) throw std::runtime_error("--tasks " + dir + ": no .py task files");
        std::sort(files.begin(), files.end());
        for (const auto& f : files)
            tasks.push_back({group + "/" + f.stem().string(), group, f.string(), read_file(f.string())});
    }
    return tasks;
}

std::string reference_candidate(const std::string& task_source) {
    return task_source +
           "\n\n# kernelzero bench --model reference: the reference itself as the candidate.\n"
           "class ModelNew(Model):\n    pass\n";
}

BenchMetrics run_bench(const std::vector<BenchTask>& tasks, const BenchOptions& opts, CompletionSource* source,
                       VerifyService& verifier, const std::atomic<bool>& stop) {
    if (opts.samples < 1) throw std::invalid_argument("--samples must be >= 1");
    for (int64_t k : opts.ks)
        if (k < 1 || k > opts.samples)
            throw std::invalid_argument("--k " + std::to_string(k) + " needs 1 <= k <= --samples (" +
                                        std::to_string(opts.samples) + ")");
    fs::create_directories(opts.out_dir);
    const json run = check_or_write_run(opts, tasks, source ? source->describe() : "reference");
    const std::string completions_path = opts.out_dir + "/completions.jsonl";
    const std::string verdicts_path = opts.out_dir + "/verdicts.jsonl";

    // 1. Completions (reference: none, the candidate is the task itself).
    std::map<std::string, std::string> completions;  // sample id -> completion
    for (const auto& j : read_json_lines(completions_path))
        if (j.contains("task") && j.contains("sample") && j.contains("completion"))
            completions[sample_id(j["task"].get<std::string>(), j["sample"].get<int>())] =
                j["completion"].get<std::string>();
    if (source) {
        const CoderPrompt prompt = CoderPrompt::load(opts.format);
        std::vector<const BenchTask*> todo;
        for (const auto& t : tasks)
            for (int s = 0; s < opts.samples; ++s)
                if (!completions.count(sample_id(t.id, s))) {
                    todo.push_back(&t);
                    break;
                }
        const size_t chunk = static_cast<size_t>(std::max(1, source->batch_prompts()));
        for (size_t i = 0; i < todo.size() && !stop; i += chunk) {
            std::vector<std::vector<ChatMessage>> prompts;
            for (size_t k = i; k < std::min(todo.size(), i + chunk); ++k)
                prompts.push_back(prompt.messages(todo[k]->source));
            auto outs = source->complete(prompts, opts.samples);
            if (outs.size() != prompts.size())
                throw std::runtime_error("the completion source returned too few answers");
            for (size_t k = 0; k < outs.size(); ++k) {
                const BenchTask& t = *todo[i + k];
                for (int s = 0; s < opts.samples && s < static_cast<int>(outs[k].size()); ++s) {
                    if (completions.count(sample_id(t.id, s))) continue;
                    completions[sample_id(t.id, s)] = outs[k][s];
                    append_durable(completions_path, json({{"task", t.id}, {"sample", s}, {"completion", outs[k][s]}})
                                                             .dump(-1, ' ', false, json::error_handler_t::replace) +
                                                         "\n");
                }
            }
            if (opts.progress)
                std::fprintf(stderr, "\r[bench] generated %zu / %zu tasks", std::min(todo.size(), i + chunk),
                             todo.size());
        }
        if (opts.progress && !todo.empty()) std::fprintf(stderr, "\n");
    }
    if (stop) throw std::runtime_error("interrupted");

    // 2. Candidates: extraction failures are format_error verdicts without a worker, written here once per
    // sample id; the rest is one batch, whose resume run_batch decides by job_digest. A torn last line
    // is cut before anything is appended.
    if (fs::exists(verdicts_path)) truncate_partial_line(verdicts_path);
    std::set<std::string> judged;
    for (const auto& entry : finished_jobs(verdicts_path)) judged.insert(entry.first);
    std::string jobs;
    const std::string backend = backend_of(opts.format);
    for (const auto& t : tasks)
        for (int s = 0; s < opts.samples; ++s) {
            const std::string id = sample_id(t.id, s);
            std::string candidate;
            if (!source) {
                candidate = reference_candidate(t.source);
            } else {
                auto it = completions.find(id);
                if (it == completions.end()) continue;  // the source gave fewer than --samples
                Extraction ex = extract_candidate(it->second);
                if (!ex.ok()) {
                    if (!judged.count(id)) {
                        json line = {{"id", id}};
                        line.update(early_verdict(Status::format_error, ex.reason, verifier.options().device, backend)
                                        .to_json());
                        append_durable(verdicts_path, line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
                        judged.insert(id);
                    }
                    continue;
                }
                candidate = ex.source;
            }
            jobs += json({{"id", id}, {"task", t.source}, {"candidate", candidate}, {"backend", backend}})
                        .dump(-1, ' ', false, json::error_handler_t::replace) +
                    "\n";
        }
    write_file_atomic(opts.out_dir + "/jobs.jsonl", jobs);
    BatchOptions bo;
    bo.jobs_path = opts.out_dir + "/jobs.jsonl";
    bo.out_path = verdicts_path;
    bo.threads = opts.in_flight;
    bo.progress = opts.progress;
    BatchSummary summary = run_batch(verifier, bo, stop);
    if (summary.interrupted) throw std::runtime_error("interrupted");

    // 3. Join, metrics, reports.
    std::map<std::string, json> verdicts;  // the last verdict of each id
    for (auto& j : read_json_lines(verdicts_path))
        if (j.contains("id")) verdicts[j["id"].get<std::string>()] = j;
    std::vector<SampleOutcome> outcomes;
    std::string samples_jsonl;
    for (const auto& t : tasks)
        for (int s = 0; s < opts.samples; ++s) {
            auto it = verdicts.find(sample_id(t.id, s));
            if (it == verdicts.end()) continue;
            const json& v = it->second;
            SampleOutcome o;
            o.task = t.id;
            o.group = t.group;
            o.correct = v.value("correct", false);
            o.infra_error = v.value("status", "") == "infra_error";
            if (v.contains("speedup_eager") && v["speedup_eager"].is_number())
                o.speedup_eager = v["speedup_eager"].get<double>();
            if (v.contains("speedup_compile") && v["speedup_compile"].is_number())
                o.speedup_compile = v["speedup_compile"].get<double>();
            outcomes.push_back(o);
            json rec = {{"task", t.id}, {"group", t.group}, {"sample", s}};
            for (const char* key : {"status", "correct", "reason", "speedup_eager", "speedup_compile", "runtime_ms",
                                    "ref_eager_ms", "ref_compile_ms", "max_abs_err", "device", "backend"})
                if (v.contains(key)) rec[key] = v[key];
            samples_jsonl += rec.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
        }
    write_file_atomic(opts.out_dir + "/samples.jsonl", samples_jsonl);
    BenchMetrics m = compute_metrics(outcomes, opts.ks);
    json mj = m.to_json();
    mj["run"] = run;
    mj["device"] = verifier.options().device;
    write_file_atomic(opts.out_dir + "/metrics.json", mj.dump(2) + "\n");
    write_file_atomic(opts.out_dir + "/report.md", report_markdown(m, run, opts.ks));
    write_file_atomic(opts.out_dir + "/report.html", report_html(m, outcomes, run, opts.ks));
    return m;
}

}  // namespace kz
