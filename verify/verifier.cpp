#include "verify/verifier.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <thread>

#include "common/files.h"
#include "common/hash.h"

namespace kz {

using nlohmann::json;
using std::chrono::milliseconds;

namespace {

milliseconds secs(double s) { return milliseconds(static_cast<long long>(s * 1000)); }

// A worker answers a request within the request's own limit plus this (a process to start, torch
// to import, a reply to write); past it the worker is taken for hung and replaced.
constexpr double kReplySlackS = 60;
// A candidate run's reply comes after the fork server has killed a child that ran out of time and
// collected its stacks and log, and may wait for a spare child to warm up: more slack.
constexpr double kRunReplySlackS = 90;
// The child's CPU-time limit, a backstop behind the wall-clock kill (a child that stopped reading
// its clock still ends): every thread it may run (torch's, Triton's compiler's) busy for the whole
// run, and start-up.
constexpr double kChildCpuSecondsPerWallSecond = 8;
// How long the reference may take to finish its comparisons once the child has ended.
constexpr double kCompareDrainS = 60;

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

// Seconds per named stage of a job, each from the end of the one before.
class StageClock {
public:
    explicit StageClock(json& stages) : stages_(stages), mark_(Clock::now()) {}
    void lap(const std::string& name) {
        const auto now = Clock::now();
        stages_[name] = std::chrono::duration<double>(now - mark_).count();
        mark_ = now;
    }

private:
    json& stages_;
    Clock::time_point mark_;
};

// The longest a forward call of the candidate may take before its child is killed as hung (null: no
// limit but the job's own, on the CPU, where the Triton interpreter runs kernels at no predictable
// fraction of eager's speed): forward_limit_factor times the reference's eager time, at least
// forward_limit_floor_s, at most the job's timeout.
json forward_limit_s(const VerifyOptions& o, const json& baseline, double timeout_s) {
    if (is_cpu(o.device) || !baseline.is_object()) return nullptr;
    const json& eager = baseline.value("eager", json::object());
    const json& stats = eager.contains("event_ms") ? eager["event_ms"] : eager.value("host_ms", json());
    const double eager_s = stats.is_object() && stats.contains("median") && stats["median"].is_number()
                               ? stats["median"].get<double>() / 1000
                               : 0;
    return std::min(timeout_s, std::max(o.forward_limit_floor_s, o.forward_limit_factor * eager_s));
}

// Runs fn(0) .. fn(n - 1) on a thread each; throws the first non-empty error any of them returned.
void each_in_parallel(size_t n, const std::function<std::string(size_t)>& fn) {
    std::vector<std::string> errors(n);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < n; ++i) threads.emplace_back([&, i] { errors[i] = fn(i); });
    for (auto& t : threads) t.join();
    for (auto& e : errors)
        if (!e.empty()) throw std::runtime_error(e);
}

uint64_t secret_seed() {
    std::random_device rd;
    return ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & ((1ull << 62) - 1);
}

}  // namespace

Verifier::Verifier(VerifyOptions opts) : opts_(with_device_defaults(std::move(opts))) {
    if (opts_.cache_dir.empty()) opts_.cache_dir = default_cache_dir();
    if (opts_.work_dir.empty()) {
        const std::string tmp = std::filesystem::temp_directory_path().string();
        remove_abandoned_work_dirs(tmp);
        opts_.work_dir = make_temp_dir(tmp, "kernelzero-");
        write_file_atomic(opts_.work_dir + "/owner.pid", std::to_string(::getpid()) + "\n");
        owns_work_dir_ = true;
    }
    if (opts_.worker_command.empty()) opts_.worker_command = default_worker_command();
    if (opts_.python_dir.empty()) opts_.python_dir = default_python_dir();
    if (opts_.lanes < 0) opts_.lanes = 1;
    baselines_ = std::make_unique<BaselineCache>(opts_.cache_dir + "/baselines.sqlite");
    // Lanes and compile workers set to auto (0) are counted in start(), once the device is known;
    // until then one lane and one compile worker stand in.
    make_lanes(std::max(1, opts_.lanes));
    for (int i = 0; i < std::max(1, opts_.compile_workers); ++i) {
        compilers_.push_back(std::make_unique<Worker>(worker_config("compile", i)));
        free_compilers_.push_back(compilers_.back().get());
    }
}

void Verifier::make_lanes(int n) {
    while (static_cast<int>(lanes_.size()) < n) {
        const int i = static_cast<int>(lanes_.size());
        auto lane = std::make_unique<Lane>();
        lane->reference = std::make_unique<Worker>(worker_config("reference", i));
        lane->candidate = std::make_unique<Worker>(worker_config("candidate", i));
        free_lanes_.push_back(lane.get());
        lanes_.push_back(std::move(lane));
    }
}

