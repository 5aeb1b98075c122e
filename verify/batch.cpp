#include "verify/batch.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "common/files.h"
#include "common/hash.h"
#include "verify/sources.h"

namespace kz {

int default_in_flight(const VerifyOptions& started) { return std::max(2, started.lanes + started.compile_workers); }

using nlohmann::json;

std::vector<BatchJob> read_jobs(const std::string& path) {
    std::string text = read_file(path);  // throws with the cause; the CLI reports it as a usage error
    std::string base = std::filesystem::path(path).parent_path().string();
    std::vector<BatchJob> jobs;
    std::set<std::string> seen;
    size_t start = 0;
    int line_no = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(start, end - start);
        start = end + 1;
        ++line_no;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        BatchJob bj;
        bj.line = line_no;
        json j;
        try {
            j = json::parse(line);
        } catch (const json::exception& e) {
            bj.job.id = "line-" + std::to_string(line_no);
            bj.error = "jobs file line " + std::to_string(line_no) + " is not JSON";
            jobs.push_back(bj);
            continue;
        }
        if (!j.is_object()) {
            bj.job.id = "line-" + std::to_string(line_no);
            bj.error = "jobs file line " + std::to_string(line_no) + " is not a JSON object";
            jobs.push_back(bj);
            continue;
        }
        if (j.contains("id") && (j["id"].is_string() || j["id"].is_number()))
            bj.job.id = j["id"].is_string() ? j["id"].get<std::string>() : j["id"].dump();
        else
            bj.job.id = "line-" + std::to_string(line_no);
        if (seen.count(bj.job.id)) {
            bj.error = "duplicate job id '" + bj.job.id + "' on line " + std::to_string(line_no);
            bj.job.id += "#line-" + std::to_string(line_no);
        }
        seen.insert(bj.job.id);
        bj.job.backend = j.value("backend", std::string());
        if (j.contains("timeout") && j["timeout"].is_number()) bj.job.timeout_s = j["timeout"].get<double>();
        for (const char* field : {"task", "candidate"}) {
            if (!bj.error.empty()) break;
            if (!j.contains(field) || !j[field].is_string()) {
                bj.error = std::string("job has no \"") + field + "\" (a path or the source)";
                break;
            }
            std::string err;
            auto src = load_source(j[field].get<std::string>(), base, err);
            if (!src) {
                bj.error = std::string(field) + ": " + err;
                break;
            }
            (std::string(field) == "task" ? bj.job.task_source : bj.job.candidate_source) = src->text;
        }
        bj.digest = sha256_hex(bj.job.backend + '\0' + std::to_string(bj.job.timeout_s) + '\0' + bj.job.task_source +
                               '\0' + bj.job.candidate_source + '\0' + bj.error);
        jobs.push_back(bj);
    }
    return jobs;
}

std::map<std::string, std::string> finished_jobs(const std::string& out_path) {
    std::map<std::string, std::string> done;
    std::ifstream f(out_path);
    std::string line;
    while (std::getline(f, line)) {
        try {
            json j = json::parse(line);
            if (j.is_object() && j.contains("id") && j["id"].is_string() && j.value("status", "") != "infra_error")
                done[j["id"].get<std::string>()] = j.value("job_digest", "");
        } catch (const json::exception&) {}
    }
    return done;
}

