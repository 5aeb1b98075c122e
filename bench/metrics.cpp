#include "bench/metrics.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace kz {

using json = nlohmann::json;

double pass_at_k(int64_t n, int64_t c, int64_t k) {
    if (n < 0 || c < 0 || c > n) throw std::invalid_argument("pass@k needs 0 <= c <= n");
    if (k < 1 || k > n)
        throw std::invalid_argument("pass@k needs 1 <= k <= n (k " + std::to_string(k) + ", n " + std::to_string(n) +
                                    ")");
    if (n - c < k) return 1.0;
    // C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
    double fail = 1.0;
    for (int64_t i = n - c + 1; i <= n; ++i) fail *= 1.0 - static_cast<double>(k) / static_cast<double>(i);
    return 1.0 - fail;
}

namespace {

std::optional<double> geomean(const std::vector<double>& xs) {
    if (xs.empty()) return std::nullopt;
    double s = 0;
    for (double x : xs) s += std::log(x);
    return std::exp(s / static_cast<double>(xs.size()));
}

std::string threshold_key(double p) {
    std::ostringstream o;
    o << p;
    return o.str();
}

json opt(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

GroupMetrics group_metrics(const std::vector<const SampleOutcome*>& samples, const std::vector<int64_t>& ks,
                           std::vector<TaskMetrics>* tasks_out) {
    std::map<std::string, std::vector<const SampleOutcome*>> by_task;
    for (const auto* s : samples) by_task[s->task].push_back(s);
    GroupMetrics g;
    std::vector<double> sp_eager, sp_compile;
    std::map<int64_t, double> pass_sum;
    std::map<int64_t, bool> pass_defined;
    for (int64_t k : ks) pass_sum[k] = 0, pass_defined[k] = true;
    for (double p : kFastThresholds) g.fast_eager[p] = 0, g.fast_compile[p] = 0;
    int64_t scored_tasks = 0;
    for (const auto& [task, list] : by_task) {
        TaskMetrics t;
        t.task = task;
        t.group = list.front()->group;
        std::map<double, int64_t> fast_e, fast_c;
        for (const auto* s : list) {
            if (s->infra_error) {
                ++t.infra_errors;
                continue;
            }
            ++t.samples;
            if (!s->correct) continue;
            ++t.correct;
            if (s->speedup_eager) {
                sp_eager.push_back(*s->speedup_eager);
                t.best_speedup_eager = std::max(t.best_speedup_eager.value_or(0.0), *s->speedup_eager);
            }
            if (s->speedup_compile) {
                sp_compile.push_back(*s->speedup_compile);
                t.best_speedup_compile = std::max(t.best_speedup_compile.value_or(0.0), *s->speedup_compile);
            }
            for (double p : kFastThresholds) {
                if (p == 0.0 || (s->speedup_eager && *s->speedup_eager > p)) ++fast_e[p];
                if (p == 0.0 || (s->speedup_compile && *s->speedup_compile > p)) ++fast_c[p];
            }
        }
        g.samples += t.samples;
        g.correct += t.correct;
        g.infra_errors += t.infra_errors;
        ++g.tasks;
        if (t.samples > 0) {
            ++scored_tasks;
            for (int64_t k : ks) {
                if (t.samples < k)
                    pass_defined[k] = false;
                else
                    pass_sum[k] += pass_at_k(t.samples, t.correct, k);
            }
            for (double p : kFastThresholds) {
                g.fast_eager[p] += static_cast<double>(fast_e[p]) / static_cast<double>(t.samples);
                g.fast_compile[p] += static_cast<double>(fast_c[p]) / static_cast<double>(t.samples);
            }
        }
        if (tasks_out) tasks_out->push_back(t);
    }
    for (int64_t k : ks)
        g.pass_at[k] =
            pass_defined[k] && scored_tasks > 0 ? std::optional<double>(pass_sum[k] / scored_tasks) : std::nullopt;
    for (double p : kFastThresholds) {
        g.fast_eager[p] = scored_tasks ? g.fast_eager[p] / scored_tasks : 0.0;
        g.fast_compile[p] = scored_tasks ? g.fast_compile[p] / scored_tasks : 0.0;
    }
    g.geomean_speedup_eager = geomean(sp_eager);
    g.geomean_speedup_compile = geomean(sp_compile);
    return g;
}

}  // namespace

json GroupMetrics::to_json() const {
    json j = {{"tasks", tasks}, {"samples", samples}, {"correct", correct}, {"infra_errors", infra_errors}};
    json pk = json::object(), fe = json::object(), fc = json::object();
    for (const auto& [k, v] : pass_at) pk["pass@" + std::to_string(k)] = opt(v);
    for (const auto& [p, v] : fast_eager) fe[threshold_key(p)] = v;
    for (const auto& [p, v] : fast_compile) fc[threshold_key(p)] = v;
    j["pass_at_k"] = pk;
    j["fast_p_eager"] = fe;
    j["fast_p_compile"] = fc;
    j["geomean_speedup_eager"] = opt(geomean_speedup_eager);
    j["geomean_speedup_compile"] = opt(geomean_speedup_compile);
    return j;
}

json BenchMetrics::to_json() const {
    json j = {{"overall", overall.to_json()}};
    json groups = json::object();
    for (const auto& [name, g] : by_group) groups[name] = g.to_json();
    j["by_group"] = groups;
    json ts = json::array();
    for (const auto& t : tasks)
        ts.push_back({{"task", t.task},
                      {"group", t.group},
                      {"samples", t.samples},
                      {"correct", t.correct},
                      {"infra_errors", t.infra_errors},
                      {"best_speedup_eager", opt(t.best_speedup_eager)},
                      {"best_speedup_compile", opt(t.best_speedup_compile)}});
    j["tasks"] = ts;
    return j;
}

BenchMetrics compute_metrics(const std::vector<SampleOutcome>& samples, const std::vector<int64_t>& ks) {
    BenchMetrics m;
    std::vector<const SampleOutcome*> all;
    std::map<std::string, std::vector<const SampleOutcome*>> groups;
    for (const auto& s : samples) {
        all.push_back(&s);
        groups[s.group].push_back(&s);
    }
    m.overall = group_metrics(all, ks, &m.tasks);
    if (groups.size() > 1)
        for (const auto& [name, list] : groups) m.by_group[name] = group_metrics(list, ks, nullptr);
    return m;
}

}  // namespace kz
