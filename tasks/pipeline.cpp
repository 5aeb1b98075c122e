#include "tasks/pipeline.h"

#include <filesystem>
#include <sstream>

#include "common/files.h"
#include "tasks/similarity.h"
#include "common/hash.h"

namespace kz {

namespace fs = std::filesystem;

namespace {

std::string label_of(int64_t stored_id) { return "stored task " + std::to_string(stored_id); }
std::string label_of(const std::string& benchmark_path) { return benchmark_path; }

}  // namespace

TaskRecord unvalidated_task(const std::string& source, const std::vector<std::string>& apis, int level,
                            const std::string& origin, const std::string& reason) {
    TaskRecord t;
    t.source = source;
    t.hash = sha256_hex(source);
    t.norm_hash = normalised_hash(source);
    t.apis = apis;
    t.level = level;
    t.origin = origin;
    t.valid = false;
    t.reason = reason;
    t.validation = {{"valid", false}, {"reason", reason}};
    return t;
}

TaskPipeline::TaskPipeline(const ApiCatalog& catalog, TaskStore& store, PipelineOptions opts)
    : store_(store), opts_(std::move(opts)), validator_(catalog, opts_.validation) {
    for (const auto& t : store_.tasks(true)) stored_.emplace_back(t.id, shingles(t.source));
    for (const auto& dir : opts_.benchmark_dirs) {
        std::error_code ec;
        if (!fs::is_directory(dir, ec)) throw std::runtime_error("benchmark directory " + dir + " does not exist");
        for (const auto& e : fs::recursive_directory_iterator(dir, ec))
            if (e.is_regular_file() && e.path().extension() == ".py")
                benchmarks_.emplace_back(e.path().string(), shingles(read_file(e.path().string())));
    }
}

TaskRecord TaskPipeline::submit(const std::string& source, const std::vector<std::string>& apis, int level,
                                const std::string& origin, const std::string& submission,
                                const TaskValidation* validated) {
    // The same submission again (a trainer re-running an iteration after a crash) is the stored
    // record, judged as it was, not a duplicate of itself.
    if (auto existing = resubmitted(source, submission)) return *existing;
    TaskValidation v = validated ? *validated : validator_.validate(source, apis);
    if (!submission.empty()) v.info["submission"] = submission;
    TaskRecord t = unvalidated_task(source, apis, level, origin, "");
    auto sh = shingles(source);
    judge_against_store(t.norm_hash, sh, v);
    v.settle();
    t.valid = v.valid;
    t.reason = v.reason;
    t.validation = v.to_json();
    if (v.info.contains("eager_ms") && v.info["eager_ms"].is_number()) t.eager_ms = v.info["eager_ms"].get<double>();
    t.id = store_.add_task(t);
    if (t.valid) stored_.emplace_back(t.id, std::move(sh));
    return t;
}

void TaskPipeline::judge_against_store(const std::string& norm_hash, const std::set<std::string>& sh,
                                       TaskValidation& v) const {
    auto closest = [&](const auto& items) {  // (highest similarity, its label)
        std::pair<double, std::string> best{0.0, ""};
        for (const auto& [label, s] : items)
            if (double j = jaccard(sh, s); j > best.first) best = {j, label_of(label)};
        return best;
    };
    auto judge = [&](const char* check, const std::pair<double, std::string>& c, double threshold) {
        if (c.first < threshold) {
            v.checks[check] = "pass";
            return;
        }
        std::ostringstream os;
        os << "token similarity " << c.first << " to " << c.second << " (threshold " << threshold << ")";
        v.checks[check] = "fail";
        v.reasons[check] = os.str();
    };
    auto near = closest(stored_);
    v.info["max_similarity_to_store"] = near.first;
    if (auto same = store_.with_norm_hash(norm_hash); !same.empty()) {
        v.checks["novel"] = "fail";
        v.reasons["novel"] = "the same normalised source as stored task " + std::to_string(same.front());
    } else {
        judge("novel", near, opts_.novelty_threshold);
    }
    if (!benchmarks_.empty()) {
        auto bench = closest(benchmarks_);
        v.info["contamination_score"] = bench.first;
        v.info["closest_benchmark"] = bench.second;
        judge("decontaminated", bench, opts_.contamination_threshold);
    }
}

std::optional<TaskValidation> TaskPipeline::screen(const std::string& source) const {
    TaskValidation v;
    judge_against_store(normalised_hash(source), shingles(source), v);
    v.settle();
    if (v.valid) return std::nullopt;
    return v;
}

std::vector<std::vector<size_t>> TaskPipeline::earlier_near_duplicates(const std::vector<std::string>& sources) const {
    std::vector<std::string> norm;
    std::vector<std::set<std::string>> sh;
    for (const auto& s : sources) {
        norm.push_back(normalised_hash(s));
        sh.push_back(shingles(s));
    }
    std::vector<std::vector<size_t>> out(sources.size());
    for (size_t k = 0; k < sources.size(); ++k)
        for (size_t j = 0; j < k; ++j)
            if (norm[j] == norm[k] || jaccard(sh[j], sh[k]) >= opts_.novelty_threshold) out[k].push_back(j);
    return out;
}

std::optional<TaskRecord> TaskPipeline::resubmitted(const std::string& source, const std::string& submission) const {
    if (submission.empty()) return std::nullopt;
    auto existing = store_.task_by_hash(sha256_hex(source));
    if (existing && existing->validation.value("info", nlohmann::json::object()).value("submission", "") == submission)
        return existing;
    return std::nullopt;
}

}  // namespace kz
