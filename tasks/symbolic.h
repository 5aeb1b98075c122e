// API-set sampling and the symbolic generator (design section 4): a non-LLM composer that turns an
// API set into a valid KernelBench-format task by shape propagation. It seeds task pools, backs the
// tests, and is the baseline the Proposer must beat.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tasks/api_catalog.h"

namespace kz {

struct ApiSet {
    std::vector<std::string> apis;  // catalog names, 1-5
    int level = 1;                  // 1: one operator; 2: a heavy operator and its epilogues
};

// Level 1: one API, category first (so small categories are not drowned), then an API in it.
// Level 2: one heavy API (convolution, transposed convolution, linear algebra, attention) followed by
// 1-4 epilogue APIs (activations, elementwise, reductions, normalisations, pooling, softmax, scans;
// sometimes a loss last).
ApiSet sample_api_set(const ApiCatalog& catalog, int level, std::mt19937_64& rng);

// "small": sizes that run in milliseconds on a CPU (tests); "typical": KernelBench-like sizes.
enum class SizeProfile { small, typical };

struct GeneratedTask {
    std::string source;                 // the task file: Model, get_inputs, get_init_inputs
    std::vector<std::string> apis;      // the APIs it uses, in forward order
    std::vector<int64_t> output_shape;  // predicted by shape propagation (empty: a scalar)
};

// Composes the set into one forward: heavy operators first, elementwise and reductions next, index
// outputs and losses last; reshapes inserted where an operator needs another rank. Throws
// std::runtime_error naming an API the catalog lacks.
GeneratedTask generate_task(const ApiCatalog& catalog, const ApiSet& set, SizeProfile sizes, std::mt19937_64& rng);

}  // namespace kz
