#include "tasks/pipeline.h"

#include <filesystem>
#include <sstream>

#include "common/files.h"
#include "tasks/similarity.h"
#include "verify/baseline_cache.h"  // sha256_hex

namespace kz {

namespace fs = std::filesystem;

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
                                const std::string& origin) {
    TaskValidation v = validator_.validate(source, apis);
    TaskRecord t;
    t.source = source;
    t.hash = sha256_hex(source);
    t.norm_hash = normalised_hash(source);
    t.apis = apis;
    t.level = level;
    t.origin = origin;
    auto sh = shingles(source);
    // novel
    auto same = store_.with_norm_hash(t.norm_hash);
    double best = 0.0;
    int64_t best_id = 0;
    for (const auto& [id, s] : stored_) {
        double j = jaccard(sh, s);
        if (j > best) best = j, best_id = id;
    }
    v.info["max_similarity_to_store"] = best;
    if (!same.empty()) {
        v.checks["novel"] = "fail";
        v.reasons["novel"] = "the same normalised source as stored task " + std::to_string(same.front());
    } else if (best >= opts_.novelty_threshold) {
        v.checks["novel"] = "fail";
        std::ostringstream os;
        os << "token similarity " << best << " to stored task " << best_id << " (threshold " << opts_.novelty_threshold << ")";
        v.reasons["novel"] = os.str();
    } else {
        v.checks["novel"] = "pass";
    }
    // decontaminated
    if (!benchmarks_.empty()) {
        double worst = 0.0;
        std::string which;
        for (const auto& [path, s] : benchmarks_) {
            double j = jaccard(sh, s);
            if (j > worst) worst = j, which = path;
        }
        v.info["contamination_score"] = worst;
        v.info["closest_benchmark"] = which;
        if (worst >= opts_.contamination_threshold) {
            v.checks["decontaminated"] = "fail";
            std::ostringstream os;
            os << "token similarity " << worst << " to " << which << " (threshold " << opts_.contamination_threshold << ")";
            v.reasons["decontaminated"] = os.str();
        } else {
            v.checks["decontaminated"] = "pass";
        }
    }
    v.valid = true;
    v.reason.clear();
    for (const auto& name : validation_checks()) {
        if (v.checks[name] != "fail") continue;
        v.valid = false;
        if (v.reason.empty()) v.reason = name + ": " + v.reasons[name];
    }
    t.valid = v.valid;
    t.reason = v.reason;
    t.validation = v.to_json();
    if (v.info.contains("eager_ms") && v.info["eager_ms"].is_number()) t.eager_ms = v.info["eager_ms"].get<double>();
    t.id = store_.add_task(t);
    if (t.valid) stored_.emplace_back(t.id, std::move(sh));
    return t;
}

}  // namespace kz