VerifyOptions with_device_defaults(VerifyOptions o) {
    const bool cpu = is_cpu(o.device);
    if (o.timing_iters <= 0) o.timing_iters = cpu ? 10 : 100;
    if (o.compile_baseline < 0) o.compile_baseline = cpu ? 0 : 1;
    return o;
}

int auto_lanes(int host_cores, int64_t device_total_bytes) {
    int lanes = std::clamp(host_cores / 2, 1, 8);
    if (device_total_bytes > 0)
        lanes = std::min<int>(lanes, static_cast<int>(std::max<int64_t>(1, device_total_bytes / (16 * kGiB))));
    return lanes;
}

json Verifier::timing_request_fields() const {
    return {{"timing_iters", opts_.timing_iters},     {"min_iters", opts_.min_timing_iters},
            {"precision", opts_.timing_precision},    {"budget_ms", opts_.timing_budget_ms},
            {"keep_sets_bytes", kKeptTimingSetBytes}, {"lock_path", opts_.work_dir + "/device.lock"}};
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
    // both sides, or the child would rebuild), so they are configured after it is known; so are the
    // lanes when their number is automatic (it depends on the device's memory).
    StageClock clock(start_stages_);
    Worker& probe = *lanes_[0]->reference;
    Reply info = probe.request({{"op", "device_info"}, {"device", probe.config().device}}, milliseconds(180000));
    clock.lap("probe_s");
    if (info.status != ReplyStatus::ok)
        throw std::runtime_error("the reference worker cannot open device " + opts_.device + ": " + info.detail);
    device_name_ = info.body.value("device_name", std::string("unknown"));
    torch_version_ = info.body.value("torch", std::string("unknown"));
    timing_method_ = info.body.value("timing_method", std::string("unknown"));
    const json& mem = info.body.value("memory", json());
    const int64_t device_total = mem.is_object() ? mem.value("total", int64_t{0}) : 0;
    {
        std::lock_guard lock(mu_);
        if (opts_.lanes == 0) opts_.lanes = auto_lanes(host_cores(), device_total);
        if (opts_.compile_workers < 1) opts_.compile_workers = opts_.lanes;
        make_lanes(opts_.lanes);
        if (info.body.contains("arch") && info.body["arch"].is_object()) {
            nvrtc_arch_ = info.body["arch"].value("nvrtc", std::string());
            torch_arch_list_ = info.body["arch"].value("torch_arch_list", std::string());
            for (size_t i = 0; i < lanes_.size(); ++i)
                lanes_[i]->candidate = std::make_unique<Worker>(worker_config("candidate", static_cast<int>(i)));
        }
        compilers_.clear();
        free_compilers_.clear();
        for (int i = 0; i < opts_.compile_workers; ++i) {
            compilers_.push_back(std::make_unique<Worker>(worker_config("compile", i)));
            free_compilers_.push_back(compilers_.back().get());
        }
    }
    std::vector<Worker*> all;
    for (auto& w : compilers_) all.push_back(w.get());
    for (auto& l : lanes_) {
        all.push_back(l->reference.get());
        all.push_back(l->candidate.get());
    }
    each_in_parallel(all.size(), [&](size_t i) {
        std::string error;
        all[i]->ensure_started(error);
        return error;
    });
    clock.lap("workers_s");
    // Every worker opens the device before the first job: a candidate's first child (forked now,
    // warming up in the background) and the reference (whose reply waits for its context). Contexts
    // open a few a second host-wide, so a first job would otherwise wait seconds for two.
    for (auto& l : lanes_) l->candidate->request({{"op", "warm"}}, milliseconds(60000));
    each_in_parallel(lanes_.size(), [&](size_t i) {
        Worker& ref = *lanes_[i]->reference;
        Reply r = ref.request({{"op", "warm_up"}, {"device", ref.config().device}}, milliseconds(120000));
        return r.status == ReplyStatus::ok ? std::string() : "the reference worker cannot open its device: " + r.detail;
    });
    clock.lap("warm_up_s");
    if (!is_cpu(opts_.device)) {
        // What is free now, less the contexts the lanes' processes hold once busy and a margin
        // (device_capacity), is what the jobs can have.
        int64_t capacity = opts_.device_memory_bytes;
        if (capacity <= 0) {
            Reply now = probe.request({{"op", "device_info"}, {"device", probe.config().device}}, milliseconds(60000));
            const json& m = now.body.value("memory", json());
            if (now.status != ReplyStatus::ok || !m.is_object())
                throw std::runtime_error("the reference worker cannot read the memory of " + opts_.device + ": " +
                                         now.detail);
            capacity = device_capacity(m.value("total", int64_t{0}), m.value("free", int64_t{0}), opts_.lanes,
                                       opts_.reserved_device_bytes);
        }
        if (capacity < kGiB) {
            const std::string kept = opts_.reserved_device_bytes > 0 ? ", " + gib(opts_.reserved_device_bytes) +
                                                                           " kept for the module validators' contexts"
                                                                     : "";
            throw std::runtime_error("device " + opts_.device + " leaves " + gib(capacity) +
                                     " for the verifier's jobs (" + std::to_string(opts_.lanes) + " lanes" + kept +
                                     "): fewer lanes or validators, or free the device");
        }
        budget_ = std::make_unique<DeviceMemoryBudget>(capacity);
        clock.lap("capacity_s");
    }
}

