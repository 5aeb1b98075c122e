// The subset of OpenAI's HTTP API that `kernelzero serve` speaks and the bench client uses:
// POST /v1/chat/completions, POST /v1/completions, GET /v1/models; non-streaming and streaming
// (server-sent events, "data: {chunk}" lines ending with "data: [DONE]"). Parsing and response
// objects only, no transport and no model, so that both sides are tested without a network.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/chat.h"

namespace kz::openai {

struct CompletionRequest {
    bool chat = true;                   // /v1/chat/completions (messages) or /v1/completions (prompt)
    std::vector<ChatMessage> messages;  // chat
    std::string prompt;                 // completions
    std::string model;                  // empty: the served model
    int64_t max_tokens = 256;
    double temperature = 1.0, top_p = 1.0;
    int64_t top_k = 0;
    int n = 1;
    bool stream = false;
    std::optional<uint64_t> seed;
};

// Throws std::invalid_argument with the message an API error carries (unknown role, n < 1, ...).
// Fields the server does not implement (stop strings, logit_bias, tools, ...) are refused by name
// rather than silently ignored.
CompletionRequest parse_request(const nlohmann::json& body, bool chat);

struct Choice {
    std::string text;
    std::string finish_reason;  // "stop" | "length"
};

nlohmann::json response(const CompletionRequest& req, const std::string& id, const std::string& model, int64_t created,
                        const std::vector<Choice>& choices, int64_t prompt_tokens, int64_t completion_tokens);
// One streamed chunk: a text delta for choice `index`, or its end (finish_reason set, no text).
nlohmann::json chunk(const CompletionRequest& req, const std::string& id, const std::string& model, int64_t created,
                     int index, const std::string& delta, const std::optional<std::string>& finish_reason);
// {"error": {"message", "type", "code"}} as OpenAI writes it.
nlohmann::json error(const std::string& message, const std::string& type = "invalid_request_error");
nlohmann::json models(const std::string& model, int64_t created);

// The texts of a (non-streaming) response, by choice index. Throws std::runtime_error when the
// object is not a completion response.
std::vector<std::string> response_texts(const nlohmann::json& response);

}  // namespace kz::openai
