// OpenAI API objects: requests parsed or refused with a clear message; responses and stream chunks
// in the shapes clients read.
#include <gtest/gtest.h>

#include "openai/api.h"

namespace {

using nlohmann::json;
namespace oa = kz::openai;

TEST(OpenAiApi, ParsesChatAndCompletionRequests) {
    auto r = oa::parse_request(json::parse(R"({"model": "m", "messages": [{"role": "system", "content": "s"},
        {"role": "user", "content": "u"}], "max_tokens": 7, "temperature": 0.2, "top_p": 0.9, "n": 3, "stream": true,
        "seed": 5, "stop": null, "logprobs": false})"),
                               true);
    EXPECT_TRUE(r.chat);
    ASSERT_EQ(r.messages.size(), 2u);
    EXPECT_EQ(r.messages[1].content, "u");
    EXPECT_EQ(r.max_tokens, 7);
    EXPECT_DOUBLE_EQ(r.temperature, 0.2);
    EXPECT_EQ(r.n, 3);
    EXPECT_TRUE(r.stream);
    EXPECT_EQ(*r.seed, 5u);
    auto c = oa::parse_request(json::parse(R"({"prompt": "p", "max_completion_tokens": 9})"), false);
    EXPECT_FALSE(c.chat);
    EXPECT_EQ(c.prompt, "p");
    EXPECT_EQ(c.max_tokens, 9);
    EXPECT_FALSE(c.seed.has_value());
}

TEST(OpenAiApi, RefusesWhatItCannotHonour) {
    const std::vector<std::pair<std::string, std::string>> bad = {
        {R"([])", "JSON object"},
        {R"({"messages": []})", "non-empty"},
        {R"({"messages": [{"role": "tool", "content": "x"}]})", "role 'tool'"},
        {R"({"messages": [{"role": "user"}]})", "content"},
        {R"({"messages": [{"role": "user", "content": "x"}], "n": 0})", "'n'"},
        {R"({"messages": [{"role": "user", "content": "x"}], "temperature": 3})", "temperature"},
        {R"({"messages": [{"role": "user", "content": "x"}], "top_p": 0})", "top_p"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", "max_tokens"},
        {R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"})", "wrong type"},
        {R"({"messages": [{"role": "user", "content": "x"}], "stop": ["\n"]})", "'stop' is not supported"},
        {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true})", "'logprobs' is not supported"},
    };
    for (const auto& [body, needle] : bad) {
        try {
            oa::parse_request(json::parse(body), true);
            ADD_FAILURE() << "accepted " << body;
        } catch (const std::invalid_argument& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << body << ": " << e.what();
        }
    }
    EXPECT_THROW(oa::parse_request(json::parse(R"({"prompt": 3})"), false), std::invalid_argument);
}

TEST(OpenAiApi, ResponsesAndChunks) {
    oa::CompletionRequest chat;
    auto r = oa::response(chat, "id1", "m", 100, {{"a", "stop"}, {"b", "length"}}, 12, 5);
    EXPECT_EQ(r["object"], "chat.completion");
    EXPECT_EQ(r["choices"][1]["message"]["content"], "b");
    EXPECT_EQ(r["choices"][1]["finish_reason"], "length");
    EXPECT_EQ(r["usage"]["total_tokens"], 17);
    EXPECT_EQ(oa::response_texts(r), (std::vector<std::string>{"a", "b"}));
    oa::CompletionRequest plain;
    plain.chat = false;
    auto t = oa::response(plain, "id2", "m", 100, {{"x", "stop"}}, 1, 1);
    EXPECT_EQ(t["object"], "text_completion");
    EXPECT_EQ(oa::response_texts(t), (std::vector<std::string>{"x"}));
    auto d = oa::chunk(chat, "id1", "m", 100, 0, "tok", std::nullopt);
    EXPECT_EQ(d["object"], "chat.completion.chunk");
    EXPECT_EQ(d["choices"][0]["delta"]["content"], "tok");
    EXPECT_TRUE(d["choices"][0]["finish_reason"].is_null());
    auto end = oa::chunk(chat, "id1", "m", 100, 0, "", std::string("stop"));
    EXPECT_EQ(end["choices"][0]["finish_reason"], "stop");
    EXPECT_TRUE(end["choices"][0]["delta"].empty());
    EXPECT_THROW(oa::response_texts(json::parse(R"({"error": {"message": "x"}})")), std::runtime_error);
    EXPECT_EQ(oa::error("bad")["error"]["message"], "bad");
}

}  // namespace
