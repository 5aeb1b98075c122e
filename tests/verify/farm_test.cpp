// The verification farm against a real redis-server on loopback (Debian's package): two daemons
// serve one batch; a daemon killed with SIGKILL mid-job loses nothing and duplicates nothing; a broker
// restart with AOF keeps queued and finished jobs; malformed jobs get error verdicts and the daemon
// goes on; a daemon configured otherwise is refused. Daemons are the real `kernelzero
// verifier-daemon`, verifying Triton candidates on the CPU interpreter.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "common/files.h"
#include "common/subprocess.h"
#include "verify/farm.h"

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

const std::string kBin = KZ_BINARY;
const std::string kSrc = KZ_SOURCE_DIR;

int free_port() {
    // A port per test from a range chosen by this process's id (redis-server must be told one; a clash
    // would show in its log and fail the PING below), below Linux's ephemeral range (32768-60999 by
    // default): a port in that range may already be held as the local end of a client connection.
    static int next = 20000 + static_cast<int>(::getpid() % 10000);
    return next++;
}

struct FarmTest : ::testing::Test {
    std::string dir;
    int port = free_port();
    std::unique_ptr<kz::Process> redis;
    std::map<std::string, std::unique_ptr<kz::Process>> daemons;

    FarmTest() {
        dir = kz::make_temp_dir(fs::temp_directory_path().string(), "kz-farm-test-");
        setenv("KZ_CACHE_DIR", (dir + "/cache").c_str(), 1);
    }
    ~FarmTest() override {
        daemons.clear();
        redis.reset();
        std::error_code ec;
        fs::remove_all(dir, ec);
    }
    std::string url() const { return "redis://127.0.0.1:" + std::to_string(port) + "/0"; }

    // redis-server with AOF (fsync every write) in `dir`: what a farm's broker should run with.
    void start_redis() {
        kz::SpawnOptions o;
        o.argv = {"redis-server",    "--port", std::to_string(port), "--bind", "127.0.0.1", "--dir", dir,
                  "--appendonly",    "yes",    "--appendfsync",      "always", "--save",    "",      "--logfile",
                  dir + "/redis.log"};
        redis = std::make_unique<kz::Process>(o);
        try {
            kz::RedisConn c(kz::RedisUrl::parse(url()), std::chrono::seconds(20));
            ASSERT_EQ(c.command({"PING"}).str, "PONG");
        } catch (const std::exception& e) {
            std::error_code
                ec;  // the test ends here, and its directory goes with it: the broker's log goes with the error
            throw std::runtime_error(
                std::string(e.what()) + "\nredis.log:\n" +
                (fs::exists(dir + "/redis.log", ec) ? kz::read_file(dir + "/redis.log") : "(none)"));
        }
    }
    void start_daemon(const std::string& name, const std::vector<std::string>& extra = {}) {
        kz::SpawnOptions o;
        o.argv = {kBin,
                  "verifier-daemon",
                  "--redis",
                  url(),
                  "--devices",
                  "cpu",
                  "--workers",
                  "1",
                  "--name",
                  name,
                  "--claim-idle",
                  "4",
                  "--heartbeat",
                  "1",
                  "--timing-iters",
                  "3"};
        o.argv.insert(o.argv.end(), extra.begin(), extra.end());
        o.stderr_path = dir + "/" + name + ".log";
        daemons[name] = std::make_unique<kz::Process>(o);
    }
    // Waits until `name`'s heartbeat is in the farm's status.
    void wait_alive(const std::string& name) {
        kz::FarmOptions f;
        f.url = url();
        for (int i = 0; i < 600; ++i) {
            const json status = kz::farm_status(f);  // held: a range-for over a temporary's member dangles
            for (const auto& d : status["daemons"])
                if (d["name"] == name && d["alive"].get<bool>()) return;
            ASSERT_FALSE(daemons[name]->exited()) << name << " died: " << kz::read_file(dir + "/" + name + ".log");
            std::this_thread::sleep_for(100ms);
        }
        FAIL() << name << " never sent a heartbeat: " << kz::read_file(dir + "/" + name + ".log");
    }
    kz::FarmOptions farm() const {
        kz::FarmOptions f;
        f.url = url();
        f.wait_for = std::chrono::seconds(300);
        return f;
    }
    kz::VerifyOptions requested() const {
        kz::VerifyOptions o;
        o.device = "cpu";
        o.timing_iters = 3;
        return o;
    }
    kz::Job job(const std::string& name) const {
        return {name, kz::read_file(kSrc + "/examples/known_good/tasks/" + name + ".py"),
                kz::read_file(kSrc + "/examples/known_good/triton/" + name + ".py"), "triton", 0};
    }
    std::set<std::string> verdict_keys() {
        kz::RedisConn c(kz::RedisUrl::parse(url()), std::chrono::seconds(20));
        std::set<std::string> out;
        for (const auto& k : c.command({"KEYS", "kz:farm:verdict:*"}).elements) out.insert(k.str);
        return out;
    }
    long long pending_of(const std::string& consumer) {
        const json status = kz::farm_status(farm());
        const json& by = status["pending"]["by_daemon"];
        return by.contains(consumer) ? by[consumer].get<long long>() : 0;
    }
};

