// More (API set -> module) pairs for the Proposer's SFT than a corpus's training tasks give: the
// symbolic generator's own draws over the corpus's operators (`kernelzero proposer-pairs`). A
// Proposer pair needs no teacher kernel, so its number is not bounded by a teach run; what a small
// Proposer lacks is modules of several operators to learn composing from (docs/LEARNING.md, the
// twenty-fourth run). A corpus's held-out API sets are never drawn, as arm D's Proposer never writes
// for them (train's `propose.exclude_sets`).
//
// The modules are not validated (validation runs each module, the slow part of a teach run): they
// are what the generator writes, which a teach run of the same generator validates for most draws
// (2,020 of 2,400 in the committed constructor-names run; fewer at four and five operators).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

namespace kz {

struct ProposerPairsOptions {
    std::string corpus_dir;  // a `kernelzero corpus` output: catalog.json, heldout/api_sets.txt
    std::string out;         // the pairs (JSONL), written whole or not at all
    int n = 0;               // pairs to write
    int level = 0;           // the API sets' level (1 or 2); 0: 1 and 2 in turn
    int max_apis = 0;        // most distinct operators in a drawn set (0: any); larger draws are drawn again
    uint64_t seed = 0;
    bool small_sizes = false;  // the generator's CPU sizes (tests); KernelBench-like sizes otherwise
};

// Writes opts.n pairs in proposer.jsonl's format ({"prompt", "completion", "task", "apis"}; task
// "drawn_NNNNN") and returns a summary: pairs, redrawn sets by why (held out, too many operators, a
// module already written), pairs by number of operators. The same options write the same file.
// Throws std::runtime_error naming a missing corpus file, or when the draws keep landing on
// excluded sets (the options leave no set to draw).
nlohmann::json write_proposer_pairs(const ProposerPairsOptions& opts);

}  // namespace kz