namespace {

std::string fmt_duration(double s) {
    int t = static_cast<int>(s);
    char buf[32];
    if (t >= 3600)
        std::snprintf(buf, sizeof buf, "%dh%02dm", t / 3600, (t / 60) % 60);
    else if (t >= 60)
        std::snprintf(buf, sizeof buf, "%dm%02ds", t / 60, t % 60);
    else
        std::snprintf(buf, sizeof buf, "%ds", t);
    return buf;
}

class Progress {
public:
    Progress(int total, bool enabled) : total_(total), enabled_(enabled), tty_(::isatty(2)), t0_(Clock::now()) {}
    void update(const BatchSummary& s, bool final = false) {
        if (!enabled_) return;
        double el = std::chrono::duration<double>(Clock::now() - t0_).count();
        if (!final && !tty_ && el - last_ < 5.0) return;
        if (final && !tty_ && s.done == last_done_) return;  // already printed
        last_ = el;
        last_done_ = s.done;
        int width = 24;
        int filled = total_ ? width * s.done / total_ : width;
        std::string bar(filled, '#');
        bar += std::string(width - filled, '.');
        double rate = el > 0 ? s.done / el * 60.0 : 0;
        std::string counts;
        for (auto& [k, v] : s.by_status) counts += " " + k + "=" + std::to_string(v);
        std::string eta = rate > 0 && s.done < total_ ? " eta " + fmt_duration((total_ - s.done) / rate * 60) : "";
        std::fprintf(stderr, "%s[%s] %d/%d %.1f/min%s%s%s", tty_ ? "\r\033[K" : "", bar.c_str(), s.done, total_, rate,
                     counts.c_str(), eta.c_str(), tty_ && !final ? "" : "\n");
        std::fflush(stderr);
    }

private:
    int total_;
    bool enabled_, tty_;
    Clock::time_point t0_;
    double last_ = -10;
    int last_done_ = -1;
};

// Removes the lines of `ids` from a results file (their jobs are about to run again), keeping every
// other line as it is; rewritten whole and renamed into place.
void remove_result_lines(const std::string& out_path, const std::set<std::string>& ids) {
    std::ifstream f(out_path);
    std::string line, kept;
    bool removed = false;
    while (std::getline(f, line)) {
        std::string id;
        try {
            json j = json::parse(line);
            if (j.is_object() && j.contains("id") && j["id"].is_string()) id = j["id"].get<std::string>();
        } catch (const json::exception&) {}
        if (!id.empty() && ids.count(id)) {
            removed = true;
            continue;
        }
        kept += line + "\n";
    }
    if (removed) write_file_atomic(out_path, kept);
}

}  // namespace

BatchSummary run_batch(VerifyService& verifier, const BatchOptions& opts, const std::atomic<bool>& stop) {
    std::vector<BatchJob> jobs = read_jobs(opts.jobs_path);
    std::filesystem::path out(opts.out_path);
    if (out.has_parent_path()) std::filesystem::create_directories(out.parent_path());
    if (std::filesystem::exists(out)) truncate_partial_line(opts.out_path);
    const std::map<std::string, std::string> done = finished_jobs(opts.out_path);

    BatchSummary summary;
    std::vector<const BatchJob*> todo;
    std::set<std::string> redo;
    for (auto& j : jobs) {
        auto it = done.find(j.job.id);
        if (it != done.end() && it->second == j.digest) {
            ++summary.skipped;
        } else {
            todo.push_back(&j);
            redo.insert(j.job.id);
        }
    }
    if (std::filesystem::exists(out)) remove_result_lines(opts.out_path, redo);
    summary.total = static_cast<int>(todo.size());
    Progress progress(summary.total, opts.progress);
    std::mutex mu;
    size_t next = 0;
    std::atomic<bool> interrupted{false};

    auto record = [&](const BatchJob& bj, const Verdict& v) {
        json line = {{"id", bj.job.id}, {"job_digest", bj.digest}};
        line.update(v.to_json());
        std::lock_guard lock(mu);
        append_durable(opts.out_path, line.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
        ++summary.done;
        ++summary.by_status[to_string(v.status)];
        progress.update(summary);
    };

    auto worker = [&] {
        for (;;) {
            const BatchJob* bj;
            {
                std::lock_guard lock(mu);
                if (next >= todo.size() || stop || interrupted) return;
                bj = todo[next++];
            }
            Verdict v = bj->error.empty() ? verifier.verify(bj->job)
                                          : early_verdict(bj->error.rfind("task", 0) == 0 ? Status::infra_error
                                                                                          : Status::format_error,
                                                          bj->error, verifier.options().device, bj->job.backend);
            if (stop || interrupted) return;  // cut short: its verdict would be an artefact of the kill
            record(*bj, v);
        }
    };
    std::thread watcher([&] {
        while (!interrupted) {
            {
                std::lock_guard lock(mu);
                if (summary.done >= summary.total) break;
            }
            if (stop) {
                interrupted = true;
                verifier.shutdown();
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    });
    std::vector<std::thread> threads;
    int n = std::max(1, std::min<int>(opts.threads, static_cast<int>(todo.size())));
    for (int i = 0; i < n; ++i) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    interrupted = interrupted || stop;
    watcher.join();
    summary.interrupted = interrupted;
    progress.update(summary, true);
    return summary;
}

}  // namespace kz
