#include "verify/redis.h"

#include <hiredis/hiredis.h>
#include <sys/time.h>

#include <regex>
#include <thread>

namespace kz {

RedisUrl RedisUrl::parse(const std::string& url) {
    static const std::regex re(R"(redis://(?::([^@]*)@)?([^:/@]+)(?::(\d+))?(?:/(\d+))?/?)");
    std::smatch m;
    if (!std::regex_match(url, m, re))
        throw std::invalid_argument("'" + url + "' is not a Redis URL (redis://[:password@]host[:port][/db])");
    RedisUrl u;
    u.password = m[1].str();
    u.host = m[2].str();
    if (m[3].matched) u.port = std::stoi(m[3].str());
    if (m[4].matched) u.db = std::stoi(m[4].str());
    if (u.port < 1 || u.port > 65535) throw std::invalid_argument("'" + url + "': the port must be 1-65535");
    return u;
}

std::string RedisUrl::to_string() const {
    return "redis://" + host + ":" + std::to_string(port) + "/" + std::to_string(db);
}

namespace {

timeval to_timeval(std::chrono::milliseconds ms) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(ms.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((ms.count() % 1000) * 1000);
    return tv;
}

RedisReply copy(const redisReply* r) {
    RedisReply out;
    switch (r->type) {
        case REDIS_REPLY_STRING:
            out.type = RedisReply::string;
            out.str.assign(r->str, r->len);
            break;
        case REDIS_REPLY_STATUS:
            out.type = RedisReply::status;
            out.str.assign(r->str, r->len);
            break;
        case REDIS_REPLY_ERROR:
            out.type = RedisReply::error;
            out.str.assign(r->str, r->len);
            break;
        case REDIS_REPLY_INTEGER:
            out.type = RedisReply::integer;
            out.number = r->integer;
            break;
        case REDIS_REPLY_ARRAY:
            out.type = RedisReply::array;
            for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(copy(r->element[i]));
            break;
        default: out.type = RedisReply::nil;
    }
    return out;
}

}  // namespace

RedisConn::RedisConn(RedisUrl url, std::chrono::seconds retry_for, std::chrono::milliseconds io_timeout)
    : url_(std::move(url)), retry_for_(retry_for), io_timeout_(io_timeout) {}

RedisConn::~RedisConn() { drop(); }

void RedisConn::drop() {
    if (ctx_) redisFree(ctx_);
    ctx_ = nullptr;
}

void RedisConn::connect() {
    drop();
    timeval tv = to_timeval(io_timeout_);
    ctx_ = redisConnectWithTimeout(url_.host.c_str(), url_.port, tv);
    if (!ctx_ || ctx_->err) {
        std::string why = ctx_ ? ctx_->errstr : "out of memory";
        drop();
        throw RedisError("cannot connect to " + url_.to_string() + ": " + why);
    }
    redisSetTimeout(ctx_, tv);
    auto setup = [&](const std::vector<std::string>& args) {
        auto c = round_trip(args);
        if (!c) throw RedisError("lost the connection to " + url_.to_string());
        if (c->type == RedisReply::error) throw RedisError(url_.to_string() + ": " + args[0] + ": " + c->str);
    };
    try {
        if (!url_.password.empty()) setup({"AUTH", url_.password});
        if (url_.db != 0) setup({"SELECT", std::to_string(url_.db)});
    } catch (...) {
        drop();
        throw;
    }
}

std::optional<RedisReply> RedisConn::round_trip(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    auto* r = static_cast<redisReply*>(redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    if (!r) return std::nullopt;
    RedisReply c = copy(r);
    freeReplyObject(r);
    return c;
}

RedisReply RedisConn::command(const std::vector<std::string>& args, std::chrono::milliseconds block) {
    const auto deadline = std::chrono::steady_clock::now() + retry_for_;
    std::string last_error;
    for (;;) {
        try {
            if (!ctx_) connect();
            redisSetTimeout(ctx_, to_timeval(io_timeout_ + block));
            auto c = round_trip(args);
            if (!c) {
                last_error = ctx_->errstr[0] ? ctx_->errstr : "connection lost";
                drop();
            } else if (c->type == RedisReply::error && c->str.rfind("LOADING", 0) == 0) {
                // A broker still loading its data set after a restart answers LOADING: wait it out.
                last_error = c->str;
            } else {
                if (c->type == RedisReply::error) throw RedisError(url_.to_string() + ": " + args[0] + ": " + c->str);
                return *c;
            }
        } catch (const RedisError& e) {
            if (ctx_) throw;  // an error reply on a live connection: the command itself is wrong
            last_error = e.what();
        }
        if (cancel_ && *cancel_)
            throw RedisError("stopped while waiting for Redis at " + url_.to_string() + ": " + last_error);
        if (std::chrono::steady_clock::now() > deadline)
            throw RedisError("Redis at " + url_.to_string() + " unreachable for " + std::to_string(retry_for_.count()) +
                             " s: " + last_error);
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
}

}  // namespace kz
