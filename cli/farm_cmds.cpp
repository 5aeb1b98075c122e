// The verification farm's commands: `verifier-daemon` (serve jobs from a Redis stream on this host's
// devices) and `farm status` (queue, pending jobs, daemons). Protocol: verify/farm.h; operations:
// docs/VERIFIER.md "A farm of verifier daemons".
#include <cstdio>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "verify/farm.h"

using nlohmann::json;

namespace kz::cli {

namespace {

std::vector<std::string> split_devices(const std::string& s) {
    std::vector<std::string> out;
    std::stringstream ss(s);
    for (std::string d; std::getline(ss, d, ',');)
        if (!d.empty()) out.push_back(d);
    return out;
}

}  // namespace

Runner add_verifier_daemon(CLI::App& app) {
    struct Args {
        std::string redis, devices = "cpu", name, policy = "strict", cache_dir;
        int workers = 1, trials = kVerifyDefaults.trials, timing_iters = 0, claim_idle = 60, heartbeat = 5;
        double timeout = kVerifyDefaults.timeout_s;
    };
    auto a = std::make_shared<Args>();
    auto* cmd = app.add_subcommand("verifier-daemon", "Serve verification jobs from a Redis stream (a farm host)");
    cmd->add_option("--redis", a->redis, "The broker: redis://host:port/db")->required();
    cmd->add_option("--devices", a->devices, "cpu, or GPUs: cuda:0,cuda:1 (one verifier pool per device)");
    cmd->add_option("--workers", a->workers, "Jobs in flight per device")->check(CLI::Range(1, 64));
    cmd->add_option("--name", a->name, "Consumer name in the group (default host-pid)");
    cmd->add_option("--trials", a->trials, "Correctness trials (must match the clients')")->check(CLI::Range(1, 1000));
    cmd->add_option("--timing-iters", a->timing_iters, "Timed iterations (default 100 on CUDA, 10 on the CPU)")
        ->check(CLI::Range(0, 100000));
    cmd->add_option("--policy", a->policy, "strict or lenient (must match the clients')")
        ->check(CLI::IsMember({"strict", "lenient"}));
    cmd->add_option("--timeout", a->timeout, "Default seconds for one candidate run")->check(CLI::PositiveNumber);
    cmd->add_option("--claim-idle", a->claim_idle, "Seconds before a dead daemon's job is taken over")
        ->check(CLI::Range(2, 86400));
    cmd->add_option("--heartbeat", a->heartbeat, "Seconds between heartbeats (must be well below --claim-idle)")
        ->check(CLI::Range(1, 3600));
    cmd->add_option("--cache-dir", a->cache_dir, "Build cache and baselines (default ~/.cache/kernelzero)");
    return [a, cmd]() -> int {
        if (!cmd->parsed()) return -1;
        if (3 * a->heartbeat >= a->claim_idle) {
            std::fprintf(stderr,
                         "kernelzero verifier-daemon: --heartbeat %d is too long for --claim-idle %d "
                         "(a live daemon's jobs would be taken over)\n",
                         a->heartbeat, a->claim_idle);
            return 2;
        }
        DaemonOptions o;
        o.farm.url = a->redis;
        o.farm.claim_idle = std::chrono::seconds(a->claim_idle);
        o.farm.heartbeat = std::chrono::seconds(a->heartbeat);
        o.devices = split_devices(a->devices);
        o.workers = a->workers;
        o.name = a->name;
        o.verify.trials = a->trials;
        o.verify.timing_iters = a->timing_iters;
        o.verify.strict = a->policy == "strict";
        o.verify.timeout_s = a->timeout;
        o.verify.cache_dir = a->cache_dir;
        catch_stop_signals();
        try {
            RedisUrl::parse(a->redis);
            return run_verifier_daemon(o, g_stop);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "kernelzero verifier-daemon: %s\n", e.what());
            return 2;
        }
    };
}

Runner add_farm(CLI::App& app) {
    struct Args {
        std::string redis;
        bool json = false;
    };
    auto a = std::make_shared<Args>();
    auto* farm = app.add_subcommand("farm", "The verification farm on Redis");
    farm->require_subcommand(1);
    auto* status = farm->add_subcommand("status", "Queue length, pending jobs, daemons and their statistics");
    status->add_option("--redis", a->redis, "The broker: redis://host:port/db")->required();
    status->add_flag("--json", a->json, "Print JSON");
    return [a, status]() -> int {
        if (!status->parsed()) return -1;
        try {
            FarmOptions f;
            f.url = a->redis;
            auto s = farm_status(f);
            if (a->json) {
                std::cout << s.dump(2) << std::endl;
                return 0;
            }
            std::printf("%s  stream %s: %lld queued or in flight, %lld pending\n",
                        s["broker"].get<std::string>().c_str(), s["stream"].get<std::string>().c_str(),
                        s["queued"].get<long long>(), s["pending"]["total"].get<long long>());
            for (const auto& d : s["daemons"]) {
                if (!d["alive"].get<bool>()) {
                    std::printf("  %-28s gone (no heartbeat)\n", d["name"].get<std::string>().c_str());
                    continue;
                }
                std::printf("  %-28s %s on %s, %s worker(s): %s done, %s in flight, %s reclaimed, %s malformed\n",
                            d["name"].get<std::string>().c_str(), d.value("devices", "?").c_str(),
                            d.value("host", "?").c_str(), d.value("workers", json(0)).dump().c_str(),
                            d.value("jobs_done", json(0)).dump().c_str(), d.value("in_flight", json(0)).dump().c_str(),
                            d.value("reclaimed", json(0)).dump().c_str(), d.value("malformed", json(0)).dump().c_str());
            }
            return 0;
        } catch (const std::exception& e) {
            std::fprintf(stderr, "kernelzero farm status: %s\n", e.what());
            return 2;
        }
    };
}

}  // namespace kz::cli
