#include "verify/verifier.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/files.h"

namespace kz {

using nlohmann::json;
using std::chrono::milliseconds;

#ifndef KZ_DEFAULT_PYTHON
#define KZ_DEFAULT_PYTHON "python3"
#endif
#ifndef KZ_DEFAULT_PYTHON_DIR
#define KZ_DEFAULT_PYTHON_DIR "python"
#endif

std::string default_python() {
    if (const char* p = std::getenv("KZ_PYTHON"); p && *p) return p;
    return KZ_DEFAULT_PYTHON;
}

std::string default_python_dir() {
    if (const char* p = std::getenv("KZ_PYTHON_DIR"); p && *p) return p;
    return KZ_DEFAULT_PYTHON_DIR;
}

namespace {

milliseconds secs(double s) { return milliseconds(static_cast<long long>(s * 1000)); }

bool is_cpu(const std::string& device) { return device.rfind("cpu", 0) == 0; }

// Scratch directories of verifiers that were killed (SIGKILL leaves them behind): removed when
// their owner process is gone.
void remove_abandoned_work_dirs(const std::string& tmp) {
    std::error_code ec;
    for (auto& e : std::filesystem::directory_iterator(tmp, ec)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("kernelzero-", 0) != 0 || !e.is_directory(ec)) continue;
        std::ifstream f(e.path() / "owner.pid");
        long pid = 0;
        if (!(f >> pid) || pid <= 0) continue;
        if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) std::filesystem::remove_all(e.path(), ec);
    }
}

uint64_t secret_seed() {
    std::random_device rd;
    return ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & ((1ull << 62) - 1);
}

}  // namespace

Verifier::Verifier(VerifyOptions opts) : opts_(std::move(opts)) {
    if (opts_.cache_dir.empty()) opts_.cache_dir = default_cache_dir();
    if (opts_.work_dir.empty()) {
        const std::string tmp = std::filesystem::temp_directory_path().string();
        remove_abandoned_work_dirs(tmp);
        opts_.work_dir = make_temp_dir(tmp, "kernelzero-");
        write_file_atomic(opts_.work_dir + "/owner.pid", std::to_string(::getpid()) + "\n");
        owns_work_dir_ = true;
    }
    if (opts_.worker_command.empty()) opts_.worker_command = {default_python(), "-m", "kernelzero.worker"};
    if (opts_.python_dir.empty()) opts_.python_dir = default_python_dir();
    if (opts_.compile_baseline < 0) opts_.compile_baseline = is_cpu(opts_.device) ? 0 : 1;
    if (opts_.lanes < 1) opts_.lanes = 1;
    if (opts_.compile_workers < 1) opts_.compile_workers = 1;
    baselines_ = std::make_unique<BaselineCache>(opts_.cache_dir + "/baselines.sqlite");
    for (int i = 0; i < opts_.compile_workers; ++i) {
        compilers_.push_back(std::make_unique<Worker>(worker_config("compile", i)));
        free_compilers_.push_back(compilers_.back().get());
    }
    for (int i = 0; i < opts_.lanes; ++i) {
        auto lane = std::make_unique<Lane>();
        lane->reference = std::make_unique<Worker>(worker_config("reference", i));
        lane->candidate = std::make_unique<Worker>(worker_config("candidate", i));
        free_lanes_.push_back(lane.get());
        lanes_.push_back(std::move(lane));
    }
}

Verifier::~Verifier() {
    shutdown();
    compilers_.clear();
    lanes_.clear();
    if (owns_work_dir_) {
        std::error_code ec;
        std::filesystem::remove_all(opts_.work_dir, ec);
    }
}

