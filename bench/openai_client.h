// A CompletionSource that asks any OpenAI-compatible server (kernelzero serve, vLLM, SGLang, ...)
// through POST /v1/chat/completions, with a concurrency limit, timeouts, and retries with backoff
// for connection failures, 429 and 5xx answers.
#pragma once

#include <string>

#include "bench/bench_run.h"

namespace kz {

struct EndpointOptions {
    std::string url;    // http://host:port, optionally ending in /v1
    std::string model;  // the served model name
    double temperature = 0.0, top_p = 1.0;
    int64_t max_tokens = 4096;
    uint64_t seed = 0;
    int concurrency = 8;  // requests in flight
    int retries = 4;      // after the first attempt
    double timeout_s = 900;
};

class EndpointSource : public CompletionSource {
public:
    // Throws std::invalid_argument for a URL that is not http://host[:port][/path].
    explicit EndpointSource(EndpointOptions opts);
    std::vector<std::vector<std::string>> complete(const std::vector<std::vector<ChatMessage>>& prompts,
                                                   int n) override;
    std::string describe() const override { return opts_.url + " (" + opts_.model + ")"; }
    int batch_prompts() const override { return 4 * opts_.concurrency; }

private:
    std::vector<std::string> ask(const std::vector<ChatMessage>& messages, int n, uint64_t seed) const;
    EndpointOptions opts_;
    std::string origin_, prefix_;  // "http://host:port" and the path before /v1
    uint64_t calls_ = 0;
};

}  // namespace kz
