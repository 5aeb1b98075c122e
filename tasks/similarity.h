// Near-duplicate detection of task sources (design section 4: "normalised-source hash plus token
// similarity"): comments, docstrings and layout do not count; similarity is the Jaccard index of the
// sets of token 3-grams.
#pragma once

#include <set>
#include <string>
#include <vector>

namespace kz {

// Python tokens of `source` without comments, string literals that stand as statements (docstrings)
// and whitespace.
std::vector<std::string> code_tokens(const std::string& source);
// sha256 of the normalised token stream: equal for sources that differ only in comments and layout.
std::string normalised_hash(const std::string& source);
// Token 3-gram shingles.
std::set<std::string> shingles(const std::string& source);
double jaccard(const std::set<std::string>& a, const std::set<std::string>& b);

}  // namespace kz
