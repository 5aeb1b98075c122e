// `kernelzero serve`: the policy engine behind OpenAI's HTTP API (openai/api.h), so that bench,
// notebooks and other tools can use a trained model. Requests that arrive together are decoded in
// one batch (rows of requests with the same temperature / top-p / top-k share a generate call, up
// to max_batch rows); streaming answers are sent token by token as server-sent events.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "engine/model.h"
#include "engine/tokenizer.h"

namespace kz {

struct ServeOptions {
    std::string host = "127.0.0.1";
    int port = 8000;         // 0: any free port (printed on the "listening" line)
    std::string model_name;  // the name clients pass as "model"
    int max_batch = 64;      // rows per generate call
    int http_threads = 16;
};

class PolicyServer {
public:
    // `model` and `tokenizer` must outlive the server. `stop_ids` end a completion.
    PolicyServer(const Model& model, const Tokenizer& tokenizer, std::vector<int64_t> stop_ids, ServeOptions opts);
    ~PolicyServer();
    // Binds, prints "kernelzero serve: listening on http://HOST:PORT (model NAME)" on stdout, and
    // serves until stop(). Throws std::runtime_error when the address cannot be bound.
    void run();
    void stop();  // safe from a signal-watching thread

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kz
