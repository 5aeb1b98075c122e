// What every subcommand that loads a policy model shares: its options, loading it, and its stop
// tokens.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <vector>

#include "engine/config.h"
#include "engine/model.h"
#include "engine/tokenizer.h"

namespace kz::cli {

struct ModelArgs {
    std::string model, adapter, device = "auto", dtype = "auto";
};

// --model (required unless `required` is false), --adapter, --device, --dtype.
void add_model_options(CLI::App* cmd, ModelArgs& a, bool required = true);

// The model on its device, with the adapter applied when one is given.
Model load_model(const ModelArgs& a);

}  // namespace kz::cli