const std::vector<std::string> kTasks = {"relu",     "gelu",        "softmax", "sum_dim",
                                         "mean_dim", "log_softmax", "rmsnorm", "cumsum"};

TEST_F(FarmTest, TwoDaemonsServeABatchAndOneKilledMidJobLosesNothing) {
    start_redis();
    start_daemon("a");
    start_daemon("b");
    wait_alive("a");
    wait_alive("b");
    kz::FarmClient client(farm(), requested());
    client.start();
    std::vector<std::string> ids;
    for (const auto& t : kTasks) ids.push_back(client.submit(job(t)));
    // SIGKILL daemon a while it holds a job (pending to it in the group).
    for (int i = 0; i < 1200 && pending_of("a") == 0; ++i) std::this_thread::sleep_for(10ms);
    daemons["a"]->kill();
    const long long orphaned = pending_of("a");
    std::vector<kz::Verdict> verdicts;
    for (const auto& id : ids) verdicts.push_back(client.wait(id));
    for (size_t i = 0; i < verdicts.size(); ++i)
        EXPECT_EQ(kz::to_string(verdicts[i].status), std::string("correct")) << kTasks[i] << ": " << verdicts[i].reason;
    // Every job verified exactly once: one verdict each, nothing left queued or pending.
    EXPECT_EQ(verdict_keys().size(), kTasks.size());
    // A daemon's statistics are as of its last heartbeat: wait for one sent after its last job.
    json s = kz::farm_status(farm());
    long long reclaimed = 0;
    for (int i = 0; i < 100; ++i, std::this_thread::sleep_for(100ms), s = kz::farm_status(farm())) {
        bool idle = false;
        for (const auto& d : s["daemons"])
            if (d["name"] == "b") {
                reclaimed = d.value("reclaimed", 0LL);
                idle = d.value("in_flight", 1LL) == 0;
            }
        if (idle && reclaimed >= orphaned) break;
    }
    EXPECT_EQ(s["queued"], 0) << s.dump();
    EXPECT_EQ(s["pending"]["total"], 0) << s.dump();
    EXPECT_GE(reclaimed, orphaned) << "daemon b must take over what a held: " << s.dump();
    EXPECT_GE(orphaned, 1) << "a was killed while idle: the test did not exercise a take-over";
    client.shutdown();
}

TEST_F(FarmTest, BrokerRestartWithAofKeepsQueuedAndFinishedJobs) {
    start_redis();
    kz::FarmClient client(farm(), requested());
    client.start();
    std::vector<std::string> ids;
    for (const auto& t : {"relu", "gelu", "sum_dim", "mean_dim"}) ids.push_back(client.submit(job(t)));
    start_daemon("c");
    auto keys = verdict_keys();
    for (int i = 0; i < 3000 && keys.size() < 2; ++i) std::this_thread::sleep_for(20ms), keys = verdict_keys();
    ASSERT_GE(keys.size(), 2u) << kz::read_file(dir + "/c.log");
    daemons["c"]->kill();
    std::map<std::string, std::string> finished;
    {
        kz::RedisConn c(kz::RedisUrl::parse(url()), std::chrono::seconds(20));
        for (const auto& k : verdict_keys()) finished[k] = c.command({"GET", k}).str;
    }
    redis->kill();  // SIGKILL: only what the append-only file holds survives
    start_redis();
    {
        kz::RedisConn c(kz::RedisUrl::parse(url()), std::chrono::seconds(20));
        for (const auto& [k, v] : finished) EXPECT_EQ(c.command({"GET", k}).str, v) << k << " lost in the restart";
        // Every job is finished or still queued.
        std::set<std::string> queued;
        for (const auto& e : c.command({"XRANGE", "kz:farm:jobs", "-", "+"}).elements)
            queued.insert(json::parse(e.elements[1].elements[1].str)["farm_id"].get<std::string>());
        for (const auto& id : ids)
            EXPECT_TRUE(finished.count("kz:farm:verdict:" + id) || queued.count(id)) << id << " lost in the restart";
    }
    start_daemon("d");
    for (const auto& id : ids) EXPECT_EQ(client.wait(id).status, kz::Status::correct) << id;
    kz::RedisConn c(kz::RedisUrl::parse(url()), std::chrono::seconds(20));
    for (const auto& [k, v] : finished) EXPECT_EQ(c.command({"GET", k}).str, v) << k << " verified twice";
    EXPECT_EQ(verdict_keys().size(), ids.size());
    client.shutdown();
}

