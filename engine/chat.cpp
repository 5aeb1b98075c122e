#include "engine/chat.h"

#include <set>
#include <stdexcept>

namespace kz {

ChatFormat ChatFormat::from_template(const std::string& t) {
    ChatFormat f;
    // Qwen2.5's template writes its default as one literal: '<|im_start|>system\nYOU ARE ...<|im_end|>\n'
    // (the other occurrences of the system header are followed by a quote and a '+').
    const std::string head = "<|im_start|>system\\n";
    for (size_t at = t.find(head); at != std::string::npos; at = t.find(head, at + 1)) {
        size_t b = at + head.size();
        if (b >= t.size() || t[b] == '\'' || t[b] == '"') continue;
        size_t e = t.find("<|im_end|>", b);
        if (e == std::string::npos) continue;
        f.default_system = t.substr(b, e - b);
        break;
    }
    return f;
}

std::string ChatFormat::render(const std::vector<ChatMessage>& messages, bool generation_prompt) const {
    std::string out;
    if ((messages.empty() || messages[0].role != "system") && default_system)
        out += "<|im_start|>system\n" + *default_system + "<|im_end|>\n";
    for (const auto& m : messages) {
        if (m.role != "system" && m.role != "user" && m.role != "assistant")
            throw std::runtime_error("chat role \"" + m.role + "\" is not system, user or assistant");
        out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
    }
    if (generation_prompt) out += "<|im_start|>assistant\n";
    return out;
}

std::vector<int64_t> stop_ids(const Tokenizer& tok, const ModelConfig& cfg, const GenerationDefaults& g) {
    std::set<int64_t> s(cfg.eos_token_ids.begin(), cfg.eos_token_ids.end());
    s.insert(g.eos_token_ids.begin(), g.eos_token_ids.end());
    if (auto e = tok.eos_id()) s.insert(*e);
    if (auto e = tok.token_id("<|im_end|>")) s.insert(*e);
    if (auto e = tok.token_id("<|endoftext|>")) s.insert(*e);
    return {s.begin(), s.end()};
}

}  // namespace kz
