#include "tasks/similarity.h"

#include <cctype>

#include "common/hash.h"

namespace kz {

std::vector<std::string> code_tokens(const std::string& s) {
    std::vector<std::string> out;
    size_t i = 0;
    bool line_start = true;  // only whitespace so far on this logical line
    while (i < s.size()) {
        char c = s[i];
        if (c == '\n') {
            line_start = true;
            ++i;
            continue;
        }
        if (std::isspace(static_cast<unsigned char>(c))) {
            ++i;
            continue;
        }
        if (c == '#') {
            while (i < s.size() && s[i] != '\n') ++i;
            continue;
        }
        if (c == '"' || c == '\'') {
            bool triple = s.compare(i, 3, std::string(3, c)) == 0;
            std::string quote = triple ? std::string(3, c) : std::string(1, c);
            size_t j = i + quote.size();
            while (j < s.size() && s.compare(j, quote.size(), quote) != 0) j += (s[j] == '\\') ? 2 : 1;
            j = std::min(s.size(), j + quote.size());
            if (!(line_start && triple)) out.push_back(s.substr(i, j - i));  // a docstring stands alone
            i = j;
            line_start = false;
            continue;
        }
        line_start = false;
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.') {
            size_t j = i;
            while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_' || s[j] == '.')) ++j;
            out.push_back(s.substr(i, j - i));
            i = j;
            continue;
        }
        out.push_back(std::string(1, c));
        ++i;
    }
    return out;
}

std::string normalised_hash(const std::string& source) {
    std::string joined;
    for (const auto& t : code_tokens(source)) joined += t + '\x1f';
    return sha256_hex(joined);
}

std::set<std::string> shingles(const std::string& source) {
    auto t = code_tokens(source);
    std::set<std::string> out;
    for (size_t i = 0; i + 2 < t.size(); ++i) out.insert(t[i] + '\x1f' + t[i + 1] + '\x1f' + t[i + 2]);
    if (t.size() < 3 && !t.empty()) out.insert(t[0]);
    return out;
}

double jaccard(const std::set<std::string>& a, const std::set<std::string>& b) {
    if (a.empty() && b.empty()) return 1.0;
    size_t inter = 0;
    for (const auto& x : a) inter += b.count(x);
    return static_cast<double>(inter) / static_cast<double>(a.size() + b.size() - inter);
}

}  // namespace kz