TEST_F(FarmTest, MalformedJobsGetErrorVerdictsAndTheDaemonGoesOn) {
    start_redis();
    kz::RedisConn c(kz::RedisUrl::parse(url()), std::chrono::seconds(20));
    kz::FarmClient client(farm(), requested());
    client.start();  // creates the stream and the group
    c.command({"XADD", "kz:farm:jobs", "*", "job", "{not json"});
    c.command({"XADD", "kz:farm:jobs", "*", "other", "field"});
    json bad = {{"farm_id", "bad-backend"},
                {"task", "x"},
                {"candidate", "y"},
                {"backend", "fortran"},
                {"settings", kz::verdict_settings(requested())}};
    c.command({"XADD", "kz:farm:jobs", "*", "job", bad.dump()});
    kz::VerifyOptions other = requested();
    other.trials = 2;
    json mismatched = {{"farm_id", "other-settings"},
                       {"task", job("relu").task_source},
                       {"candidate", job("relu").candidate_source},
                       {"backend", "triton"},
                       {"settings", kz::verdict_settings(other)}};
    c.command({"XADD", "kz:farm:jobs", "*", "job", mismatched.dump()});
    const std::string good = client.submit(job("relu"));
    start_daemon("e");
    EXPECT_EQ(client.wait(good).status, kz::Status::correct);
    EXPECT_FALSE(daemons["e"]->exited()) << kz::read_file(dir + "/e.log");
    auto verdict_of = [&](const std::string& key) { return json::parse(c.command({"GET", key}).str); };
    auto v = verdict_of("kz:farm:verdict:bad-backend");
    EXPECT_EQ(v["status"], "infra_error");
    EXPECT_NE(v["reason"].get<std::string>().find("fortran"), std::string::npos) << v.dump();
    v = verdict_of("kz:farm:verdict:other-settings");
    EXPECT_EQ(v["status"], "infra_error");
    EXPECT_NE(v["reason"].get<std::string>().find("trials"), std::string::npos) << v.dump();
    int entry_verdicts = 0;
    for (const auto& k : verdict_keys())
        if (k.find(":entry-") != std::string::npos) {
            ++entry_verdicts;
            EXPECT_NE(verdict_of(k)["reason"].get<std::string>().find("malformed job"), std::string::npos);
        }
    EXPECT_EQ(entry_verdicts, 2);
    EXPECT_EQ(kz::farm_status(farm())["queued"], 0);
    client.shutdown();
}

// `verify --jobs --verifier redis://...`: a batch through the farm, results in the usual file.
TEST_F(FarmTest, VerifyJobsThroughTheFarm) {
    start_redis();
    start_daemon("g");
    const std::string jobs = dir + "/jobs.jsonl", out = dir + "/results.jsonl";
    {
        std::string lines;
        for (const char* t : {"relu", "softmax"})
            lines += json({{"id", t},
                           {"task", kSrc + "/examples/known_good/tasks/" + t + ".py"},
                           {"candidate", kSrc + "/examples/known_good/triton/" + t + ".py"},
                           {"backend", "triton"}})
                         .dump() +
                     "\n";
        kz::write_file_atomic(jobs, lines);
    }
    kz::SpawnOptions o;
    o.argv = {kBin, "verify",     "--jobs", jobs,           "--out", out, "--device", "cpu", "--timing-iters",
              "3",  "--verifier", url(),    "--no-progress"};
    o.stderr_path = dir + "/verify.log";
    kz::Process p(o);
    for (int i = 0; i < 3000 && !p.exited(); ++i) std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(p.exited());
    EXPECT_EQ(p.exit_code(), 0) << kz::read_file(dir + "/verify.log");
    std::istringstream lines(kz::read_file(out));
    std::set<std::string> ids;
    for (std::string line; std::getline(lines, line);) {
        auto r = json::parse(line);
        EXPECT_EQ(r["status"], "correct") << line;
        ids.insert(r["id"].get<std::string>());
    }
    EXPECT_EQ(ids, (std::set<std::string>{"relu", "softmax"}));
}

TEST_F(FarmTest, ADaemonWithOtherSettingsIsRefusedAtStart) {
    start_redis();
    start_daemon("f", {"--trials", "2"});
    wait_alive("f");
    kz::FarmClient client(farm(), requested());
    try {
        client.start();
        FAIL() << "a daemon verifying with 2 trials must be refused by a client asking for 5";
    } catch (const std::runtime_error& e) {
        EXPECT_NE(std::string(e.what()).find("trials"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("f"), std::string::npos) << e.what();
    }
    EXPECT_THROW(kz::make_verify_service("http://example", requested()), std::invalid_argument);
    EXPECT_THROW(kz::RedisUrl::parse("redis://host:99999"), std::invalid_argument);
    auto u = kz::RedisUrl::parse("redis://:secret@10.0.0.5:6380/3");
    EXPECT_EQ(u.host, "10.0.0.5");
    EXPECT_EQ(u.port, 6380);
    EXPECT_EQ(u.db, 3);
    EXPECT_EQ(u.password, "secret");
}

}  // namespace
