#include "cli/commands.h"

#include <csignal>
#include <cstdio>

namespace kz::cli {

std::atomic<bool> g_stop{false};

namespace {
void on_signal(int) { g_stop = true; }
}  // namespace

void catch_stop_signals() {
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
}

int usage_error(const std::string& cmd, const std::string& why) {
    std::fprintf(stderr, "kernelzero %s: %s\n", cmd.c_str(), why.c_str());
    return 2;
}

}  // namespace kz::cli