WorkerConfig Verifier::worker_config(const std::string& role, int index) const {
    WorkerConfig c;
    c.command = opts_.worker_command;
    c.role = role;
    std::string dev = opts_.device;
    c.env["PYTHONPATH"] = opts_.python_dir;
    c.env["PYTHONUNBUFFERED"] = "1";
    c.env["KZ_BUILD_CACHE"] = opts_.cache_dir;
    c.env["TRITON_CACHE_DIR"] = opts_.cache_dir + "/triton";
    c.env["KZ_SPARE_CHILDREN"] = std::to_string(opts_.spare_children);
    if (!torch_arch_list_.empty()) c.env["TORCH_CUDA_ARCH_LIST"] = torch_arch_list_;
    if (dev.rfind("cuda:", 0) == 0) {
        c.env["CUDA_VISIBLE_DEVICES"] = dev.substr(5);
        dev = "cuda";
    }
    c.device = role == "compile" ? "cpu" : dev;
    c.work_root = opts_.work_dir + "/" + role + "-" + std::to_string(index);
    c.log_path = opts_.work_dir + "/logs/" + role + "-" + std::to_string(index) + ".log";
    return c;
}

int Verifier::worker_starts() const {
    int n = 0;
    for (auto& w : compilers_) n += w->starts();
    for (auto& l : lanes_) n += l->reference->starts() + l->candidate->starts();
    return n;
}

void Verifier::start() {
    // The device's identity first: its architecture goes into the environment of the compile
    // workers and candidate children (load_inline builds must see the same TORCH_CUDA_ARCH_LIST on
    // both sides, or the child would rebuild), so they are configured after it is known.
    Worker& probe = *lanes_[0]->reference;
    Reply info = probe.request({{"op", "device_info"}, {"device", probe.config().device}}, milliseconds(180000));
    if (info.status != ReplyStatus::ok)
        throw std::runtime_error("the reference worker cannot open device " + opts_.device + ": " + info.detail);
    device_name_ = info.body.value("device_name", std::string("unknown"));
    torch_version_ = info.body.value("torch", std::string("unknown"));
    timing_method_ = info.body.value("timing_method", std::string("unknown"));
    if (info.body.contains("arch") && info.body["arch"].is_object()) {
        nvrtc_arch_ = info.body["arch"].value("nvrtc", std::string());
        torch_arch_list_ = info.body["arch"].value("torch_arch_list", std::string());
        std::lock_guard lock(mu_);
        for (size_t i = 0; i < lanes_.size(); ++i)
            lanes_[i]->candidate = std::make_unique<Worker>(worker_config("candidate", static_cast<int>(i)));
        free_compilers_.clear();
        for (size_t i = 0; i < compilers_.size(); ++i) {
            compilers_[i] = std::make_unique<Worker>(worker_config("compile", static_cast<int>(i)));
            free_compilers_.push_back(compilers_[i].get());
        }
    }
    std::vector<Worker*> all;
    for (auto& w : compilers_) all.push_back(w.get());
    for (auto& l : lanes_) {
        all.push_back(l->reference.get());
        all.push_back(l->candidate.get());
    }
    std::vector<std::string> errors(all.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < all.size(); ++i)
        threads.emplace_back([&, i] { all[i]->ensure_started(errors[i]); });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (!e.empty()) throw std::runtime_error(e);
    for (auto& l : lanes_) l->candidate->request({{"op", "warm"}}, milliseconds(60000));  // first spare child
}

void Verifier::shutdown() {
    shut_down_ = true;
    cv_.notify_all();
    for (auto& w : compilers_) w->stop();
    for (auto& l : lanes_) {
        l->reference->stop();
        l->candidate->stop();
    }
}

