// Child processes with pipes: spawn in a new process group, bounded reads and writes, kill, reap.
//
// Contract: a Process owns its pid and the parent ends of its pipes; destroying it kills the whole
// process group (SIGKILL) and reaps the child, so no worker outlives its owner by accident.
// Not thread-safe: one thread talks to one Process at a time.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace kz {

using Clock = std::chrono::steady_clock;

struct SpawnOptions {
    std::vector<std::string> argv;               // argv[0] is looked up on PATH
    std::map<std::string, std::string> env_set;  // added to (or overriding) the parent's environment
    std::vector<std::string> env_unset;
    std::string stderr_path;  // appended to; empty: inherit the parent's stderr
    std::string cwd;
    bool inherit_stdout = false;  // the child writes to the parent's stdout (no pipe)
    // The child gets SIGKILL when the spawning thread's process dies (prctl PR_SET_PDEATHSIG): for
    // children spawned from the main thread that must not outlive a killed parent (a launcher's ranks).
    bool die_with_parent = false;
};

// NVLink multicast off in NCCL, PyTorch's symmetric memory and NVSHMEM, in `env` (a child's
// environment additions), except where this process's environment already sets the variable: a
// program that uses multicast can take a shared host's GPUs out of service for a long time. Every
// child that may touch a GPU gets it (the trainer's ranks; every Python worker, in worker/worker.cpp).
void set_multicast_off(std::map<std::string, std::string>& env);

enum class IoStatus { ok, timeout, closed, error };

class Process {
public:
    explicit Process(const SpawnOptions& opts);  // throws std::runtime_error naming the cause
    ~Process();
    Process(const Process&) = delete;
    Process& operator=(const Process&) = delete;

    int pid() const { return pid_; }
    // Writes all of `data` to the child's stdin before `deadline`.
    IoStatus write_all(const std::string& data, Clock::time_point deadline);
    // Reads exactly `n` bytes from the child's stdout before `deadline` (appends to `out`).
    IoStatus read_exact(size_t n, std::string& out, Clock::time_point deadline);
    // SIGKILL to the child's process group, then reap.
    void kill();
    // Sends `sig` to the child's process group (a launcher forwarding Ctrl-C); no reap.
    void signal(int sig);
    // Non-blocking: has the child exited? Fills the exit description once it has.
    bool exited();
    std::string exit_description() const { return exit_description_; }
    // Once exited(): the exit code, or 128 + the signal that killed it (the shell's convention).
    int exit_code() const { return exit_code_; }

private:
    int pid_ = -1;
    int in_fd_ = -1;   // parent writes -> child's stdin
    int out_fd_ = -1;  // child's stdout -> parent reads
    bool reaped_ = false;
    std::string exit_description_;
    int exit_code_ = -1;
    void reap(bool block);
};

std::string describe_wait_status(int status);

}  // namespace kz