void Verifier::shutdown() {
    shut_down_ = true;
    cv_.notify_all();
    if (budget_) budget_->wake();
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
    BaselineKey key{sha256_hex(job.task_source), device_name_, torch_version_, timing_method_, opts_.timing_iters,
                    opts_.compile_baseline == 1};
    // Adaptive timing is part of the method: baselines measured otherwise are not reused.
    key.timing_method += "/adaptive-" + std::to_string(opts_.min_timing_iters) + "-" +
                         json(opts_.timing_precision).dump() + "-" + json(opts_.timing_budget_ms).dump();
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
    const std::string dev = lane.reference->config().device;
    json req = timing_request_fields();
    req.update({{"op", "baseline"},
                {"task_source", job.task_source},
                {"device", dev},
                {"with_compile", opts_.compile_baseline == 1}});
    // Admission: the footprint estimated from shapes (the measurement itself gives the real one); a
    // task that cannot be estimated, or that ran out of memory beside other jobs, is measured alone.
    bool alone = false;
    int64_t need = 0;
    if (budget_) {
        Reply fp =
            lane.reference->request({{"op", "footprint"}, {"task_source", job.task_source}}, milliseconds(120000));
        if (fp.status != ReplyStatus::ok) {
            worker_failed = fp.worker_failure();
            error = fp.detail;
            return json();
        }
        auto estimate = TaskFootprint::from_json(fp.body, false);
        alone = !estimate;
        need = estimate ? std::min(baseline_memory(*estimate), budget_->capacity()) : budget_->capacity();
    }
    for (;;) {
        DeviceMemoryBudget::Reservation admitted;
        if (budget_) {
            admitted = alone ? budget_->acquire_all(shut_down_) : budget_->acquire(need, shut_down_);
            if (!admitted.admitted()) {
                error = "the verifier is shutting down";
                return json();
            }
        }
        Reply r = lane.reference->request(req, secs(opts_.compile_timeout_s + kReplySlackS));
        if (r.status == ReplyStatus::failed && r.body.value("memory_failure", false) && budget_ && !alone) {
            alone = true;  // measured again with the device to itself
            continue;
        }
        if (r.status != ReplyStatus::ok) {
            // A device kept busy by another job's forward is retried like a worker failure.
            worker_failed = r.worker_failure() || r.body.value("busy", false);
            error = r.detail;
            if (r.body.value("memory_failure", false))
                error = "the task does not fit on this device even alone (" + gib(budget_ ? budget_->capacity() : 0) +
                        " for the verifier's jobs): " + r.detail;
            return json();
        }
        json value = r.body;
        value.erase("id");
        baselines_->put(key, value);
        return value;
    }
}

struct Verifier::LaneRun {
    std::string infra;            // set: the attempt failed for a reason of the verifier's, not the candidate's
    bool retry = false;           // ... and may be retried
    bool memory_trouble = false;  // it may have failed for want of memory while sharing the device
};

