#include "train/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <thread>

#include "common/subprocess.h"

namespace kz {

namespace {

// A port the kernel had free a moment ago (the race with other programs is torchrun's too).
int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) throw std::runtime_error("launcher: cannot open a socket");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    socklen_t len = sizeof a;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("launcher: cannot find a free port");
    }
    ::close(fd);
    return ntohs(a.sin_port);
}

}  // namespace

int launch_local_ranks(int nproc, const std::vector<std::string>& argv, const std::atomic<bool>& interrupt) {
    if (nproc < 1) throw std::invalid_argument("launcher: nproc must be >= 1");
    const std::string port = std::to_string(free_port());
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < nproc; ++r) {
        SpawnOptions o;
        o.argv = argv;
        o.inherit_stdout = true;
        o.die_with_parent = true;  // a killed launcher takes its ranks with it
        o.env_set = {{"RANK", std::to_string(r)},           {"LOCAL_RANK", std::to_string(r)},
                     {"WORLD_SIZE", std::to_string(nproc)}, {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
                     {"MASTER_ADDR", "127.0.0.1"},          {"MASTER_PORT", port}};
        set_multicast_off(o.env_set);
        ranks.push_back(std::make_unique<Process>(o));
    }
    bool forwarded = false;
    int failed_code = 0;
    for (;;) {
        if (interrupt && !forwarded) {
            for (auto& p : ranks) p->signal(SIGINT);
            forwarded = true;
        }
        bool all_done = true;
        for (int r = 0; r < nproc; ++r) {
            Process& p = *ranks[static_cast<size_t>(r)];
            if (!p.exited()) {
                all_done = false;
                continue;
            }
            if (p.exit_code() != 0 && failed_code == 0) {
                failed_code = p.exit_code();
                if (!forwarded) {  // an interrupted run's ranks stop by themselves
                    std::fprintf(stderr, "[launch] rank %d %s; stopping the other ranks\n", r,
                                 p.exit_description().c_str());
                    for (auto& q : ranks) q->kill();
                }
            }
        }
        if (all_done) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return failed_code;
}

}  // namespace kz
