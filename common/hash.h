// Content hashes: the identity of a source text (tasks in the store, baselines in their cache,
// near-duplicate clusters, run records).
#pragma once

#include <string>

namespace kz {

// SHA-256 of `data`, as 64 lowercase hex digits.
std::string sha256_hex(const std::string& data);

// A number in [0, 1) fixed by `key` alone (its SHA-256): a choice that depends neither on the order
// of what is chosen from nor on the machine (a held-out split, a quality per task).
double unit_hash(const std::string& key);

}  // namespace kz