Verifier::LaneRun Verifier::run_on_lane(Lane& lane, const Job& job, const JobMemory& need, bool alone, double timeout_s,
                                        JobReplies& replies) {
    LaneRun out;
    StageClock clock(replies.stages);
    const std::string suffix = alone ? "_alone" : "";
    DeviceMemoryBudget::Reservation admitted;
    int64_t cap = 0;
    if (budget_) {
        try {
            admitted = alone ? budget_->acquire_all(shut_down_) : budget_->acquire(need.total(), shut_down_);
        } catch (const std::length_error& e) {
            out.infra = std::string("the task cannot run on this device even alone: the job ") + e.what();
            return out;
        }
        if (!admitted.admitted()) {
            out.infra = "the verifier is shutting down";
            return out;
        }
        cap = alone ? budget_->capacity() - std::min(need.reference, budget_->capacity() / 2) : need.candidate;
        replies.memory = {{"need", need.to_json()},
                          {"admitted", admitted.bytes()},
                          {"beside", admitted.beside()},
                          {"candidate_cap", cap},
                          {"alone", alone}};
        clock.lap("wait_memory" + suffix);
    }
    const std::string dev = lane.reference->config().device;
    const std::string job_id = (job.id.empty() ? "" : job.id + "-") + std::to_string(++job_counter_);
    const uint64_t seed = secret_seed();
    Reply open = lane.reference->request({{"op", "open_job"},
                                          {"job_id", job_id},
                                          {"task_source", job.task_source},
                                          {"device", dev},
                                          {"seed", seed},
                                          {"trials", opts_.trials},
                                          {"timeout_s", timeout_s},
                                          {"lock_path", opts_.work_dir + "/device.lock"},
                                          {"tolerances", {{"torch.float32", {opts_.atol, opts_.rtol}}}}},
                                         secs(kReplySlackS));
    if (open.status != ReplyStatus::ok) {
        out.retry = open.worker_failure();
        out.infra = "reference worker: " + open.detail;
        return out;
    }
    json run_req = timing_request_fields();
    run_req.update({{"op", "run"},
                    {"job_id", job_id},
                    {"task_source", job.task_source},
                    {"candidate_source", job.candidate_source},
                    {"backend", job.backend},
                    {"device", dev},
                    {"seed", seed},
                    {"trials", opts_.trials},
                    {"warmup", opts_.warmup},
                    {"channel", open.body.value("channel", json())},
                    {"poison_bytes", replies.baseline.is_object()
                                         ? replies.baseline.value("memory", json::object()).value("outputs", int64_t{0})
                                         : 0},
                    {"memory_cap_bytes", cap > 0 ? json(cap) : json(nullptr)},
                    {"kernel_names", replies.compile.value("kernel_names", json::array())},
                    {"extensions_dir", replies.compile.value("extensions_dir", json(nullptr))},
                    {"timeout_s", timeout_s},
                    {"forward_limit_s", forward_limit_s(opts_, replies.baseline, timeout_s)},
                    {"cpu_seconds", static_cast<int>(timeout_s * kChildCpuSecondsPerWallSecond + kReplySlackS)},
                    {"threads", is_cpu(dev) ? 1 : 4}});
    Reply rr = lane.candidate->request(run_req, secs(timeout_s + kRunReplySlackS));
    clock.lap("candidate_run" + suffix);
    // The child has ended (its connection with it): the reference's comparisons end too.
    Reply cmp = lane.reference->request({{"op", "close_job"}, {"job_id", job_id}, {"wait_s", kCompareDrainS}},
                                        secs(kCompareDrainS + kReplySlackS));
    clock.lap("compare" + suffix);
    admitted.release();
    const std::string job_dir = rr.body.value("job_dir", std::string());
    if (!job_dir.empty() && job_dir.rfind(opts_.work_dir, 0) == 0) {
        std::error_code ec;
        std::filesystem::remove_all(job_dir, ec);
    }
    // A reply without a failure kind is the fork server's own failure, not the candidate's.
    if (rr.status != ReplyStatus::ok && !(rr.status == ReplyStatus::failed && rr.body.contains("kind"))) {
        out.retry = true;
        out.infra = "candidate worker: " + rr.detail;
        return out;
    }
    replies.run = rr.body;
    if (cmp.status != ReplyStatus::ok) {
        out.retry = true;
        out.infra = "reference worker: " + cmp.detail;
        if (cmp.worker_failure() || cmp.status == ReplyStatus::failed) lane.reference->stop();
        return out;
    }
    replies.compare = cmp.body;
    const bool child_memory = rr.body.value("memory_error", false) || rr.body.value("crashed", false);
    const bool reference_memory = cmp.body.contains("memory_failure");
    out.memory_trouble = budget_ && (child_memory || reference_memory);
    if (alone && reference_memory)
        out.infra = "the reference runs out of device memory with the device to itself (" + gib(budget_->capacity()) +
                    " for the verifier's jobs): " + cmp.body.value("memory_failure", std::string());
    return out;
}