Verdict Verifier::verify(const Job& job) {
    auto t0 = Clock::now();
    Verdict v;
    if (job.backend != "cuda" && job.backend != "triton") {
        v = early_verdict(Status::format_error, "unknown backend '" + job.backend + "' (cuda or triton)", opts_.device,
                          job.backend);
    } else if (!valid_utf8(job.task_source)) {
        v = early_verdict(Status::infra_error, "the task source is not UTF-8 text", opts_.device, job.backend);
    } else if (!valid_utf8(job.candidate_source)) {
        v = early_verdict(Status::format_error, "the candidate source is not UTF-8 text", opts_.device, job.backend);
        v.checks["syntax"] = "fail";
    } else if (job.backend == "cuda" && is_cpu(opts_.device)) {
        v = early_verdict(Status::infra_error, "backend cuda needs a GPU; this verifier runs on " + opts_.device,
                          opts_.device, job.backend);
    } else {
        int attempts = 0;
        for (;;) {
            ++attempts;
            bool retry = false;
            v = attempt(job, retry);
            if (!retry || attempts >= opts_.max_attempts || shut_down_) break;
        }
        v.attempts = attempts;
    }
    v.total_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return v;
}

json Verifier::baseline_for(Lane& lane, const Job& job, std::string& error, bool& worker_failed) {
    BaselineKey key{sha256_hex(job.task_source), device_name_, torch_version_, timing_method_,
                    opts_.timing_iters, opts_.compile_baseline == 1};
    std::string lock_key = key.task_hash;
    std::shared_ptr<std::mutex> m;
    {
        std::lock_guard lock(mu_);
        auto& slot = baseline_locks_[lock_key];
        if (!slot) slot = std::make_shared<std::mutex>();
        m = slot;
    }
    std::lock_guard one_measurement(*m);  // concurrent jobs of one task measure it once
    if (auto cached = baselines_->get(key)) return *cached;
    Reply r = lane.reference->request({{"op", "baseline"},
                                       {"task_source", job.task_source},
                                       {"device", lane.reference->config().device},
                                       {"timing_iters", opts_.timing_iters},
                                       {"with_compile", opts_.compile_baseline == 1},
                                       {"lock_path", opts_.work_dir + "/device.lock"}},
                                      secs(opts_.compile_timeout_s + 60));
    if (r.status != ReplyStatus::ok) {
        worker_failed = r.worker_failure();
        error = r.detail;
        return json();
    }
    json value = r.body;
    value.erase("id");
    baselines_->put(key, value);
    return value;
}

