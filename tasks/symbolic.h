// API-set sampling and the symbolic generator (design section 4): a non-LLM composer that turns an
// API set into a valid KernelBench-format task by shape propagation. It seeds task pools, backs the
// tests, and is the baseline the Proposer must beat.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tasks/api_catalog.h"

namespace kz {

struct ApiSet {
    std::vector<std::string> apis;  // catalog names, 1-5
    int level = 1;                  // 1: one operator; 2: a heavy operator and its epilogues
};

// An API set's key: its APIs sorted, repeats dropped, joined by commas (the same set in any order).
std::string api_set_key(std::vector<std::string> apis);
// API sets from a file, one per line (APIs comma-separated, any order; blank lines skipped), by key.
// Throws std::runtime_error naming the file when it cannot be read.
std::set<std::string> read_api_sets(const std::string& path);

// Level 1: one API, category first (so small categories are not drowned), then an API in it.
// Level 2: one heavy API (convolution, transposed convolution, linear algebra, attention) followed by
// 1-4 epilogue APIs (activations, elementwise, reductions, normalisations, pooling, softmax, scans;
// sometimes a loss last).
ApiSet sample_api_set(const ApiCatalog& catalog, int level, std::mt19937_64& rng);

// "small": sizes that run in milliseconds on a CPU (tests); "typical": KernelBench-like sizes.
enum class SizeProfile { small, typical };

// A value an operator reads: a variable of the forward (an input `aN` or a result `vN`), and the
// domain the template maps it into first (api_catalog.json: "any", "positive" or "bounded").
struct Operand {
    std::string name;
    std::string domain = "any";
};

// One line of the generated forward, as a kernel writer reads it (the teacher): either an operator,
// an API applied to the running value, or a layout line (a reshape, a slice, a cast to float) that
// moves no arithmetic.
struct ForwardStep {
    bool is_op = false;
    std::string output;                         // the variable it assigns
    std::string expr;                           // the Python right-hand side, as in the source
    std::vector<int64_t> in_shape, out_shape;   // the running value's shape before and after
    std::string api, kind;                      // operators: catalog name and kind
    std::map<std::string, Operand> operands;    // operators: template key (x, y, z, d, target) -> value
    std::map<std::string, std::string> params;  // operators: the template's other substitutions
    std::string module;                         // operators with state: "self.m0"; else empty
    std::string dim_attr;                       // operators over a dimension: "self.dim" (params: its value)
    // The line of forward as the module's source has it: `v2 = torch.relu(v1)`.
    std::string line() const { return output + " = " + expr; }
};

struct GeneratedTask {
    std::string source;                 // the task file: Model, get_inputs, get_init_inputs
    std::vector<std::string> apis;      // the APIs it uses, in forward order
    std::vector<int64_t> output_shape;  // predicted by shape propagation (empty: a scalar)
    // The operator graph behind the source: the constructor's lines, forward's parameters, its steps
    // in order, and the returned variable.
    std::vector<std::string> init;
    std::vector<std::string> init_args;  // the constructor's parameters after self (get_init_inputs' order)
    std::vector<std::string> inputs;
    std::vector<ForwardStep> steps;
    std::string result;
};

// The names a module's constructor may give a size or a dimension, by the substitution it stands for
// (c_in, kernel, dim, ...: api_catalog.json's keys); the first is the key itself. Each module draws one
// per key, as KernelBench's modules name them variously (in_channels, kernel_size, dim): with one
// name per operator, a kernel writer learns the constructor with the operators and writes a training
// module's on a new composition, instead of copying the one it is given.
const std::map<std::string, std::vector<std::string>>& constructor_argument_names();

// `self, a, b`: the parameter list of a constructor taking args.
std::string init_signature(const std::vector<std::string>& args);

// Composes the set into one forward: heavy operators first, elementwise and reductions next, index
// outputs and losses last; reshapes inserted where an operator needs another rank. Throws
// std::runtime_error naming an API the catalog lacks.
GeneratedTask generate_task(const ApiCatalog& catalog, const ApiSet& set, SizeProfile sizes, std::mt19937_64& rng);

}  // namespace kz
