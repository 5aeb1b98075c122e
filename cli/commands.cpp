#include "cli/commands.h"

#include <csignal>
#include <cstdio>

#include "engine/torch_info.h"
#include "verify/service.h"

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

std::string verifier_device(const std::string& asked) {
    const std::string device = asked == "auto" ? (torch_info().cuda_available ? "cuda" : "cpu") : asked;
    return device == "cpu" || device == "cuda" || device.rfind("cuda:", 0) == 0 ? device : std::string();
}

std::unique_ptr<VerifyService> start_verifier(const std::string& cmd, const std::string& url, const VerifyOptions& o) {
    try {
        auto service = make_verify_service(url, o);
        service->start();
        return service;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "kernelzero %s: cannot start the verifier: %s\n", cmd.c_str(), e.what());
        return nullptr;
    }
}

}  // namespace kz::cli
