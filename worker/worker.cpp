#include "worker/worker.h"

#include <filesystem>
#include <fstream>

#include "worker/framing.h"

namespace kz {

const char* to_string(ReplyStatus s) {
    switch (s) {
        case ReplyStatus::ok: return "ok";
        case ReplyStatus::failed: return "failed";
        case ReplyStatus::timeout: return "timeout";
        case ReplyStatus::crashed: return "crashed";
        case ReplyStatus::protocol_error: return "protocol_error";
    }
    return "?";
}

Worker::Worker(WorkerConfig cfg) : cfg_(std::move(cfg)) {}

Worker::~Worker() { stop(); }

void Worker::stop() { proc_.reset(); }

std::string Worker::log_tail() const {
    if (cfg_.log_path.empty()) return "";
    std::ifstream f(cfg_.log_path, std::ios::binary);
    if (!f) return "";
    f.seekg(0, std::ios::end);
    std::streamoff size = f.tellg();
    std::streamoff start = size > 2000 ? size - 2000 : 0;
    f.seekg(start);
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    return s;
}

bool Worker::ensure_started(std::string& detail) {
    if (proc_ && !proc_->exited()) return true;
    proc_.reset();
    SpawnOptions opts;
    opts.argv = cfg_.command;
    opts.argv.insert(opts.argv.end(), {"--role", cfg_.role, "--device", cfg_.device, "--work-root", cfg_.work_root});
    opts.env_set = cfg_.env;
    set_multicast_off(opts.env_set);  // every worker may touch a GPU (validation and verification alike)
    opts.stderr_path = cfg_.log_path;
    try {
        std::filesystem::create_directories(cfg_.work_root);
        if (!cfg_.log_path.empty())
            std::filesystem::create_directories(std::filesystem::path(cfg_.log_path).parent_path());
        proc_ = std::make_unique<Process>(opts);
    } catch (const std::exception& e) {
        detail = std::string("cannot start the ") + cfg_.role + " worker: " + e.what();
        return false;
    }
    ++starts_;
    FrameRead r = read_frame(*proc_, Clock::now() + cfg_.start_timeout);
    if (r.status != IoStatus::ok || r.msg.value("event", "") != "ready") {
        proc_->kill();
        detail = std::string("the ") + cfg_.role + " worker did not become ready (" +
                 (r.status == IoStatus::timeout ? "timed out"
                  : r.error.empty()             ? proc_->exit_description()
                                                : r.error) +
                 ")";
        std::string tail = log_tail();
        if (!tail.empty()) detail += "; its log ends with:\n" + tail;
        proc_.reset();
        return false;
    }
    hello_ = r.msg;
    return true;
}

Reply Worker::fail(ReplyStatus s, const std::string& what) {
    Reply r;
    r.status = s;
    if (proc_) {
        proc_->kill();
        r.detail = what + " (" + proc_->exit_description() + ")";
    } else {
        r.detail = what;
    }
    std::string tail = log_tail();
    if (!tail.empty()) r.detail += "; worker log ends with:\n" + tail;
    proc_.reset();
    return r;
}

Reply Worker::request(nlohmann::json req, std::chrono::milliseconds timeout) {
    std::string detail;
    if (!ensure_started(detail)) {
        Reply r;
        r.status = ReplyStatus::crashed;
        r.detail = detail;
        return r;
    }
    long long id = next_id_++;
    req["id"] = id;
    auto deadline = Clock::now() + timeout;
    IoStatus w = proc_->write_all(encode_frame(req), deadline);
    if (w == IoStatus::timeout) return fail(ReplyStatus::timeout, "the " + cfg_.role + " worker stopped reading");
    if (w != IoStatus::ok) return fail(ReplyStatus::crashed, "the " + cfg_.role + " worker is gone");
    FrameRead fr = read_frame(*proc_, deadline);
    if (fr.status == IoStatus::timeout)
        return fail(ReplyStatus::timeout, "the " + cfg_.role + " worker did not answer '" + req.value("op", "") +
                                              "' within " + std::to_string(timeout.count() / 1000) + " s");
    if (fr.status == IoStatus::closed) return fail(ReplyStatus::crashed, "the " + cfg_.role + " worker died");
    if (fr.status != IoStatus::ok)
        return fail(ReplyStatus::protocol_error,
                    fr.error.empty() ? "the " + cfg_.role + " worker's pipe failed" : fr.error);
    if (!fr.msg.contains("id") || fr.msg["id"] != id)
        return fail(ReplyStatus::protocol_error, "the " + cfg_.role + " worker answered another request");
    Reply r;
    r.body = std::move(fr.msg);
    if (r.body.value("ok", false)) {
        r.status = ReplyStatus::ok;
    } else {
        r.status = ReplyStatus::failed;
        r.detail = r.body.value("error", std::string("unspecified error"));
    }
    return r;
}

}  // namespace kz
