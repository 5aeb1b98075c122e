// Subcommands of the kernelzero binary. Each registers its options on the CLI11 app and returns the
// function that runs it; exit codes: 0 done, 2 usage error (one-line reason on stderr), 130 interrupted.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace kz::cli {

using Runner = std::function<int()>;

Runner add_verify(CLI::App& app);

}  // namespace kz::cli
