// One supervised Python worker process (python -m kernelzero.worker --role ROLE).
//
// A Worker is started lazily, answers one request at a time, and is replaced after any failure of
// the process itself: a request that times out, a crash, or a malformed frame kills the process
// (its whole process group) and reports the failure; the next request starts a fresh process.
// Thread safety: none; the owner (a pool lane) serialises requests.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/subprocess.h"

namespace kz {

struct WorkerConfig {
    std::vector<std::string> command;  // e.g. {python, "-m", "kernelzero.worker"}; tests use fakes
    std::string role;                  // compile | reference | candidate
    std::string device = "cpu";
    std::string work_root;                   // scratch space for the worker
    std::string log_path;                    // the worker's stderr is appended here
    std::map<std::string, std::string> env;  // extra environment
    std::chrono::seconds start_timeout{120};
};

enum class ReplyStatus {
    ok,              // the worker answered {"ok": true, ...}
    failed,          // the worker answered {"ok": false, "error": ...}: the request failed, the worker is fine
    timeout,         // no answer in time: the worker was killed
    crashed,         // the worker died or closed its pipe
    protocol_error,  // the worker sent something that is not a frame of ours
};

const char* to_string(ReplyStatus s);

struct Reply {
    ReplyStatus status = ReplyStatus::ok;
    nlohmann::json body = nlohmann::json::object();  // the reply object; empty when the worker itself failed
    std::string detail;                              // what went wrong, with the tail of the worker's log when it died
    bool worker_failure() const {
        return status == ReplyStatus::timeout || status == ReplyStatus::crashed ||
               status == ReplyStatus::protocol_error;
    }
};

class Worker {
public:
    explicit Worker(WorkerConfig cfg);
    ~Worker();

    // Starts the process if it is not running and waits for its ready event. Returns false with
    // `detail` on failure (the process is then killed).
    bool ensure_started(std::string& detail);
    Reply request(nlohmann::json req, std::chrono::milliseconds timeout);
    void stop();

    const nlohmann::json& hello() const { return hello_; }
    int starts() const { return starts_; }
    const WorkerConfig& config() const { return cfg_; }

private:
    WorkerConfig cfg_;
    std::unique_ptr<Process> proc_;
    nlohmann::json hello_;
    int starts_ = 0;
    long long next_id_ = 1;
    Reply fail(ReplyStatus s, const std::string& what);
    std::string log_tail() const;
};

}  // namespace kz
