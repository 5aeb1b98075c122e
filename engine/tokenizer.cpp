#include "engine/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "common/files.h"

namespace kz {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

// GPT-2's reversible byte -> printable character map used by every byte-level BPE vocabulary.
struct ByteMap {
    std::string to_str[256];
    std::unordered_map<std::string, uint8_t> to_byte;
    ByteMap() {
        int n = 0;
        for (int b = 0; b < 256; ++b) {
            bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
            uint32_t cp = printable ? b : 256 + n++;
            std::string s;
            if (cp < 0x80) {
                s.push_back(static_cast<char>(cp));
            } else {
                s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
                s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
            }
            to_str[b] = s;
            to_byte[s] = static_cast<uint8_t>(b);
        }
    }
};

const ByteMap& byte_map() {
    static const ByteMap m;
    return m;
}

// The pattern as Oniguruma (which `tokenizers` uses) reads it: its \s is Unicode White_Space, which
// also holds U+0085; PCRE2's \s under UCP does not.
std::string onig_compatible(const std::string& pat) {
    std::string out;
    bool in_class = false;
    for (size_t i = 0; i < pat.size(); ++i) {
        char c = pat[i];
        if (c == '\\' && i + 1 < pat.size()) {
            char d = pat[i + 1];
            if (d == 's')
                out += in_class ? "\\s\\x{85}" : "[\\s\\x{85}]";
            else if (d == 'S' && !in_class)
                out += "[^\\s\\x{85}]";
            else
                out += pat.substr(i, 2);
            ++i;
            continue;
        }
        if (c == '[' && !in_class)
            in_class = true;
        else if (c == ']' && in_class)
            in_class = false;
        out.push_back(c);
    }
    return out;
}

class Regex {
public:
    explicit Regex(const std::string& pattern) {
        int err = 0;
        PCRE2_SIZE off = 0;
        code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &off, nullptr);
        if (!code_) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(err, msg, sizeof msg);
            throw std::runtime_error("pre-tokenizer regex does not compile at offset " + std::to_string(off) + ": " +
                                     reinterpret_cast<char*>(msg));
        }
        pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // falls back to the interpreter when JIT is unavailable
    }
    ~Regex() { pcre2_code_free(code_); }
    Regex(const Regex&) = delete;
    Regex& operator=(const Regex&) = delete;

    // Splits `s` the way the "Isolated" behaviour does: every match is a piece, and so is every gap.
    void split(const std::string& s, std::vector<std::string>& pieces) const {
        pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
        size_t pos = 0, last = 0;
        while (pos <= s.size()) {
            int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, PCRE2_NO_UTF_CHECK, md,
                                 nullptr);
            if (rc < 0) break;
            PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
            size_t b = ov[0], e = ov[1];
            if (e == b) {  // an empty match: step over one character
                pos = b + 1;
                while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
                continue;
            }
            if (b > last) pieces.push_back(s.substr(last, b - last));
            pieces.push_back(s.substr(b, e - b));
            last = pos = e;
        }
        if (last < s.size()) pieces.push_back(s.substr(last));
        pcre2_match_data_free(md);
    }

private:
    pcre2_code* code_ = nullptr;
};

// GPT-2's pre-tokenizer, used when a ByteLevel pre-tokenizer has use_regex = true.
const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// By length, not up to the first NUL: every byte of the text reaches the tokenizer (U+0000 is a
// character like any other; utf8proc_NFC would stop at it).
std::string nfc(const std::string& s) {
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()), &out,
                     static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) throw std::runtime_error(std::string("NFC normalisation failed: ") + utf8proc_errmsg(n));
    std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
    free(out);
    return r;
}

std::string token_content(const json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("content")) return v["content"].get<std::string>();
    return {};
}

}  // namespace

struct Tokenizer::Impl {
    std::unordered_map<std::string, int64_t> vocab;
    std::vector<std::string> id_to_token;             // byte-level form; added tokens hold their content
    std::unordered_map<std::string, int> merge_rank;  // key: a + '\0' + b
    std::vector<AddedToken> added;
    std::unordered_map<int64_t, size_t> added_by_id;
    std::unordered_map<std::string, int64_t> added_by_content;
    std::unique_ptr<Regex> split_regex;
    bool normalize_nfc = false;
    bool ignore_merges = false;
    std::optional<int64_t> eos, pad;
    std::string chat_template;
    // piece -> ids (short pieces). Encoding is const and called from several threads at once (the
    // server's HTTP handlers), so the cache is guarded: shared for lookups, exclusive for inserts.
    mutable std::unordered_map<std::string, std::vector<int64_t>> cache;
    mutable std::shared_mutex cache_mu;