Verdict Verifier::attempt(const Job& job, bool& retry) {
    retry = false;
    const double timeout_s = job.timeout_s > 0 ? job.timeout_s : opts_.timeout_s;
    AssemblyPolicy policy{opts_.strict, opts_.min_kernel_share, opts_.speedup_review_bound, opts_.require_custom_kernel};
    JobReplies replies;
    replies.device = opts_.device;
    replies.backend = job.backend;
    auto infra = [&](const std::string& why) { return early_verdict(Status::infra_error, why, opts_.device, job.backend); };

    // Compile side.
    auto mark = Clock::now();
    auto lap = [&](const char* name) {
        auto now = Clock::now();
        replies.stages[name] = std::chrono::duration<double>(now - mark).count();
        mark = now;
    };
    Worker* comp = take(free_compilers_);
    if (!comp) return infra("the verifier is shutting down");
    lap("wait_compile_worker");
    Reply cr = comp->request({{"op", "compile"},
                              {"source", job.candidate_source},
                              {"backend", job.backend},
                              {"arch", nvrtc_arch_.empty() ? json(nullptr) : json(nvrtc_arch_)},
                              {"torch_arch_list", torch_arch_list_},
                              {"cache_dir", opts_.cache_dir},
                              {"timeout_s", opts_.compile_timeout_s}},
                             secs(opts_.compile_timeout_s + 60));
    give(free_compilers_, comp);
    lap("compile");
    if (cr.status != ReplyStatus::ok) {
        retry = cr.worker_failure();
        return infra("compile worker: " + cr.detail);
    }
    replies.compile = cr.body;
    Verdict early = assemble_verdict(replies, policy);
    if (early.status != Status::infra_error) return early;  // static rejection or build failure

    Lane* lane = take(free_lanes_);
    if (!lane) return infra("the verifier is shutting down");
    lap("wait_lane");
    struct Release {
        Verifier* v;
        Lane* l;
        ~Release() { v->give(v->free_lanes_, l); }
    } release{this, lane};
    const std::string dev = lane->reference->config().device;

    std::string berr;
    bool bfail = false;
    replies.baseline = baseline_for(*lane, job, berr, bfail);
    lap("baseline");
    if (replies.baseline.is_null()) {
        retry = bfail;
        return infra((bfail ? "reference worker: " : "the task cannot be timed: ") + berr);
    }

    const std::string job_id = job.id.empty() ? std::to_string(++job_counter_) : job.id + "-" + std::to_string(++job_counter_);
    const uint64_t seed = secret_seed();
    json tolerances = {{"torch.float32", {opts_.atol, opts_.rtol}}};
    Reply pr = lane->reference->request({{"op", "prepare"},
                                         {"job_id", job_id},
                                         {"task_source", job.task_source},
                                         {"device", dev},
                                         {"seed", seed},
                                         {"trials", opts_.trials}},
                                        secs(timeout_s + 60));
    lap("reference");
    if (pr.status != ReplyStatus::ok) {
        retry = pr.worker_failure();
        return infra((pr.body.value("task_error", false) ? "the task is broken: " : "reference worker: ") + pr.detail);
    }
    json run_req = {{"op", "run"},
                    {"job_id", job_id},
                    {"task_source", job.task_source},
                    {"candidate_source", job.candidate_source},
                    {"backend", job.backend},
                    {"device", dev},
                    {"seed", seed},
                    {"trials", opts_.trials},
                    {"timing_iters", opts_.timing_iters},
                    {"warmup", opts_.warmup},
                    {"expected_meta", pr.body["meta"]},
                    {"expected_bytes", pr.body.value("bytes", 0)},
                    {"kernel_names", replies.compile.value("kernel_names", json::array())},
                    {"extensions_dir", replies.compile.value("extensions_dir", json(nullptr))},
                    {"lock_path", opts_.work_dir + "/device.lock"},
                    {"timeout_s", timeout_s},
                    {"cpu_seconds", static_cast<int>(timeout_s * 8 + 60)},
                    {"threads", is_cpu(dev) ? 1 : 4}};
    Reply rr = lane->candidate->request(run_req, secs(timeout_s + 90));
    lap("candidate_run");
    // A reply without a failure kind is the fork server's own failure, not the candidate's.
    if (rr.status != ReplyStatus::ok && !(rr.status == ReplyStatus::failed && rr.body.contains("kind"))) {
        lane->reference->request({{"op", "drop"}, {"job_id", job_id}}, secs(30));
        retry = true;
        return infra("candidate worker: " + rr.detail);
    }
    replies.run = rr.body;
    const std::string job_dir = rr.body.value("job_dir", std::string());
    if (rr.body.value("cuda_error", false)) lane->candidate->stop();  // replaced on its next request

    if (rr.body.value("ok", false) && rr.body.contains("outputs_path")) {
        Reply cmp = lane->reference->request({{"op", "compare"},
                                              {"job_id", job_id},
                                              {"outputs_path", rr.body["outputs_path"]},
                                              {"tolerances", tolerances}},
                                             secs(timeout_s + 60));
        if (cmp.status != ReplyStatus::ok) {
            retry = cmp.worker_failure();
            return infra("reference worker: " + cmp.detail);
        }
        replies.compare = cmp.body;
        lap("compare");
    } else {
        lane->reference->request({{"op", "drop"}, {"job_id", job_id}}, secs(30));
    }
    if (!job_dir.empty() && job_dir.rfind(opts_.work_dir, 0) == 0) {
        std::error_code ec;
        std::filesystem::remove_all(job_dir, ec);
    }
    Verdict v = assemble_verdict(replies, policy);
    if (v.status == Status::infra_error && rr.body.value("kind", "") == "infra_error") retry = false;
    return v;
}

}  // namespace kz
