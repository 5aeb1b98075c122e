// A Redis connection for the verification farm (verify/farm.h), on Debian's hiredis: URL parsing,
// commands as argument vectors, replies copied into plain values, and reconnection: a command that
// meets a closed or broken connection reconnects and runs again until `retry_for` has passed, so a
// broker restart (with persistence on) is a pause, not a failure. Not thread-safe: one connection
// per thread.
#pragma once

#include <atomic>
#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct redisContext;

namespace kz {

struct RedisUrl {
    std::string host = "127.0.0.1";
    int port = 6379;
    int db = 0;
    std::string password;
    // redis://[:password@]host[:port][/db]. Throws std::invalid_argument naming the problem.
    static RedisUrl parse(const std::string& url);
    std::string to_string() const;  // without the password
};

struct RedisReply {
    enum Type { nil, string, integer, array, status, error } type = nil;
    std::string str;                   // string, status, error
    long long number = 0;              // integer
    std::vector<RedisReply> elements;  // array
};

// The broker could not be reached within the retry window, or answered with an error.
class RedisError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class RedisConn {
public:
    // Connects lazily (on the first command). `io_timeout` bounds one command's round trip; blocking
    // commands pass their own longer bound.
    explicit RedisConn(RedisUrl url, std::chrono::seconds retry_for = std::chrono::seconds(120),
                       std::chrono::milliseconds io_timeout = std::chrono::milliseconds(10000));
    ~RedisConn();
    RedisConn(const RedisConn&) = delete;
    RedisConn& operator=(const RedisConn&) = delete;

    // Runs one command. An error reply throws RedisError with Redis's message (no retry); a broken
    // connection reconnects and retries until retry_for. `block` extends the read timeout for
    // blocking commands (XREADGROUP BLOCK, BLPOP).
    RedisReply command(const std::vector<std::string>& args,
                       std::chrono::milliseconds block = std::chrono::milliseconds(0));
    const RedisUrl& url() const { return url_; }
    // While *cancel is true, a command waiting for a lost broker gives up at once (RedisError).
    void set_cancel(const std::atomic<bool>* cancel) { cancel_ = cancel; }

private:
    void connect();
    void drop();
    // One command on the open connection: its reply, or nullopt when the connection broke.
    std::optional<RedisReply> round_trip(const std::vector<std::string>& args);
    RedisUrl url_;
    std::chrono::seconds retry_for_;
    std::chrono::milliseconds io_timeout_;
    redisContext* ctx_ = nullptr;
    const std::atomic<bool>* cancel_ = nullptr;
};

}  // namespace kz