    void bpe(const std::string& piece, std::vector<int64_t>& out) const;
    void encode_text(const std::string& text, std::vector<int64_t>& out) const;

    // Tokenizer::load's parts, each reading one section of tokenizer.json (`path`, named in errors).
    void read_model(const json& model, const std::string& path);
    void read_added_tokens(const json& j, const std::string& path);
    void read_normalizer(const json& j, const std::string& path);
    void read_pre_tokenizer(const json& j, const std::string& path);
    // tokenizer_config.json, when the directory has one: the eos and pad tokens, the chat template.
    void read_config(const std::string& dir);
};

void Tokenizer::Impl::bpe(const std::string& piece, std::vector<int64_t>& out) const {
    const ByteMap& bm = byte_map();
    std::string mapped;
    std::vector<std::string> sym;
    sym.reserve(piece.size());
    for (unsigned char b : piece) {
        sym.push_back(bm.to_str[b]);
        mapped += bm.to_str[b];
    }
    if (ignore_merges) {
        if (auto it = vocab.find(mapped); it != vocab.end()) {
            out.push_back(it->second);
            return;
        }
    }
    bool cacheable = piece.size() <= 64;
    if (cacheable) {
        std::shared_lock lock(cache_mu);
        if (auto it = cache.find(piece); it != cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::string key;
    while (sym.size() > 1) {
        int best = std::numeric_limits<int>::max();
        size_t at = 0;
        for (size_t i = 0; i + 1 < sym.size(); ++i) {
            key.assign(sym[i]).push_back('\0');
            key += sym[i + 1];
            auto it = merge_rank.find(key);
            if (it != merge_rank.end() && it->second < best) best = it->second, at = i;
        }
        if (best == std::numeric_limits<int>::max()) break;
        // Merge every occurrence of the best pair, left to right (what a rank-ordered queue does).
        std::string a = sym[at], b = sym[at + 1];
        std::vector<std::string> next;
        next.reserve(sym.size());
        for (size_t i = 0; i < sym.size();) {
            if (i + 1 < sym.size() && sym[i] == a && sym[i + 1] == b) {
                next.push_back(a + b);
                i += 2;
            } else {
                next.push_back(std::move(sym[i]));
                ++i;
            }
        }
        sym.swap(next);
    }
    std::vector<int64_t> ids;
    for (const auto& s : sym) {
        auto it = vocab.find(s);
        if (it == vocab.end())
            throw std::runtime_error("BPE produced a symbol outside the vocabulary (tokenizer.json is inconsistent)");
        ids.push_back(it->second);
    }
    if (cacheable) {
        std::unique_lock lock(cache_mu);
        cache.emplace(piece, ids);
    }
    out.insert(out.end(), ids.begin(), ids.end());
}

void Tokenizer::Impl::encode_text(const std::string& text, std::vector<int64_t>& out) const {
    if (text.empty()) return;
    std::string norm = normalize_nfc ? nfc(text) : text;
    std::vector<std::string> pieces;
    if (split_regex)
        split_regex->split(norm, pieces);
    else
        pieces.push_back(norm);
    for (const auto& p : pieces) bpe(p, out);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

namespace {

[[noreturn]] void fail_at(const std::string& path, const std::string& why) {
    throw std::runtime_error(path + ": " + why);
}

}  // namespace

void Tokenizer::Impl::read_model(const json& model, const std::string& path) {
    if (model.value("type", std::string("BPE")) != "BPE")
        fail_at(path, "unsupported model type " + model["type"].dump());
    if (model.value("byte_fallback", false)) fail_at(path, "byte_fallback BPE is not supported");
    ignore_merges = model.value("ignore_merges", false);
    for (auto it = model.at("vocab").begin(); it != model.at("vocab").end(); ++it) {
        int64_t id = it->get<int64_t>();
        vocab[it.key()] = id;
        if (id < 0) fail_at(path, "negative id in vocab");
        if (static_cast<size_t>(id) >= id_to_token.size()) id_to_token.resize(id + 1);
        id_to_token[id] = it.key();
    }
    int rank = 0;
    for (const auto& m : model.at("merges")) {
        std::string a, b;
        if (m.is_string()) {  // "a b"
            std::string s = m.get<std::string>();
            auto sp = s.find(' ');
            if (sp == std::string::npos) fail_at(path, "merge \"" + s + "\" has no space");
            a = s.substr(0, sp), b = s.substr(sp + 1);
        } else if (m.is_array() && m.size() == 2) {  // ["a", "b"]
            a = m[0].get<std::string>(), b = m[1].get<std::string>();
        } else {
            fail_at(path, "merge entry " + m.dump() + " is neither \"a b\" nor [a, b]");
        }
        merge_rank.emplace(a + '\0' + b, rank++);
    }
}

void Tokenizer::Impl::read_added_tokens(const json& j, const std::string& path) {
    if (!j.contains("added_tokens") || !j["added_tokens"].is_array()) return;
    for (const auto& t : j["added_tokens"]) {
        AddedToken a{t.at("id").get<int64_t>(), t.at("content").get<std::string>(), t.value("special", false)};
        if (t.value("lstrip", false) || t.value("rstrip", false) || t.value("single_word", false))
            fail_at(path, "added token " + a.content + ": lstrip/rstrip/single_word are not supported");
        if (a.content.empty()) fail_at(path, "added token with empty content");
        added_by_id[a.id] = added.size();
        added_by_content[a.content] = a.id;
        if (static_cast<size_t>(a.id) >= id_to_token.size()) id_to_token.resize(a.id + 1);
        id_to_token[a.id] = a.content;
        added.push_back(std::move(a));
    }
}

void Tokenizer::Impl::read_normalizer(const json& j, const std::string& path) {
    const json& norm = j.contains("normalizer") ? j["normalizer"] : json();
    if (norm.is_null()) return;
    if (norm.value("type", std::string()) == "NFC")
        normalize_nfc = true;
    else
        fail_at(path, "unsupported normalizer " + norm.value("type", norm.dump()));
}

void Tokenizer::Impl::read_pre_tokenizer(const json& j, const std::string& path) {
    const json& pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
    std::vector<json> steps;
    if (pre.is_object() && pre.value("type", std::string()) == "Sequence")
        steps = pre.at("pretokenizers").get<std::vector<json>>();
    else if (!pre.is_null())
        steps.push_back(pre);
    bool byte_level = false;
    for (const auto& s : steps) {
        std::string type = s.value("type", std::string());
        if (type == "Split") {
            if (s.value("behavior", std::string()) != "Isolated" || s.value("invert", false))
                fail_at(path, "unsupported Split pre-tokenizer (only behavior Isolated, invert false)");
            if (!s.contains("pattern") || !s["pattern"].contains("Regex"))
                fail_at(path, "Split pre-tokenizer without a Regex pattern");
            if (split_regex) fail_at(path, "more than one Split pre-tokenizer");
            split_regex = std::make_unique<Regex>(onig_compatible(s["pattern"]["Regex"].get<std::string>()));
        } else if (type == "ByteLevel") {
            if (s.value("add_prefix_space", false)) fail_at(path, "ByteLevel add_prefix_space is not supported");
            if (s.value("use_regex", true)) {
                if (split_regex) fail_at(path, "ByteLevel use_regex after a Split pre-tokenizer");
                split_regex = std::make_unique<Regex>(onig_compatible(kGpt2Pattern));
            }
            byte_level = true;
        } else {
            fail_at(path, "unsupported pre-tokenizer \"" + type + "\"");
        }
    }
    if (!byte_level) fail_at(path, "only byte-level BPE tokenizers are supported (no ByteLevel pre-tokenizer)");
}

void Tokenizer::Impl::read_config(const std::string& dir) {
    std::string cfg_path = (fs::path(dir) / "tokenizer_config.json").string();
    std::error_code ec;
    if (!fs::exists(cfg_path, ec)) return;
    json c;
    try {
        c = json::parse(read_file(cfg_path));
    } catch (const json::parse_error& e) {
        throw std::runtime_error(cfg_path + ": not valid JSON: " + e.what());
    }
    auto id_of = [&](const char* key) -> std::optional<int64_t> {
        if (!c.contains(key)) return std::nullopt;
        std::string s = token_content(c[key]);
        if (auto it = added_by_content.find(s); it != added_by_content.end()) return it->second;
        if (auto it = vocab.find(s); it != vocab.end()) return it->second;
        return std::nullopt;
    };
    eos = id_of("eos_token");
    pad = id_of("pad_token");
    if (c.contains("chat_template") && c["chat_template"].is_string()) chat_template = c["chat_template"];
}

Tokenizer Tokenizer::load(const std::string& dir) {
    std::string path = (fs::path(dir) / "tokenizer.json").string();
    std::error_code ec;
    if (!fs::exists(path, ec)) throw std::runtime_error(dir + ": no tokenizer.json");
    json j;
    try {
        j = json::parse(read_file(path));
    } catch (const json::parse_error& e) {
        fail_at(path, std::string("not valid JSON: ") + e.what());
    }
    auto impl = std::make_unique<Impl>();
    try {
        impl->read_model(j.at("model"), path);
        impl->read_added_tokens(j, path);
        impl->read_normalizer(j, path);
        impl->read_pre_tokenizer(j, path);
    } catch (const json::exception& e) {
        fail_at(path, std::string("unexpected structure: ") + e.what());
    }
    impl->read_config(dir);
    return Tokenizer(std::move(impl));
}

std::vector<int64_t> Tokenizer::encode(const std::string& text, bool parse_special) const {
    if (!valid_utf8(text)) throw std::runtime_error("text to encode is not valid UTF-8");
    std::vector<int64_t> out;
    if (!parse_special || impl_->added.empty()) {
        impl_->encode_text(text, out);
        return out;
    }
    // Added tokens split the text first: at each position the longest one that starts there wins.
    size_t start = 0, i = 0;
    while (i < text.size()) {
        const AddedToken* best = nullptr;
        for (const auto& a : impl_->added)
            if (text.compare(i, a.content.size(), a.content) == 0 && (!best || a.content.size() > best->content.size()))
                best = &a;
        if (!best) {
            ++i;
            continue;
        }
        impl_->encode_text(text.substr(start, i - start), out);
        out.push_back(best->id);
        i += best->content.size();
        start = i;
    }
    impl_->encode_text(text.substr(start), out);
    return out;
}

std::string Tokenizer::token_bytes(int64_t id) const {
    if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size()) return {};
    if (impl_->added_by_id.count(id)) return impl_->id_to_token[id];
    const std::string& t = impl_->id_to_token[id];
    const ByteMap& bm = byte_map();
    std::string out;
    for (size_t i = 0; i < t.size();) {
        size_t n = (static_cast<unsigned char>(t[i]) < 0x80) ? 1 : 2;  // the map's characters are 1 or 2 bytes
        auto it = bm.to_byte.find(t.substr(i, n));
        if (it == bm.to_byte.end()) return {};
        out.push_back(static_cast<char>(it->second));
        i += n;
    }
    return out;
}

std::string Tokenizer::decode(const std::vector<int64_t>& ids, bool skip_special) const {
    std::string out;
    for (int64_t id : ids) {
        if (skip_special && is_special(id)) continue;
        out += token_bytes(id);
    }
    return out;
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->id_to_token.size()); }

std::optional<int64_t> Tokenizer::token_id(const std::string& token) const {
    if (auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
    if (auto it = impl_->vocab.find(token); it != impl_->vocab.end()) return it->second;
    return std::nullopt;
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }

bool Tokenizer::is_special(int64_t id) const {
    auto it = impl_->added_by_id.find(id);
    return it != impl_->added_by_id.end() && impl_->added[it->second].special;
}

std::optional<int64_t> Tokenizer::eos_id() const { return impl_->eos; }
std::optional<int64_t> Tokenizer::pad_id() const { return impl_->pad; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

size_t complete_utf8_prefix(const std::string& s) {
    size_t n = s.size();
    // Look back at most 3 bytes for the start of a sequence that is not complete yet.
    for (size_t k = 1; k <= 3 && k <= n; ++k) {
        unsigned char c = static_cast<unsigned char>(s[n - k]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte
        size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
        return need > k ? n - k : n;
    }
    return n;
}

}  // namespace kz
