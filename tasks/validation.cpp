#include "tasks/validation.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "common/files.h"
#include "common/hash.h"
#include "common/host.h"
#include "worker/protocol.h"
#include "worker/worker.h"

namespace kz {

using json = nlohmann::json;

const std::vector<std::string>& validation_checks() {
    static const std::vector<std::string> c = {"format",        "runs",           "compile",         "deterministic",
                                               "no_randomness", "non_degenerate", "input_dependent", "well_conditioned",
                                               "uses_api_set",  "runtime_band",   "memory_band",     "novel",
                                               "decontaminated"};
    return c;
}

json TaskValidation::to_json() const {
    return {{"valid", valid}, {"checks", checks}, {"reason", reason}, {"reasons", reasons}, {"info", info}};
}

TaskValidation TaskValidation::from_json(const json& j) {
    TaskValidation v;
    v.valid = j.at("valid").get<bool>();
    v.checks = j.at("checks").get<std::map<std::string, std::string>>();
    v.reasons = j.at("reasons").get<std::map<std::string, std::string>>();
    v.reason = j.at("reason").get<std::string>();
    v.info = j.value("info", json::object());
    return v;
}

std::string validation_key(const std::string& device, const std::vector<std::string>& apis, const std::string& source) {
    std::string joined;
    for (const auto& a : apis) joined += a + ",";
    return sha256_hex(device + "\n" + joined + "\n" + source);
}

json validation_record(const std::string& key, const TaskValidation& v) {
    return {{"key", key}, {"valid", v.valid}, {"reason", v.reason}, {"validation", v.to_json()}};
}

std::map<std::string, json> read_validation_records(const std::string& path) {
    std::map<std::string, json> by_key;
    int n = 0;
    for (json& j : read_json_lines(path)) {
        ++n;
        if (!j.contains("key") || !j["key"].is_string()) continue;
        if (j.contains("validation")) try {
                TaskValidation::from_json(j["validation"]);
            } catch (const json::exception& e) {
                throw std::runtime_error(path + ", record " + std::to_string(n) + ": not a validation: " + e.what());
            }
        std::string key = j["key"].get<std::string>();
        by_key[key] = std::move(j);
    }
    return by_key;
}

int validation_compile_threads(int workers, int processes_on_host) {
    return std::max(1, host_cores() / std::max(1, std::max(1, workers) * std::max(1, processes_on_host)));
}

namespace {

int64_t worker_memory_bytes(const ValidationOptions& opts) {
    return 3 * static_cast<int64_t>(opts.max_memory_mb * static_cast<double>(kMiB)) + kGiB;
}

}  // namespace

int64_t validation_memory_cap(const ValidationOptions& opts) {
    return opts.device.rfind("cuda", 0) == 0 ? worker_memory_bytes(opts) : 0;
}

int64_t validation_memory_hold(const ValidationOptions& opts) {
    return opts.device_budget ? std::min(worker_memory_bytes(opts), opts.device_budget->capacity()) : 0;
}

TaskValidator::TaskValidator(const ApiCatalog& catalog, ValidationOptions opts)
    : catalog_(catalog), opts_(std::move(opts)) {
    work_dir_ = opts_.work_dir;
    if (work_dir_.empty()) {
        work_dir_ = make_temp_dir(std::filesystem::temp_directory_path().string(), "kernelzero-validate-");
        owns_work_dir_ = true;
    }
    if (opts_.workers < 1) throw std::invalid_argument("validation needs at least one worker");
    // A value set by the user is kept. docs/BENCHMARKS.md, "Data parallelism", has the measurements.
    const char* user_threads = std::getenv("TORCHINDUCTOR_COMPILE_THREADS");
    const std::string compile_threads =
        user_threads ? "" : std::to_string(validation_compile_threads(opts_.workers, opts_.processes_on_host));
    for (int i = 0; i < opts_.workers; ++i) {
        WorkerConfig c;
        c.command = default_worker_command();
        c.role = "reference";
        c.device = worker_device();
        if (opts_.device.rfind("cuda:", 0) == 0) c.env["CUDA_VISIBLE_DEVICES"] = opts_.device.substr(5);
        c.env["PYTHONPATH"] = default_python_dir();
        c.env["PYTHONUNBUFFERED"] = "1";
        if (!user_threads) c.env["TORCHINDUCTOR_COMPILE_THREADS"] = compile_threads;
        // The first worker keeps the single-worker layout (reference/, reference.log).
        const std::string suffix = i == 0 ? "" : "-" + std::to_string(i);
        c.work_root = work_dir_ + "/reference" + suffix;
        c.log_path = work_dir_ + "/reference" + suffix + ".log";
        auto slot = std::make_unique<Slot>();
        slot->worker = std::make_unique<Worker>(c);
        slot->work_dir = i == 0 ? work_dir_ : work_dir_ + "/scratch" + suffix;
        std::filesystem::create_directories(slot->work_dir);
        slots_.push_back(std::move(slot));
    }
    for (auto& s : slots_) {
        if (opts_.warm_up)
            warming_.emplace_back(&TaskValidator::warm, this, s.get());
        else
            free_.push_back(s.get());
    }
}

TaskValidator::~TaskValidator() {
    for (auto& t : warming_) t.join();
    slots_.clear();
    if (owns_work_dir_) {
        std::error_code ec;
        std::filesystem::remove_all(work_dir_, ec);
    }
}

const char* TaskValidator::worker_device() const { return opts_.device.rfind("cuda", 0) == 0 ? "cuda" : "cpu"; }

void TaskValidator::warm(Slot* slot) {
    // The device and compile switch of a validation, so that what is warmed is what validation uses. A
    // failure is not reported here: the worker is replaced, and the first validation starts it again.
    json req = {{"op", "warm_up"},
                {"device", worker_device()},
                {"compile", opts_.compile},
                {"memory_cap_bytes", validation_memory_cap(opts_)}};
    try {
        slot->worker->request(req, std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::min<std::chrono::seconds>(opts_.timeout, std::chrono::seconds(120))));
    } catch (...) {}
    release(slot);
}

