// Reports of a bench run: Markdown (for a README or an issue) and one self-contained HTML page
// (inline SVG charts, no scripts or external files): the fast_p curve, the speedup distribution,
// and per-group and per-task tables.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/metrics.h"

namespace kz {

std::string report_markdown(const BenchMetrics& m, const nlohmann::json& run, const std::vector<int64_t>& ks);
std::string report_html(const BenchMetrics& m, const std::vector<SampleOutcome>& samples, const nlohmann::json& run,
                        const std::vector<int64_t>& ks);

}  // namespace kz
