// The verification farm (design section 9): verifier daemons on any number of hosts consume jobs from
// one Redis stream through a consumer group; the controller's FarmClient is a VerifyService that
// queues jobs there and waits for their verdicts. Protocol (keys under `prefix`, default "kz:farm"):
//   <prefix>:jobs                stream; each entry has one field "job": {"farm_id", "id", "task",
//                                "candidate", "backend", "timeout_s", "settings"} (sources inline)
//   group "verifiers"            one consumer per daemon; an entry stays pending until its verdict
//                                is stored, then it is acknowledged and deleted
//   <prefix>:verdict:<farm_id>   the verdict JSON (design section 3, unchanged), SET NX with a TTL:
//                                the first verdict of a job is its only one, so a job run twice (its
//                                daemon died after verifying) never yields a second reward
//   <prefix>:daemon:<name>       a daemon's heartbeat and statistics (hash, expires when it stops)
//   <prefix>:daemons             the names of daemons seen (set)
// A daemon that dies leaves its entries pending; after `claim_idle` without a heartbeat on them,
// another daemon takes them over (XAUTOCLAIM) and runs them again. A live daemon renews its
// in-flight entries (XCLAIM to itself) so that a long verification is not taken from it.
// Back-pressure: a client waits while the stream holds `max_queued` entries; a daemon holds at most
// its workers' worth of jobs. Every verdict-relevant setting travels with the job; a daemon
// configured otherwise answers infra_error naming the difference (never a silent other standard).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "verify/redis.h"
#include "verify/service.h"

namespace kz {

struct FarmOptions {
    std::string url;  // redis://host:port[/db]
    std::string prefix = "kz:farm";
    int max_queued = 1024;  // client: stream entries before submit waits
    std::chrono::seconds verdict_ttl{24 * 3600};
    std::chrono::seconds claim_idle{60};      // daemon: take over entries idle this long
    std::chrono::seconds heartbeat{5};        // daemon: statistics and in-flight renewal
    std::chrono::seconds wait_for{4 * 3600};  // client: longest wait for one verdict
    std::chrono::seconds broker_retry{300};   // both: how long a lost broker is waited for
};

// The settings a verdict depends on, as they travel in a job and in a daemon's heartbeat.
nlohmann::json verdict_settings(const VerifyOptions& o);
// "" when `daemon` verifies jobs asking for `job` the same way; else what differs.
std::string settings_difference(const nlohmann::json& job, const nlohmann::json& daemon);

class FarmClient : public VerifyService {
public:
    FarmClient(FarmOptions farm, VerifyOptions requested);
    ~FarmClient() override;
    // Connects (creates the stream and the group when missing) and checks the live daemons' settings:
    // throws std::runtime_error naming a daemon that would verify otherwise.
    void start() override;
    Verdict verify(const Job& job) override;
    void shutdown() override;
    const VerifyOptions& options() const override { return requested_; }

    // verify() in two halves: queue a job (returns its farm id), then wait for its verdict.
    std::string submit(const Job& job);
    Verdict wait(const std::string& farm_id);

private:
    void poll_loop();
    FarmOptions farm_;
    VerifyOptions requested_;
    nlohmann::json settings_;
    std::string client_id_;
    std::atomic<long long> counter_{0};
    std::mutex conn_mu_;
    std::unique_ptr<RedisConn> conn_;  // submit's (guarded by conn_mu_)
    std::mutex mu_;
    std::condition_variable cv_;
    std::map<std::string, std::unique_ptr<Verdict>> pending_;  // farm id -> verdict once arrived
    std::atomic<bool> stop_{false};
    std::thread poller_;
};

struct DaemonOptions {
    FarmOptions farm;
    VerifyOptions verify;  // device is replaced by each of `devices`
    std::vector<std::string> devices = {"cpu"};
    int workers = 1;   // jobs in flight per device
    std::string name;  // consumer name; default host-pid
};

// Serves jobs until `stop`; returns 0, or throws std::runtime_error when the broker or the local
// verifier cannot be used at all.
int run_verifier_daemon(const DaemonOptions& opts, const std::atomic<bool>& stop);

// The farm's state: queue length, pending entries per consumer, each daemon's heartbeat and
// statistics (alive or expired).
nlohmann::json farm_status(const FarmOptions& farm);

}  // namespace kz
