#include "teach/teach_run.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <thread>

#include "common/files.h"

namespace kz {

nlohmann::json TeachDraw::to_json() const {
    nlohmann::json j = {{"name", name}, {"level", level}, {"apis", apis}};
    if (!unsupported.empty()) {
        j["unsupported"] = unsupported;
    } else {
        j["valid"] = valid;
        if (!valid) j["invalid_reason"] = invalid_reason;
        j["kernels"] = kernels;
    }
    return j;
}

std::vector<TeachDraw> write_teacher_candidates(const ApiCatalog& catalog, const TeachOptions& opts,
                                                TaskValidator& validator, const std::atomic<bool>& stop) {
    namespace fs = std::filesystem;
    const std::string& dir = opts.out_dir;
    fs::create_directories(dir + "/tasks");
    for (TeacherQuality q : opts.qualities) fs::create_directories(dir + "/" + quality_name(q));

    // Drawn in order first, so that the draws depend on the seed alone.
    std::mt19937_64 rng(opts.seed);
    std::vector<TeachDraw> draws;
    std::vector<GeneratedTask> tasks;
    std::vector<std::map<std::string, TeacherCandidate>> candidates;
    std::vector<ApiSet> sets;
    const ApiCatalog supported = catalog.subset([](const ApiSpec& a) { return teacher_supports(a.name); });
    const ApiCatalog& drawn_from = opts.supported_only ? supported : catalog;
    if (opts.each_api) {
        for (const ApiSpec& a : supported.apis()) sets.push_back(ApiSet{{a.name}, 1});
    }
    const int count = opts.each_api ? static_cast<int>(sets.size()) : opts.count;
    for (int i = 0; i < count; ++i) {
        TeachDraw d;
        char name[32];
        std::snprintf(name, sizeof name, "task_%05d", i);
        d.name = name;
        d.level = opts.each_api ? 1 : opts.levels[static_cast<size_t>(i) % opts.levels.size()];
        ApiSet set = opts.each_api ? sets[static_cast<size_t>(i)] : sample_api_set(drawn_from, d.level, rng);
        GeneratedTask task = generate_task(catalog, set, opts.sizes, rng);
        d.apis = task.apis;
        std::map<std::string, TeacherCandidate> written;
        std::vector<TeacherQuality> qualities = opts.qualities;
        if (opts.fused_share >= 0) qualities = {quality_by_share(opts.seed, d.name, opts.fused_share)};
        for (TeacherQuality q : qualities) {
            TeacherCandidate c = teach_triton(task, q);
            if (!c.written) {
                d.unsupported = c.unsupported;
                break;
            }
            d.kernels[quality_name(q)] = c.kernels;
            written[quality_name(q)] = std::move(c);
        }
        draws.push_back(std::move(d));
        tasks.push_back(std::move(task));
        candidates.push_back(std::move(written));
    }

    // Only the tasks the teacher writes are validated: validation runs the module. A module this
    // directory's earlier runs validated (the same source, API set and device) keeps its verdict, so
    // that a re-run to finish an interrupted verification does not validate every draw again. A
    // record holds the whole validation: `tasks import --validations` stores it instead of running it.
    // Each is appended as it is made, so that a run killed mid-validation (a deadline's SIGKILL waits
    // for no module) keeps what it validated; the file is rewritten whole, one record a key, at the end.
    const std::string cache_path = dir + "/validation.jsonl";
    std::map<std::string, nlohmann::json> cache = read_validation_records(cache_path);
    std::vector<std::string> keys(draws.size());
    std::vector<nlohmann::json> fresh(draws.size());  // validated by this run: its validation.jsonl record
    for (size_t i = 0; i < draws.size(); ++i)
        keys[i] = validation_key(validator.options().device, tasks[i].apis, tasks[i].source);
    std::atomic<size_t> next{0};
    std::mutex append_mu;
    // A line every so many validations: a teach run's log otherwise says nothing for the minutes
    // validation takes (the verification's progress comes after it).
    constexpr int kValidationsALine = 250;
    int validated = 0, valid = 0;
    const auto started = std::chrono::steady_clock::now();
    auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
    auto validate_some = [&] {
        for (size_t i = next++; i < draws.size() && !stop; i = next++) {
            if (!draws[i].unsupported.empty()) continue;
            if (auto it = cache.find(keys[i]); it != cache.end()) {
                draws[i].valid = it->second.value("valid", false);
                draws[i].invalid_reason = it->second.value("reason", "");
            } else {
                TaskValidation v = validator.validate(tasks[i].source, tasks[i].apis);
                draws[i].valid = v.valid;
                draws[i].invalid_reason = v.reason;
                fresh[i] = validation_record(keys[i], v);
                std::lock_guard lock(append_mu);
                append_durable(cache_path, fresh[i].dump() + "\n");
                valid += v.valid;
                if (++validated % kValidationsALine == 0)
                    std::fprintf(stderr, "[teach] %d modules validated (%d valid) in %.0f s\n", validated, valid,
                                 seconds());
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < validator.workers(); ++t) threads.emplace_back(validate_some);
    for (auto& t : threads) t.join();
    size_t known = 0;
    for (size_t i = 0; i < draws.size(); ++i)
        known += draws[i].unsupported.empty() && fresh[i].is_null() && cache.count(keys[i]);
    std::fprintf(stderr,
                 "[teach] validation: %d modules validated (%d valid) in %.0f s; %zu known from validation.jsonl\n",
                 validated, valid, seconds(), known);
    for (size_t i = 0; i < draws.size(); ++i)
        if (!fresh[i].is_null()) cache[keys[i]] = std::move(fresh[i]);
    std::string cached_lines;
    for (const auto& [key, j] : cache) cached_lines += j.dump() + "\n";
    write_file_atomic(cache_path, cached_lines);

    std::string jobs, lines;
    for (size_t i = 0; i < draws.size(); ++i) {
        const TeachDraw& d = draws[i];
        lines += d.to_json().dump() + "\n";
        if (!d.valid) continue;
        write_file_atomic(dir + "/tasks/" + d.name + ".py", tasks[i].source);
        for (const auto& [quality, c] : candidates[i]) {
            const std::string file = quality + "/" + d.name + ".py";
            write_file_atomic(dir + "/" + file, c.source);
            jobs += nlohmann::json{{"id", quality + "/" + d.name},
                                   {"task", "tasks/" + d.name + ".py"},
                                   {"candidate", file},
                                   {"backend", "triton"}}
                        .dump() +
                    "\n";
        }
    }
    write_file_atomic(dir + "/draws.jsonl", lines);
    write_file_atomic(dir + "/jobs.jsonl", jobs);
    return draws;
}

nlohmann::json teach_summary(const std::vector<TeachDraw>& draws, const std::vector<TeacherQuality>& qualities,
                             const std::string& verdicts_path) {
    std::map<std::string, nlohmann::json> verdicts;
    for (const auto& v : read_json_lines(verdicts_path))
        if (v.contains("id") && v["id"].is_string()) verdicts[v["id"].get<std::string>()] = v;

    struct Tally {
        int written = 0, verified = 0, correct = 0, fast_1 = 0;
        double log_speedup = 0;
        int timed = 0;
    };
    struct Level {
        int drawn = 0, families = 0, valid = 0;
        std::map<std::string, Tally> by_quality;
    };
    std::map<int, Level> levels;
    std::map<std::string, int> unsupported;
    for (const TeachDraw& d : draws) {
        Level& l = levels[d.level];
        ++l.drawn;
        if (!d.unsupported.empty()) {
            ++unsupported[d.unsupported];
            continue;
        }
        ++l.families;
        if (!d.valid) continue;
        ++l.valid;
        for (TeacherQuality q : qualities) {
            if (!d.kernels.count(quality_name(q))) continue;
            Tally& t = l.by_quality[quality_name(q)];
            ++t.written;
            auto it = verdicts.find(std::string(quality_name(q)) + "/" + d.name);
            if (it == verdicts.end()) continue;
            const nlohmann::json& v = it->second;
            const std::string status = v.value("status", "");
            if (status == "infra_error") continue;
            ++t.verified;
            if (status != "correct") continue;
            ++t.correct;
            if (v.contains("speedup_eager") && v["speedup_eager"].is_number()) {
                const double s = v["speedup_eager"].get<double>();
                if (s > 1.0) ++t.fast_1;
                if (s > 0) t.log_speedup += std::log(s), ++t.timed;
            }
        }
    }
    nlohmann::json out = {{"levels", nlohmann::json::object()}, {"unsupported", unsupported}};
    for (const auto& [level, l] : levels) {
        nlohmann::json j = {{"drawn", l.drawn}, {"teacher_families", l.families}, {"valid", l.valid}};
        for (const auto& [quality, t] : l.by_quality) {
            j[quality] = {
                {"written", t.written},
                {"verified", t.verified},
                {"correct", t.correct},
                {"fast_1", t.fast_1},
                {"geomean_speedup", t.timed ? nlohmann::json(std::exp(t.log_speedup / t.timed)) : nlohmann::json()},
                {"coverage", t.written ? static_cast<double>(t.correct) / t.written : 0.0}};
        }
        out["levels"][std::to_string(level)] = j;
    }
    return out;
}

}  // namespace kz
