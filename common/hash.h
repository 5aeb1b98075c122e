// Content hashes: the identity of a source text (tasks in the store, baselines in their cache,
// near-duplicate clusters, run records).
#pragma once

#include <string>

namespace kz {

// SHA-256 of `data`, as 64 lowercase hex digits.
std::string sha256_hex(const std::string& data);

}  // namespace kz
