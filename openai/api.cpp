#include "openai/api.h"

#include <stdexcept>

namespace kz::openai {

using json = nlohmann::json;

namespace {

[[noreturn]] void bad(const std::string& m) { throw std::invalid_argument(m); }

template <typename T>
T get(const json& body, const char* key, T fallback) {
    if (!body.contains(key) || body[key].is_null()) return fallback;
    try {
        return body[key].get<T>();
    } catch (const json::exception&) {
        bad(std::string("'") + key + "' has the wrong type");
    }
}

}  // namespace

CompletionRequest parse_request(const json& body, bool chat) {
    if (!body.is_object()) bad("the request body must be a JSON object");
    for (const char* unsupported : {"stop", "logit_bias", "tools", "functions", "response_format", "logprobs", "echo",
                                    "best_of", "suffix", "presence_penalty", "frequency_penalty"})
        if (body.contains(unsupported) && !body[unsupported].is_null() &&
            !(body[unsupported].is_boolean() && !body[unsupported].get<bool>()) &&
            !(body[unsupported].is_number() && body[unsupported].get<double>() == 0.0))
            bad(std::string("'") + unsupported + "' is not supported by kernelzero serve");
    CompletionRequest r;
    r.chat = chat;
    if (chat) {
        if (!body.contains("messages") || !body["messages"].is_array() || body["messages"].empty())
            bad("'messages' must be a non-empty array");
        for (const auto& m : body["messages"]) {
            if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) bad("each message needs a 'role'");
            const std::string role = m["role"];
            if (role != "system" && role != "user" && role != "assistant")
                bad("unsupported message role '" + role + "'");
            if (!m.contains("content") || !m["content"].is_string()) bad("each message needs a string 'content'");
            r.messages.push_back({role, m["content"].get<std::string>()});
        }
    } else {
        if (!body.contains("prompt") || !body["prompt"].is_string()) bad("'prompt' must be a string");
        r.prompt = body["prompt"];
    }
    r.model = get<std::string>(body, "model", "");
    r.max_tokens = get<int64_t>(body, "max_tokens", get<int64_t>(body, "max_completion_tokens", 256));
    r.temperature = get<double>(body, "temperature", 1.0);
    r.top_p = get<double>(body, "top_p", 1.0);
    r.top_k = get<int64_t>(body, "top_k", 0);
    r.n = get<int>(body, "n", 1);
    r.stream = get<bool>(body, "stream", false);
    if (body.contains("seed") && !body["seed"].is_null()) r.seed = get<uint64_t>(body, "seed", 0);
    if (r.max_tokens < 1) bad("'max_tokens' must be >= 1");
    if (r.temperature < 0 || r.temperature > 2) bad("'temperature' must be in [0, 2]");
    if (!(r.top_p > 0 && r.top_p <= 1)) bad("'top_p' must be in (0, 1]");
    if (r.top_k < 0) bad("'top_k' must be >= 0");
    if (r.n < 1 || r.n > 128) bad("'n' must be in [1, 128]");
    return r;
}

json response(const CompletionRequest& req, const std::string& id, const std::string& model, int64_t created,
              const std::vector<Choice>& choices, int64_t prompt_tokens, int64_t completion_tokens) {
    json cs = json::array();
    for (size_t i = 0; i < choices.size(); ++i) {
        json c = {{"index", i}, {"finish_reason", choices[i].finish_reason}};
        if (req.chat)
            c["message"] = {{"role", "assistant"}, {"content", choices[i].text}};
        else
            c["text"] = choices[i].text;
        cs.push_back(c);
    }
    return {{"id", id},
            {"object", req.chat ? "chat.completion" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", cs},
            {"usage",
             {{"prompt_tokens", prompt_tokens},
              {"completion_tokens", completion_tokens},
              {"total_tokens", prompt_tokens + completion_tokens}}}};
}

json chunk(const CompletionRequest& req, const std::string& id, const std::string& model, int64_t created, int index,
           const std::string& delta, const std::optional<std::string>& finish_reason) {
    json c = {{"index", index}, {"finish_reason", finish_reason ? json(*finish_reason) : json(nullptr)}};
    if (req.chat)
        c["delta"] = finish_reason ? json::object() : json{{"content", delta}};
    else
        c["text"] = finish_reason ? "" : delta;
    return {{"id", id},
            {"object", req.chat ? "chat.completion.chunk" : "text_completion"},
            {"created", created},
            {"model", model},
            {"choices", json::array({c})}};
}

json error(const std::string& message, const std::string& type) {
    return {{"error", {{"message", message}, {"type", type}, {"code", nullptr}}}};
}

json models(const std::string& model, int64_t created) {
    return {{"object", "list"},
            {"data",
             json::array({{{"id", model}, {"object", "model"}, {"created", created}, {"owned_by", "kernelzero"}}})}};
}

std::vector<std::string> response_texts(const json& r) {
    if (!r.is_object() || !r.contains("choices") || !r["choices"].is_array())
        throw std::runtime_error("the server's answer is not a completion response: " + r.dump().substr(0, 200));
    std::vector<std::string> out(r["choices"].size());
    for (const auto& c : r["choices"]) {
        const size_t i = c.value("index", size_t{0});
        if (i >= out.size()) throw std::runtime_error("a choice index is out of range");
        if (c.contains("message") && c["message"].is_object())
            out[i] = c["message"].value("content", std::string());
        else
            out[i] = c.value("text", std::string());
    }
    return out;
}

}  // namespace kz::openai
