// Where a training run's random choices come from: every draw of an iteration (API sets, symbolic
// modules, the pool's order, sampling) is seeded by derive_seed(seed, iteration, stream, step) alone,
// so an iteration run again after a crash makes the same choices, on every rank.
#pragma once

#include <cstdint>

namespace kz {

// The independent streams of an iteration, one per stage that draws.
enum SeedStream : uint64_t {
    kProposeStage = 1,  // API sets drawn from the frontier; Proposer sampling
    kSymbolicStage,     // symbolic modules (one seed per candidate)
    kProbeStage,        // the Coder's samples on each new module (p-hat)
    kPoolStage,         // which older tasks are replayed into the pool
    kCoderStage,        // the CA-GRPO steps' task order and sampling
    kEvalStage,         // held-out evaluation's sampling
    kRankStream         // a rank's own sampling stream within a step (ranks > 0)
};

// splitmix64 over (seed, iteration, stream, step).
inline uint64_t derive_seed(uint64_t seed, int64_t iteration, uint64_t stream, uint64_t step = 0) {
    uint64_t z = seed ^ (static_cast<uint64_t>(iteration) * 0x9E3779B97F4A7C15ULL) ^ (stream << 48) ^ (step << 32);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

}  // namespace kz
