// The ChatML chat format of the Qwen family, rendered in C++ (no Jinja): what
// tokenizer.apply_chat_template produces for plain system/user/assistant conversations.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/tokenizer.h"

namespace kz {

struct ChatMessage {
    std::string role;  // "system" | "user" | "assistant"
    std::string content;
};

struct ChatFormat {
    // The system prompt the template inserts when the conversation has none (Qwen2.5's "You are
    // Qwen, ..."), read from the template text; none for templates without one (Qwen3).
    std::optional<std::string> default_system;
    static ChatFormat from_template(const std::string& jinja_template);

    // "<|im_start|>ROLE\nCONTENT<|im_end|>\n" per message, then "<|im_start|>assistant\n" when
    // `generation_prompt`. Throws for a role other than system/user/assistant.
    std::string render(const std::vector<ChatMessage>& messages, bool generation_prompt) const;
};

// The ids that end a completion: the config's and generation_config's eos, the tokenizer's eos,
// <|im_end|> and <|endoftext|>.
std::vector<int64_t> stop_ids(const Tokenizer& tok, const ModelConfig& cfg, const GenerationDefaults& g);

}  // namespace kz