void TaskValidator::release(Slot* slot, bool alone) {
    {
        std::lock_guard lock(mu_);
        free_.push_back(slot);
        if (alone) alone_running_ = false;
    }
    cv_.notify_all();  // waiters differ in what they wait for (a free worker, or every worker free)
}

TaskValidation TaskValidator::validate(const std::string& source, const std::vector<std::string>& apis) {
    json specs = json::array();
    for (const auto& name : apis) {
        // Only the torch API matters here (is it used?): a torch name several entries share will do.
        specs.push_back({{"name", name}, {"torch", catalog_.torch_api_of(name)}});
    }
    json req = {{"op", "validate"},
                {"source", source},
                {"apis", specs},
                {"device", worker_device()},
                {"min_runtime_ms", opts_.min_runtime_ms},
                {"max_runtime_ms", opts_.max_runtime_ms},
                {"max_memory_mb", opts_.max_memory_mb},
                {"compile", opts_.compile},
                {"memory_cap_bytes", validation_memory_cap(opts_)}};
    // What the validation held goes back to the budget only once the worker has freed it.
    if (opts_.device_budget) req["return_memory"] = true;
    bool memory_failure = false;
    TaskValidation v = run(req, false, memory_failure);
    if (memory_failure && slots_.size() > 1) {
        v = run(req, true, memory_failure);
        v.info["alone"] = true;
    }
    return v;
}

TaskValidation TaskValidator::run(const json& request, bool alone, bool& memory_failure) {
    Slot* slot;
    {
        std::unique_lock lock(mu_);
        if (alone) {
            ++alone_waiting_;
            cv_.wait(lock, [&] { return free_.size() == slots_.size() && !alone_running_; });
            --alone_waiting_;
            alone_running_ = true;
        } else {
            cv_.wait(lock, [&] { return !free_.empty() && alone_waiting_ == 0 && !alone_running_; });
        }
        slot = free_.back();
        free_.pop_back();
    }
    struct Return {  // the slot goes back whatever happens
        TaskValidator* v;
        Slot* s;
        bool alone;
        ~Return() { v->release(s, alone); }
    } give_back{this, slot, alone};
    json req = request;
    req["work_dir"] = slot->work_dir;
    TaskValidation v;
    DeviceMemoryBudget::Reservation held;
    if (opts_.device_budget) {
        // No stop: the jobs ahead of it end (a verifier that shuts down ends its jobs soon).
        static const std::atomic<bool> never{false};
        held = opts_.device_budget->acquire(validation_memory_hold(opts_), never);
    }
    Reply r = slot->worker->request(req, std::chrono::duration_cast<std::chrono::milliseconds>(opts_.timeout));
    held.release();
    memory_failure = r.body.value("memory_failure", false);
    if (r.status == ReplyStatus::ok) {
        for (auto it = r.body["checks"].begin(); it != r.body["checks"].end(); ++it)
            v.checks[it.key()] = it->get<std::string>();
        for (auto it = r.body["reasons"].begin(); it != r.body["reasons"].end(); ++it)
            v.reasons[it.key()] = it->get<std::string>();
        v.info = r.body.value("info", json::object());
    } else {
        // The module took the worker down (exit call, crash, hang) or raised where no check expected it.
        std::string why = r.status == ReplyStatus::failed ? r.body.value("error", std::string("failed"))
                                                          : std::string(to_string(r.status)) + ": " + r.detail;
        v.checks["runs"] = "fail";
        v.reasons["runs"] = "validation did not complete: " + why.substr(0, 2000);
    }
    v.settle();
    return v;
}

void TaskValidation::settle() {
    for (const auto& name : validation_checks()) checks.emplace(name, "skip");
    valid = true;
    reason.clear();
    for (const auto& name : validation_checks()) {
        if (checks[name] != "fail") continue;
        valid = false;
        if (reason.empty()) reason = name + ": " + reasons[name];
    }
}

}  // namespace kz
