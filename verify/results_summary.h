// Summary of a verify results file (JSONL): counts by status and the spread of per-job latencies.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kz {

struct Spread {
    double median = 0, min = 0, max = 0, p10 = 0, p90 = 0;
    int n = 0;
};

Spread spread_of(std::vector<double> values);

// Where jobs spent their time: one verdict stage (the controller's, e.g. "wait_lane", or the
// candidate child's, "candidate.timing_s") over every job that has it.
struct StageTime {
    double sum_s = 0;
    Spread per_job;
};

struct ResultsSummary {
    int jobs = 0;
    std::map<std::string, int> by_status;
    Spread total_s, compile_s, runtime_ms;
    std::vector<double> speedups;  // speedup_eager of correct verdicts
    std::map<std::string, StageTime> stages;
    nlohmann::json to_json() const;
    // The stages, largest sum first, one per line.
    std::string stage_table() const;
};

// Reads the last verdict of every id (a resumed run may have re-verified infra errors).
ResultsSummary summarize_results(const std::string& path);

}  // namespace kz