Verdict Verifier::attempt(const Job& job, bool& retry) {
    retry = false;
    const double timeout_s = job.timeout_s > 0 ? job.timeout_s : opts_.timeout_s;
    AssemblyPolicy policy{opts_.strict, opts_.min_kernel_share, opts_.speedup_review_bound,
                          opts_.require_custom_kernel};
    JobReplies replies;
    replies.device = opts_.device;
    replies.backend = job.backend;
    auto infra = [&](const std::string& why) {
        Verdict v = early_verdict(Status::infra_error, why, opts_.device, job.backend);
        v.stages = replies.stages;
        return v;
    };

    // Compile side.
    StageClock clock(replies.stages);
    Worker* comp = take(free_compilers_);
    if (!comp) return infra("the verifier is shutting down");
    clock.lap("wait_compile_worker");
    Reply cr = comp->request({{"op", "compile"},
                              {"source", job.candidate_source},
                              {"backend", job.backend},
                              {"arch", nvrtc_arch_.empty() ? json(nullptr) : json(nvrtc_arch_)},
                              {"torch_arch_list", torch_arch_list_},
                              {"cache_dir", opts_.cache_dir},
                              {"timeout_s", opts_.compile_timeout_s}},
                             secs(opts_.compile_timeout_s + kReplySlackS));
    give(free_compilers_, comp);
    clock.lap("compile");
    if (cr.status != ReplyStatus::ok) {
        retry = cr.worker_failure();
        return infra("compile worker: " + cr.detail);
    }
    replies.compile = cr.body;
    Verdict early = assemble_verdict(replies, policy);
    if (early.status != Status::infra_error) return early;  // static rejection or build failure

    Lane* lane = take(free_lanes_);
    if (!lane) return infra("the verifier is shutting down");
    clock.lap("wait_lane");
    struct Release {
        Verifier* v;
        Lane* l;
        ~Release() { v->give(v->free_lanes_, l); }
    } release{this, lane};

    std::string berr;
    bool bfail = false;
    replies.baseline = baseline_for(*lane, job, berr, bfail);
    clock.lap("baseline");
    if (replies.baseline.is_null()) {
        retry = bfail;
        return infra((bfail ? "reference worker: " : "the task cannot be timed: ") + berr);
    }
    // The task's measured footprint decides the job's memory (a baseline without one, from the CPU,
    // needs no admission).
    const auto footprint = TaskFootprint::from_json(replies.baseline.value("memory", json()), true);
    const JobMemory need = footprint ? job_memory(*footprint) : JobMemory{};
    const bool unmeasured = budget_ && !footprint;

    LaneRun run = run_on_lane(*lane, job, need, unmeasured, timeout_s, replies);
    if (run.memory_trouble && !unmeasured && run.infra.empty()) {
        // It may have failed for want of memory its neighbours held: run it again with the device to
        // itself before anything is said about the candidate.
        const json first = {{"run", replies.run}, {"compare", replies.compare}, {"memory", replies.memory}};
        replies.run = replies.compare = json();
        run = run_on_lane(*lane, job, need, true, timeout_s, replies);
        const std::string reference_failure = first["compare"].value("memory_failure", std::string());
        replies.memory["first_run"] = {
            {"reason", reference_failure.empty() ? first["run"].value("reason", std::string()) : reference_failure},
            {"memory", first["run"].value("memory", json())},
            {"beside", first["memory"].value("beside", int64_t{0})}};
    }
    if (!run.infra.empty()) {
        retry = run.retry;
        return infra(run.infra);
    }
    Verdict v = assemble_verdict(replies, policy);
    if (run.memory_trouble && replies.memory.value("alone", false) && replies.run.value("memory_error", false) &&
        footprint) {
        // Out of memory with the device to itself: the candidate's doing only if it needs clearly more
        // than the reference; otherwise the device itself is short (another process holds memory).
        const json& m = replies.run.value("memory", json::object());
        auto bytes = [&](const char* key) { return m.contains(key) && m[key].is_number() ? m[key].get<int64_t>() : 0; };
        const int64_t held = bytes("peak_bytes") + bytes("tried_bytes");
        const std::string figures = "it needed at least " + gib(held) + " (its allocator may hold " +
                                    gib(bytes("cap_bytes")) + "), the reference needs " +
                                    gib(footprint->reference_peak()) + " (a child running it about " +
                                    gib(honest_candidate_memory(*footprint)) + ")";
        if (clearly_more_than_reference(held, *footprint)) {
            v.reason = "ran out of device memory with the device to itself: " + figures + ". " + v.reason;
        } else {
            v = infra("out of device memory with the device to itself, though " + figures +
                      ": the device is short of memory");
        }
    }
    if (v.status == Status::infra_error && replies.run.value("kind", "") == "infra_error")
        retry = replies.run.value("retry", false);
    if (v.status == Status::infra_error && replies.compare.value("channel_error", json()).is_string()) retry = true;
    if (v.memory.is_null()) v.memory = replies.memory;
    return v;
}

}  // namespace kz
