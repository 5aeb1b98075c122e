// KernelBench metrics (design section 8) over verified samples: unbiased pass@k, fast_p against
// eager PyTorch and torch.compile, and geometric-mean speedups, overall and per task group (a
// KernelBench level when the task directories are levels).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kz {

// The fast_p thresholds every report carries.
inline const std::vector<double> kFastThresholds = {0.0, 0.5, 0.8, 1.0, 1.5, 2.0};

// Unbiased pass@k for n samples of which c are correct: 1 - C(n-c, k) / C(n, k) (computed as a
// product, exact for any n). Throws std::invalid_argument unless 0 <= c <= n and 1 <= k <= n.
double pass_at_k(int64_t n, int64_t c, int64_t k);

struct SampleOutcome {
    std::string task, group;
    bool correct = false;
    bool infra_error = false;  // the verifier failed, not the candidate: left out of every metric
    std::optional<double> speedup_eager, speedup_compile;
};

struct GroupMetrics {
    int64_t tasks = 0, samples = 0, correct = 0, infra_errors = 0;
    std::map<int64_t, std::optional<double>> pass_at;  // k -> pass@k; null when a task has fewer than k samples
    // fast_p per threshold: per task the share of samples that are correct and more than p times
    // faster than the baseline, averaged over tasks (fast_p of one sample per task, unbiased);
    // fast_0 is the correct rate.
    std::map<double, double> fast_eager, fast_compile;
    std::optional<double> geomean_speedup_eager, geomean_speedup_compile;  // over correct samples
    nlohmann::json to_json() const;
};

struct TaskMetrics {
    std::string task, group;
    int64_t samples = 0, correct = 0, infra_errors = 0;
    std::optional<double> best_speedup_eager, best_speedup_compile;
};

struct BenchMetrics {
    GroupMetrics overall;
    std::map<std::string, GroupMetrics> by_group;  // empty when there is one group
    std::vector<TaskMetrics> tasks;
    nlohmann::json to_json() const;
};

BenchMetrics compute_metrics(const std::vector<SampleOutcome>& samples, const std::vector<int64_t>& ks);

}  // namespace kz
