#include "verify/farm.h"

#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <random>
#include <set>

#include "verify/verifier.h"

namespace kz {

using json = nlohmann::json;

namespace {

const char* kGroup = "verifiers";

std::string jobs_key(const FarmOptions& f) { return f.prefix + ":jobs"; }
std::string verdict_key(const FarmOptions& f, const std::string& id) { return f.prefix + ":verdict:" + id; }
std::string daemon_key(const FarmOptions& f, const std::string& name) { return f.prefix + ":daemon:" + name; }
std::string daemons_key(const FarmOptions& f) { return f.prefix + ":daemons"; }

std::string host_name() {
    char buf[256] = {0};
    if (gethostname(buf, sizeof buf - 1) != 0) return "host";
    return buf;
}

std::string random_hex(int n) {
    std::random_device rd;
    std::string s;
    for (int i = 0; i < n; ++i) s += "0123456789abcdef"[rd() % 16];
    return s;
}

bool is_cpu_device(const std::string& d) { return d.rfind("cuda", 0) != 0; }

// The stream and its consumer group, created when missing (the group reads from the start, so jobs
// queued before any daemon ran are served).
void ensure_group(RedisConn& c, const FarmOptions& f) {
    try {
        c.command({"XGROUP", "CREATE", jobs_key(f), kGroup, "0", "MKSTREAM"});
    } catch (const RedisError& e) {
        if (std::string(e.what()).find("BUSYGROUP") == std::string::npos) throw;
    }
}

struct Entry {
    std::string id;
    std::map<std::string, std::string> fields;
};

Entry entry_of(const RedisReply& e) {
    Entry out;
    if (e.type != RedisReply::array || e.elements.empty()) return out;
    out.id = e.elements[0].str;
    if (e.elements.size() > 1 && e.elements[1].type == RedisReply::array) {
        const auto& kv = e.elements[1].elements;
        for (size_t i = 0; i + 1 < kv.size(); i += 2) out.fields[kv[i].str] = kv[i + 1].str;
    }
    return out;
}

long long now_unix() { return static_cast<long long>(std::time(nullptr)); }

}  // namespace

json verdict_settings(const VerifyOptions& options) {
    const VerifyOptions o = with_device_defaults(options);
    return {{"device_kind", is_cpu_device(o.device) ? "cpu" : "cuda"},
            {"trials", o.trials},
            {"timing_iters", o.timing_iters},
            {"min_timing_iters", o.min_timing_iters},
            {"timing_precision", o.timing_precision},
            {"timing_budget_ms", o.timing_budget_ms},
            {"warmup", o.warmup},
            {"strict", o.strict},
            {"atol", o.atol},
            {"rtol", o.rtol},
            {"min_kernel_share", o.min_kernel_share},
            {"speedup_review_bound", o.speedup_review_bound},
            {"require_custom_kernel", o.require_custom_kernel},
            {"compile_baseline", o.compile_baseline}};
}

std::string settings_difference(const json& job, const json& daemon) {
    std::string diff;
    if (!job.is_object()) return "the job carries no settings";
    for (auto& [k, v] : job.items()) {
        json d = daemon.is_object() && daemon.contains(k) ? daemon[k] : json(nullptr);
        if (d != v)
            diff += (diff.empty() ? "" : ", ") + k + ": the job asks " + v.dump() + ", the daemon has " + d.dump();
    }
    return diff;
}

// ---- the client

FarmClient::FarmClient(FarmOptions farm, VerifyOptions requested)
    : farm_(std::move(farm)),
      requested_(std::move(requested)),
      settings_(verdict_settings(requested_)),
      client_id_(host_name() + "-" + std::to_string(::getpid()) + "-" + random_hex(6)) {}

FarmClient::~FarmClient() { shutdown(); }

void FarmClient::start() {
    conn_ = std::make_unique<RedisConn>(RedisUrl::parse(farm_.url), farm_.broker_retry);
    ensure_group(*conn_, farm_);
    for (const auto& name : conn_->command({"SMEMBERS", daemons_key(farm_)}).elements) {
        auto s = conn_->command({"HGET", daemon_key(farm_, name.str), "settings"});
        if (s.type != RedisReply::string) continue;  // not alive
        json daemon = json::parse(s.str, nullptr, false);
        if (std::string diff = settings_difference(settings_, daemon); !diff.empty())
            throw std::runtime_error("verifier daemon " + name.str + " at " + conn_->url().to_string() +
                                     " verifies otherwise (" + diff + "): start it with the same settings");
    }
    stop_ = false;
    poller_ = std::thread([this] { poll_loop(); });
}

void FarmClient::shutdown() {
    stop_ = true;
    cv_.notify_all();
    if (poller_.joinable()) poller_.join();
}

std::string FarmClient::submit(const Job& job) {
    const std::string farm_id = client_id_ + "-" + std::to_string(counter_++);
    json j = {{"farm_id", farm_id},      {"id", job.id},
              {"task", job.task_source}, {"candidate", job.candidate_source},
              {"backend", job.backend},  {"timeout_s", job.timeout_s > 0 ? job.timeout_s : requested_.timeout_s},
              {"settings", settings_}};
    {
        std::lock_guard lock(mu_);
        pending_[farm_id] = nullptr;
    }
    std::unique_lock lock(conn_mu_);
    // Back-pressure: the stream holds queued and in-flight jobs (entries are deleted once verified).
    while (!stop_ && conn_->command({"XLEN", jobs_key(farm_)}).number >= farm_.max_queued) {
        lock.unlock();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        lock.lock();
    }
    conn_->command({"XADD", jobs_key(farm_), "*", "job", j.dump(-1, ' ', false, json::error_handler_t::replace)});
    return farm_id;
}

Verdict FarmClient::wait(const std::string& farm_id) {
    std::unique_lock lock(mu_);
    const bool arrived = cv_.wait_for(lock, farm_.wait_for, [&] {
        auto it = pending_.find(farm_id);
        return stop_ || (it != pending_.end() && it->second);
    });
    auto it = pending_.find(farm_id);
    std::unique_ptr<Verdict> v = it != pending_.end() ? std::move(it->second) : nullptr;
    if (it != pending_.end()) pending_.erase(it);
    if (v) return *v;
    const std::string why = arrived
                                ? "the farm client was shut down"
                                : "no verdict from the farm within " + std::to_string(farm_.wait_for.count()) + " s";
    return early_verdict(Status::infra_error, why, requested_.device, "");
}

Verdict FarmClient::verify(const Job& job) {
    try {
        return wait(submit(job));
    } catch (const std::exception& e) {
        return early_verdict(Status::infra_error, std::string("verification farm: ") + e.what(), requested_.device,
                             job.backend);
    }
}

void FarmClient::poll_loop() {
    RedisConn c(RedisUrl::parse(farm_.url), farm_.broker_retry);
    c.set_cancel(&stop_);
    while (!stop_) {
        std::vector<std::string> ids;
        {
            std::lock_guard lock(mu_);
            for (const auto& [id, v] : pending_)
                if (!v) ids.push_back(id);
        }
        try {
            for (size_t i = 0; i < ids.size(); i += 256) {
                std::vector<std::string> args = {"MGET"};
                for (size_t k = i; k < std::min(ids.size(), i + 256); ++k) args.push_back(verdict_key(farm_, ids[k]));
                auto r = c.command(args);
                std::lock_guard lock(mu_);
                for (size_t k = 0; k < r.elements.size(); ++k) {
                    if (r.elements[k].type != RedisReply::string) continue;
                    auto it = pending_.find(ids[i + k]);
                    if (it == pending_.end()) continue;
                    try {
                        it->second = std::make_unique<Verdict>(Verdict::from_json(json::parse(r.elements[k].str)));
                    } catch (const std::exception& e) {
                        it->second = std::make_unique<Verdict>(early_verdict(
                            Status::infra_error, std::string("unreadable verdict from the farm: ") + e.what(),
                            requested_.device, ""));
                    }
                }
            }
            cv_.notify_all();
        } catch (const RedisError& e) {
            std::fprintf(stderr, "[farm] %s\n", e.what());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

// ---- the daemon

namespace {

struct DaemonState {
    std::mutex mu;
    std::set<std::string> in_flight;  // stream entry ids
    std::atomic<long long> done{0}, reclaimed{0}, duplicates{0}, malformed{0};
    double busy_s = 0;  // guarded by mu
};

class Daemon {
public:
    Daemon(const DaemonOptions& o, const std::atomic<bool>& stop) : o_(o), stop_(stop) {
        name_ = o.name.empty() ? host_name() + "-" + std::to_string(::getpid()) : o.name;
        if (o.devices.empty()) throw std::invalid_argument("verifier-daemon: no device given");
        for (const auto& d : o.devices)
            if (is_cpu_device(d) != is_cpu_device(o.devices[0]))
                throw std::invalid_argument("verifier-daemon: mix of CPU and GPU devices (run one daemon per kind)");
        for (const auto& d : o.devices) {
            VerifyOptions v = o.verify;
            v.device = d;
            v.lanes = o.workers;
            v.compile_workers = o.workers;
            verifiers_.push_back(std::make_unique<Verifier>(v));
        }
        settings_ = verdict_settings(verifiers_[0]->options());
    }

    int run() {
        for (auto& v : verifiers_) v->start();
        RedisConn c(RedisUrl::parse(o_.farm.url), o_.farm.broker_retry);
        c.set_cancel(&stop_);
        ensure_group(c, o_.farm);
        heartbeat(c);
        std::fprintf(stderr, "[daemon %s] serving %s on %s with %d worker(s) per device\n", name_.c_str(),
                     jobs_key(o_.farm).c_str(), c.url().to_string().c_str(), o_.workers);
        std::vector<std::thread> threads;
        for (auto& v : verifiers_)
            for (int w = 0; w < o_.workers; ++w) threads.emplace_back([this, vp = v.get()] { serve(*vp); });
        while (!stop_) {
            for (int i = 0; i < 10 * static_cast<int>(o_.farm.heartbeat.count()) && !stop_; ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            try {
                heartbeat(c);
            } catch (const RedisError& e) {
                std::fprintf(stderr, "[daemon %s] heartbeat: %s\n", name_.c_str(), e.what());
            }
        }
        for (auto& t : threads) t.join();
        try {
            c.command({"DEL", daemon_key(o_.farm, name_)});
        } catch (const RedisError&) {}
        return 0;
    }

private:
    // Statistics for `farm status`, and the in-flight entries renewed so that no one takes them.
    void heartbeat(RedisConn& c) {
        std::vector<std::string> ids;
        double busy_s;
        {
            std::lock_guard lock(st_.mu);
            ids.assign(st_.in_flight.begin(), st_.in_flight.end());
            busy_s = st_.busy_s;
        }
        std::string devices;
        for (const auto& d : o_.devices) devices += (devices.empty() ? "" : ",") + d;
        const std::string key = daemon_key(o_.farm, name_);
        c.command({"HSET",       key,
                   "name",       name_,
                   "host",       host_name(),
                   "pid",        std::to_string(::getpid()),
                   "devices",    devices,
                   "workers",    std::to_string(o_.workers),
                   "started",    std::to_string(started_),
                   "last_seen",  std::to_string(now_unix()),
                   "jobs_done",  std::to_string(st_.done.load()),
                   "reclaimed",  std::to_string(st_.reclaimed.load()),
                   "duplicates", std::to_string(st_.duplicates.load()),
                   "malformed",  std::to_string(st_.malformed.load()),
                   "in_flight",  std::to_string(ids.size()),
                   "busy_s",     std::to_string(busy_s),
                   "settings",   settings_.dump()});
        c.command({"EXPIRE", key, std::to_string(3 * o_.farm.heartbeat.count() + 1)});
        c.command({"SADD", daemons_key(o_.farm), name_});
        if (!ids.empty()) {
            std::vector<std::string> args = {"XCLAIM", jobs_key(o_.farm), kGroup, name_, "0"};
            args.insert(args.end(), ids.begin(), ids.end());
            args.push_back("JUSTID");
            c.command(args);
        }
    }

    // One worker: a dead daemon's entry first (idle past claim_idle), else a new one.
    void serve(Verifier& verifier) {
        RedisConn c(RedisUrl::parse(o_.farm.url), o_.farm.broker_retry);
        c.set_cancel(&stop_);
        const std::string idle_ms = std::to_string(o_.farm.claim_idle.count() * 1000);
        while (!stop_) {
            try {
                Entry e;
                auto claimed =
                    c.command({"XAUTOCLAIM", jobs_key(o_.farm), kGroup, name_, idle_ms, "0-0", "COUNT", "1"});
                if (claimed.elements.size() > 1 && !claimed.elements[1].elements.empty()) {
                    e = entry_of(claimed.elements[1].elements[0]);
                    if (!e.id.empty()) ++st_.reclaimed;
                }
                if (e.id.empty()) {
                    auto r = c.command({"XREADGROUP", "GROUP", kGroup, name_, "COUNT", "1", "BLOCK", "1000", "STREAMS",
                                        jobs_key(o_.farm), ">"},
                                       std::chrono::milliseconds(1000));
                    if (r.type == RedisReply::array && !r.elements.empty() && r.elements[0].elements.size() > 1 &&
                        !r.elements[0].elements[1].elements.empty())
                        e = entry_of(r.elements[0].elements[1].elements[0]);
                }
                if (!e.id.empty()) handle(c, verifier, e);
            } catch (const RedisError& err) {
                // The group is gone (a broker restarted without its data): recreate it.
                if (std::string(err.what()).find("NOGROUP") != std::string::npos) {
                    try {
                        ensure_group(c, o_.farm);
                    } catch (const RedisError&) {}
                    continue;
                }
                std::fprintf(stderr, "[daemon %s] %s\n", name_.c_str(), err.what());
                std::this_thread::sleep_for(std::chrono::seconds(1));
            }
        }
    }

    void handle(RedisConn& c, Verifier& verifier, const Entry& e) {
        {
            std::lock_guard lock(st_.mu);
            st_.in_flight.insert(e.id);
        }
        const auto t0 = std::chrono::steady_clock::now();
        const std::string device = verifier.options().device;
        json job, verdict;
        std::string key;
        try {
            auto f = e.fields.find("job");
            if (f == e.fields.end()) throw std::invalid_argument("the entry has no 'job' field");
            job = json::parse(f->second);
            key = verdict_key(o_.farm, job.at("farm_id").get<std::string>());
        } catch (const std::exception& ex) {
            key = verdict_key(o_.farm, "entry-" + e.id);
            verdict = early_verdict(Status::infra_error,
                                    std::string("malformed job (stream entry ") + e.id + "): " + ex.what(), device, "")
                          .to_json();
            ++st_.malformed;
        }
        if (verdict.is_null() && c.command({"EXISTS", key}).number > 0) {
            ++st_.duplicates;  // verified before its daemon could acknowledge it
        } else {
            if (verdict.is_null()) {
                try {
                    Job j;
                    j.id = job.value("id", "");
                    j.task_source = job.at("task").get<std::string>();
                    j.candidate_source = job.at("candidate").get<std::string>();
                    j.backend = job.at("backend").get<std::string>();
                    j.timeout_s = job.value("timeout_s", 0.0);
                    if (j.backend != "triton" && j.backend != "cuda")
                        throw std::invalid_argument("backend '" + j.backend + "' (triton or cuda)");
                    if (std::string diff = settings_difference(job.at("settings"), settings_); !diff.empty())
                        verdict = early_verdict(Status::infra_error, "daemon " + name_ + " verifies otherwise: " + diff,
                                                device, j.backend)
                                      .to_json();
                    else
                        verdict = verifier.verify(j).to_json();
                } catch (const std::exception& ex) {
                    verdict = early_verdict(Status::infra_error, std::string("malformed job: ") + ex.what(), device, "")
                                  .to_json();
                    ++st_.malformed;
                }
            }
            c.command({"SET", key, verdict.dump(-1, ' ', false, json::error_handler_t::replace), "NX", "EX",
                       std::to_string(o_.farm.verdict_ttl.count())});
            ++st_.done;
        }
        c.command({"XACK", jobs_key(o_.farm), kGroup, e.id});
        c.command({"XDEL", jobs_key(o_.farm), e.id});
        std::lock_guard lock(st_.mu);
        st_.busy_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        st_.in_flight.erase(e.id);
    }

    const DaemonOptions& o_;
    const std::atomic<bool>& stop_;
    std::string name_;
    std::vector<std::unique_ptr<Verifier>> verifiers_;
    json settings_;
    DaemonState st_;
    long long started_ = now_unix();
};

}  // namespace

int run_verifier_daemon(const DaemonOptions& opts, const std::atomic<bool>& stop) {
    Daemon d(opts, stop);
    return d.run();
}

json farm_status(const FarmOptions& farm) {
    RedisConn c(RedisUrl::parse(farm.url), std::chrono::seconds(10));
    json out = {{"broker", c.url().to_string()}, {"stream", jobs_key(farm)}};
    out["queued"] = c.command({"XLEN", jobs_key(farm)}).number;
    json pending = {{"total", 0}, {"by_daemon", json::object()}};
    try {
        auto p = c.command({"XPENDING", jobs_key(farm), kGroup});
        if (p.elements.size() >= 4) {
            pending["total"] = p.elements[0].number;
            for (const auto& cons : p.elements[3].elements)
                if (cons.elements.size() == 2)
                    pending["by_daemon"][cons.elements[0].str] = std::stoll(cons.elements[1].str);
        }
    } catch (const RedisError&) {  // no group yet: nothing pending
    }
    out["pending"] = pending;
    json daemons = json::array();
    for (const auto& name : c.command({"SMEMBERS", daemons_key(farm)}).elements) {
        auto h = c.command({"HGETALL", daemon_key(farm, name.str)});
        json d = {{"name", name.str}, {"alive", !h.elements.empty()}};
        for (size_t i = 0; i + 1 < h.elements.size(); i += 2) {
            const std::string& k = h.elements[i].str;
            const std::string& v = h.elements[i + 1].str;
            if (k == "settings")
                d[k] = json::parse(v, nullptr, false);
            else if (k == "name" || k == "host" || k == "devices")
                d[k] = v;
            else
                d[k] = json::parse(v, nullptr, false).is_number() ? json::parse(v) : json(v);
        }
        daemons.push_back(d);
    }
    out["daemons"] = daemons;
    return out;
}

std::unique_ptr<VerifyService> make_verify_service(const std::string& url, const VerifyOptions& opts) {
    if (url.empty() || url == "local") return std::make_unique<Verifier>(opts);
    if (url.rfind("redis://", 0) == 0) {
        FarmOptions f;
        f.url = url;
        RedisUrl::parse(url);  // a malformed URL is an error now, not at start()
        return std::make_unique<FarmClient>(f, opts);
    }
    throw std::invalid_argument("verifier '" + url + "': give 'local' or redis://host:port[/db]");
}

}  // namespace kz
