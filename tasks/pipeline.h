// Where proposed modules become stored tasks: validation (TaskValidator) plus the two checks that
// need the store and the benchmarks, `novel` (no stored task with the same normalised source, token
// similarity below a threshold) and `decontaminated` (similarity to every registered benchmark file
// below a threshold, the score reported), then one durable insert.
#pragma once

#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "tasks/task_store.h"
#include "tasks/validation.h"

namespace kz {

struct PipelineOptions {
    ValidationOptions validation;
    double novelty_threshold = 0.9;  // Jaccard of token 3-grams at or above which a task is a near-duplicate
    double contamination_threshold = 0.8;
    std::vector<std::string> benchmark_dirs;  // KernelBench-style directories of .py files
};

// A record stored without validation (an import asked not to validate, a completion that did not
// parse): not valid, with `reason`.
TaskRecord unvalidated_task(const std::string& source, const std::vector<std::string>& apis, int level,
                            const std::string& origin, const std::string& reason);

class TaskPipeline {
public:
    TaskPipeline(const ApiCatalog& catalog, TaskStore& store, PipelineOptions opts);
    // Validates, checks novelty and contamination, stores (valid or not). Returns the stored record.
    // `submission` (optional) names the submitter's step, e.g. "<run id>/iter-3": a source stored
    // before by the same submission is returned unchanged, so that a step run again after a crash
    // gets the verdict it got the first time; from any other submission it is not novel.
    // `validated`: the module's validation already run (by another process of a data-parallel
    // trainer, through validate()), used instead of running it again.
    TaskRecord submit(const std::string& source, const std::vector<std::string>& apis, int level,
                      const std::string& origin, const std::string& submission = "",
                      const TaskValidation* validated = nullptr);
    // The record `submission` stored for `source` before, if any (what submit() would return unchanged).
    std::optional<TaskRecord> resubmitted(const std::string& source, const std::string& submission) const;
    // What the store and the benchmarks alone decide, before any validation: the module's verdict
    // when it is a near-duplicate of a stored task or of a benchmark (`novel` or `decontaminated`
    // failed, every other check skipped; submit() given it stores the module invalid without running
    // the validator), nullopt otherwise. Spares the workers a module that would be turned down anyway.
    // A source this submission stored before is the caller's to recognise first (resubmitted()).
    std::optional<TaskValidation> screen(const std::string& source) const;
    // For each source, the earlier ones (lower index) it is a near-duplicate of by `novel`'s rule: once
    // one of those is stored valid, submit() turns it down. Lets a caller that validates a batch at
    // once count what will be stored before storing it.
    std::vector<std::vector<size_t>> earlier_near_duplicates(const std::vector<std::string>& sources) const;
    // The validator's checks alone (no store, no novelty): what submit() runs first.
    TaskValidation validate(const std::string& source, const std::vector<std::string>& apis) {
        return validator_.validate(source, apis);
    }

private:
    // Sets `novel` and `decontaminated` (pass or fail, with reasons and scores) in `v`.
    void judge_against_store(const std::string& norm_hash, const std::set<std::string>& sh, TaskValidation& v) const;

    TaskStore& store_;
    PipelineOptions opts_;
    TaskValidator validator_;
    std::vector<std::pair<int64_t, std::set<std::string>>> stored_;  // valid stored tasks' shingles
    std::vector<std::pair<std::string, std::set<std::string>>> benchmarks_;
};

}  // namespace kz
