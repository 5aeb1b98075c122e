// Byte-level BPE as Hugging Face `tokenizers` runs it for the Qwen family (tokenizer.json):
// added tokens matched whole first (leftmost, longest), NFC normalisation (utf8proc), the
// pre-tokenizer's Split regex with Unicode properties (PCRE2, JIT), byte-to-unicode mapping, then
// merges by rank. Decoding is exact: the bytes of the tokens, concatenated. No torch here.
// Thread safety: every const method may be called from several threads at once (encode() fills a
// per-instance cache of pieces, guarded by a shared mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace kz {

struct AddedToken {
    int64_t id;
    std::string content;
    bool special;
};

class Tokenizer {
public:
    // Reads DIR/tokenizer.json (and DIR/tokenizer_config.json for the chat template and the eos/pad
    // tokens when present). Throws std::runtime_error naming the file and what is wrong or unsupported.
    static Tokenizer load(const std::string& dir);
    Tokenizer(Tokenizer&&) noexcept;
    Tokenizer& operator=(Tokenizer&&) noexcept;
    ~Tokenizer();

    // `text` must be valid UTF-8 (throws otherwise). Added/special tokens in the text become their ids
    // unless `parse_special` is false, in which case they are encoded as ordinary text.
    std::vector<int64_t> encode(const std::string& text, bool parse_special = true) const;
    // The exact bytes of the tokens (may end inside a UTF-8 sequence when the ids do).
    std::string decode(const std::vector<int64_t>& ids, bool skip_special = false) const;
    // One token's bytes ("" for an unknown id).
    std::string token_bytes(int64_t id) const;

    int64_t vocab_size() const;  // ids 0 .. vocab_size()-1 (BPE vocabulary plus added tokens)
    std::optional<int64_t> token_id(const std::string& token) const;  // vocab string or added token content
    const std::vector<AddedToken>& added_tokens() const;
    bool is_special(int64_t id) const;
    // From tokenizer_config.json: eos_token / pad_token ids, and the chat template text.
    std::optional<int64_t> eos_id() const;
    std::optional<int64_t> pad_id() const;
    const std::string& chat_template() const;

private:
    struct Impl;
    explicit Tokenizer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Length of the longest prefix of `bytes` that ends on a UTF-8 character boundary: what a streaming
// decoder may print now (the rest waits for the next token).
size_t complete_utf8_prefix(const std::string& bytes);

}  // namespace kz
