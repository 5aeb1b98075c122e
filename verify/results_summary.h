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

struct ResultsSummary {
    int jobs = 0;
    std::map<std::string, int> by_status;
    Spread total_s, compile_s, runtime_ms;
    std::vector<double> speedups;  // speedup_eager of correct verdicts
    nlohmann::json to_json() const;
};

// Reads the last verdict of every id (a resumed run may have re-verified infra errors).
ResultsSummary summarize_results(const std::string& path);

}  // namespace kz
