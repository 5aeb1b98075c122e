#include "bench/openai_client.h"

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "openai/api.h"

namespace kz {

using json = nlohmann::json;

EndpointSource::EndpointSource(EndpointOptions opts) : opts_(std::move(opts)) {
    const std::string& u = opts_.url;
    if (u.rfind("http://", 0) != 0)
        throw std::invalid_argument("--endpoint " + u + ": give http://host:port (https is not supported)");
    const size_t slash = u.find('/', 7);
    origin_ = u.substr(0, slash);
    prefix_ = slash == std::string::npos ? "" : u.substr(slash);
    while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
    if (prefix_.size() >= 3 && prefix_.compare(prefix_.size() - 3, 3, "/v1") == 0) prefix_.resize(prefix_.size() - 3);
    if (origin_.size() <= 7) throw std::invalid_argument("--endpoint " + u + ": no host");
    if (opts_.model.empty()) throw std::invalid_argument("--served-model is needed with --endpoint");
}

std::vector<std::string> EndpointSource::ask(const std::vector<ChatMessage>& messages, int n, uint64_t seed) const {
    json msgs = json::array();
    for (const auto& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
    const json body = {{"model", opts_.model},
                       {"messages", msgs},
                       {"n", n},
                       {"max_tokens", opts_.max_tokens},
                       {"temperature", opts_.temperature},
                       {"top_p", opts_.top_p},
                       {"seed", seed}};
    httplib::Client cli(origin_);
    const auto secs = static_cast<time_t>(opts_.timeout_s);
    cli.set_connection_timeout(10, 0);
    cli.set_read_timeout(secs, 0);
    cli.set_write_timeout(60, 0);
    std::string last;
    for (int attempt = 0; attempt <= opts_.retries; ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(500 << std::min(attempt - 1, 6)));
        auto res = cli.Post(prefix_ + "/v1/chat/completions", body.dump(-1, ' ', false, json::error_handler_t::replace),
                            "application/json");
        if (!res) {
            last = "no answer from " + origin_ + " (" + httplib::to_string(res.error()) + ")";
            continue;
        }
        if (res->status == 429 || res->status >= 500) {
            last = "HTTP " + std::to_string(res->status) + ": " + res->body.substr(0, 300);
            continue;
        }
        if (res->status != 200)
            throw std::runtime_error("the endpoint refused the request: HTTP " + std::to_string(res->status) + ": " +
                                     res->body.substr(0, 300));
        json j = json::parse(res->body, nullptr, false);
        if (j.is_discarded())
            throw std::runtime_error("the endpoint's answer is not JSON: " + res->body.substr(0, 200));
        auto texts = openai::response_texts(j);
        if (static_cast<int>(texts.size()) != n)
            throw std::runtime_error("the endpoint returned " + std::to_string(texts.size()) +
                                     " choices for n = " + std::to_string(n));
        return texts;
    }
    throw std::runtime_error("the endpoint failed " + std::to_string(opts_.retries + 1) + " times; last: " + last);
}

std::vector<std::vector<std::string>> EndpointSource::complete(const std::vector<std::vector<ChatMessage>>& prompts,
                                                               int n) {
    std::vector<std::vector<std::string>> out(prompts.size());
    std::atomic<size_t> next{0};
    std::mutex mu;
    std::string error;
    const uint64_t base = opts_.seed + 1000003 * calls_++;
    auto worker = [&] {
        for (size_t i; (i = next++) < prompts.size();) {
            {
                std::lock_guard lock(mu);
                if (!error.empty()) return;
            }
            try {
                out[i] = ask(prompts[i], n, base + i);
            } catch (const std::exception& e) {
                std::lock_guard lock(mu);
                if (error.empty()) error = e.what();
            }
        }
    };
    std::vector<std::thread> threads;
    const size_t k = std::min(prompts.size(), static_cast<size_t>(std::max(1, opts_.concurrency)));
    for (size_t t = 0; t < k; ++t) threads.emplace_back(worker);
    for (auto& t : threads) t.join();
    if (!error.empty()) throw std::runtime_error(error);
    return out;
}

}  // namespace kz
