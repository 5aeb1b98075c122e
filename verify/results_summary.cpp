#include "verify/results_summary.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace kz {

using nlohmann::json;

Spread spread_of(std::vector<double> v) {
    Spread s;
    s.n = static_cast<int>(v.size());
    if (v.empty()) return s;
    std::sort(v.begin(), v.end());
    auto q = [&](double p) {
        double idx = p * (v.size() - 1);
        size_t lo = static_cast<size_t>(std::floor(idx)), hi = static_cast<size_t>(std::ceil(idx));
        return v[lo] + (v[hi] - v[lo]) * (idx - lo);
    };
    s.median = q(0.5);
    s.p10 = q(0.1);
    s.p90 = q(0.9);
    s.min = v.front();
    s.max = v.back();
    return s;
}

static json spread_json(const Spread& s) {
    return {{"median", s.median}, {"min", s.min}, {"max", s.max}, {"p10", s.p10}, {"p90", s.p90}, {"n", s.n}};
}

json ResultsSummary::to_json() const {
    json j = {{"jobs", jobs},
              {"by_status", by_status},
              {"total_s", spread_json(total_s)},
              {"compile_s", spread_json(compile_s)},
              {"runtime_ms", spread_json(runtime_ms)}};
    json st = json::object();
    for (const auto& [name, t] : stages) st[name] = {{"sum_s", t.sum_s}, {"per_job", spread_json(t.per_job)}};
    j["stages"] = st;
    j["children"] = {{"fresh", children.fresh}, {"reused", children.reused}, {"retired", children.retired}};
    if (!speedups.empty()) {
        double logsum = 0;
        for (double s : speedups) logsum += std::log(s);
        j["geomean_speedup_eager"] = std::exp(logsum / speedups.size());
    }
    return j;
}

std::string ResultsSummary::stage_table() const {
    std::vector<std::pair<std::string, StageTime>> rows(stages.begin(), stages.end());
    std::stable_sort(rows.begin(), rows.end(),
                     [](const auto& a, const auto& b) { return a.second.sum_s > b.second.sum_s; });
    std::string out;
    char line[200];
    for (const auto& [name, t] : rows) {
        std::snprintf(line, sizeof line, "  %-34s sum %9.2f s  median %8.3f s  max %8.3f s  (%d jobs)\n", name.c_str(),
                      t.sum_s, t.per_job.median, t.per_job.max, t.per_job.n);
        out += line;
    }
    return out;
}

std::string ResultsSummary::children_line() const {
    std::string out = std::to_string(children.fresh) + " jobs in a fresh child, " + std::to_string(children.reused) +
                      " in a reused one";
    std::vector<std::pair<std::string, int>> why(children.retired.begin(), children.retired.end());
    std::stable_sort(why.begin(), why.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
    for (size_t i = 0; i < why.size() && i < 8; ++i)
        out += (i == 0 ? "; retired after: " : ", ") + why[i].first + " (" + std::to_string(why[i].second) + ")";
    return out;
}

ResultsSummary::Ceiling ResultsSummary::ceiling(int cores) const {
    Ceiling c;
    if (jobs == 0) return c;
    auto sum = [&](const char* stage) {
        auto it = stages.find(stage);
        return it == stages.end() ? 0.0 : it->second.sum_s;
    };
    if (stages.count("candidate.child_cpu_s")) {  // older verdicts do not say
        c.cpu_s_per_job = (sum("candidate.child_cpu_s") + sum("compile")) / jobs;
        if (c.cpu_s_per_job > 0 && cores > 0) c.cpu_jobs_per_min = 60.0 * cores / c.cpu_s_per_job;
    }
    c.exclusive_s_per_job = sum("candidate.lock_held_exclusive_s") / jobs;
    if (c.exclusive_s_per_job > 0) c.device_jobs_per_min = 60.0 / c.exclusive_s_per_job;
    return c;
}

// Adds a verdict's numeric stages (nested objects as "parent.child") to `into`.
static void collect_stages(const json& stages, const std::string& prefix,
                           std::map<std::string, std::vector<double>>& into) {
    if (!stages.is_object()) return;
    for (const auto& [key, val] : stages.items()) {
        if (key == "child") continue;  // which child ran the job, not seconds (ResultsSummary::children)
        if (val.is_number())
            into[prefix + key].push_back(val.get<double>());
        else if (val.is_object())
            collect_stages(val, prefix + key + ".", into);
    }
}

ResultsSummary summarize_results(const std::string& path) {
    std::ifstream f(path);
    if (!f) throw std::runtime_error("cannot read " + path);
    std::map<std::string, json> last;
    std::string line;
    while (std::getline(f, line)) {
        try {
            json j = json::parse(line);
            if (j.is_object() && j.contains("id")) last[j["id"].get<std::string>()] = j;
        } catch (const json::exception&) {}
    }
    ResultsSummary s;
    std::vector<double> total, compile, runtime;
    std::map<std::string, std::vector<double>> stage_values;
    for (auto& [id, j] : last) {
        if (j.contains("stages")) {
            collect_stages(j["stages"], "", stage_values);
            const json& child = j["stages"].value("candidate", json::object()).value("child", json());
            if (child.is_object() && child.contains("job_index") && child["job_index"].is_number()) {
                ++(child["job_index"].get<int>() == 0 ? s.children.fresh : s.children.reused);
                if (child.contains("retired") && child["retired"].is_string())
                    ++s.children.retired[child["retired"].get<std::string>()];
            }
        }
        ++s.jobs;
        ++s.by_status[j.value("status", std::string("?"))];
        if (j.contains("total_s") && j["total_s"].is_number()) total.push_back(j["total_s"].get<double>());
        if (j.contains("compile_s") && j["compile_s"].is_number()) compile.push_back(j["compile_s"].get<double>());
        if (j.contains("runtime_ms") && j["runtime_ms"].is_object())
            runtime.push_back(j["runtime_ms"].value("median", 0.0));
        if (j.value("status", "") == "correct" && j.contains("speedup_eager") && j["speedup_eager"].is_number() &&
            j["speedup_eager"].get<double>() > 0)
            s.speedups.push_back(j["speedup_eager"].get<double>());
    }
    s.total_s = spread_of(total);
    s.compile_s = spread_of(compile);
    s.runtime_ms = spread_of(runtime);
    for (auto& [name, values] : stage_values) {
        StageTime& t = s.stages[name];
        for (double v : values) t.sum_s += v;
        t.per_job = spread_of(std::move(values));
    }
    return s;
}

}  // namespace kz
