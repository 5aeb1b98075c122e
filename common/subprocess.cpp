#include "common/subprocess.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace kz {

namespace {

int remaining_ms(Clock::time_point deadline) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    return left < 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

// Waits until fd is ready for `events` or the deadline passes.
IoStatus wait_fd(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        pollfd p{fd, events, 0};
        int r = ::poll(&p, 1, remaining_ms(deadline));
        if (r > 0) return IoStatus::ok;
        if (r == 0) return IoStatus::timeout;
        if (errno != EINTR) return IoStatus::error;
    }
}

}  // namespace

std::string describe_wait_status(int status) {
    if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
    if (WIFSIGNALED(status))
        return std::string("killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
               strsignal(WTERMSIG(status)) + ")";
    return "stopped";
}

Process::Process(const SpawnOptions& opts) {
    if (opts.argv.empty()) throw std::runtime_error("spawn: empty argv");
    int in_pipe[2], out_pipe[2];
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) {
        ::close(in_pipe[0]);
        ::close(in_pipe[1]);
        throw std::runtime_error(std::string("pipe: ") + strerror(errno));
    }
    int err_fd = -1;
    if (!opts.stderr_path.empty()) {
        err_fd = ::open(opts.stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (err_fd < 0) {
            for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1]}) ::close(fd);
            throw std::runtime_error("cannot open " + opts.stderr_path + ": " + strerror(errno));
        }
    }
    // Build argv/envp before fork: the child may only call async-signal-safe functions.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e; ++e) {
        std::string s(*e);
        std::string key = s.substr(0, s.find('='));
        bool drop = opts.env_set.count(key) > 0;
        for (const auto& u : opts.env_unset) drop = drop || u == key;
        if (!drop) env_strings.push_back(s);
    }
    for (const auto& [k, v] : opts.env_set) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = opts.argv;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    int exec_err[2];
    if (::pipe2(exec_err, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + strerror(errno));

    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) throw std::runtime_error(std::string("fork: ") + strerror(errno));
    if (pid == 0) {
        ::setpgid(0, 0);
        if (opts.die_with_parent) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
        }
        ::dup2(in_pipe[0], 0);
        if (!opts.inherit_stdout) ::dup2(out_pipe[1], 1);
        if (err_fd >= 0) ::dup2(err_fd, 2);
        if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0) {
            int e = errno;
            (void)!::write(exec_err[1], &e, sizeof e);
            ::_exit(127);
        }
        ::execvpe(argv[0], argv.data(), envp.data());
        int e = errno;
        (void)!::write(exec_err[1], &e, sizeof e);
        ::_exit(127);
    }
    ::setpgid(pid, pid);  // also from the parent, so kill() works even before the child ran
    ::close(exec_err[1]);
    ::close(in_pipe[0]);
    ::close(out_pipe[1]);
    if (err_fd >= 0) ::close(err_fd);
    pid_ = pid;
    in_fd_ = in_pipe[1];
    out_fd_ = out_pipe[0];
    int child_errno = 0;
    ssize_t n;
    do {
        n = ::read(exec_err[0], &child_errno, sizeof child_errno);
    } while (n < 0 && errno == EINTR);
    ::close(exec_err[0]);
    if (n == sizeof child_errno) {
        reap(true);
        ::close(in_fd_);
        ::close(out_fd_);
        in_fd_ = out_fd_ = -1;
        throw std::runtime_error("cannot start " + opts.argv[0] + ": " + strerror(child_errno));
    }
    ::signal(SIGPIPE, SIG_IGN);  // a dead worker must surface as a write error, not kill the controller
}

Process::~Process() {
    kill();
    if (in_fd_ >= 0) ::close(in_fd_);
    if (out_fd_ >= 0) ::close(out_fd_);
}

IoStatus Process::write_all(const std::string& data, Clock::time_point deadline) {
    size_t off = 0;
    while (off < data.size()) {
        IoStatus s = wait_fd(in_fd_, POLLOUT, deadline);
        if (s != IoStatus::ok) return s;
        ssize_t n = ::write(in_fd_, data.data() + off, data.size() - off);
        if (n < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return errno == EPIPE ? IoStatus::closed : IoStatus::error;
        }
        off += static_cast<size_t>(n);
    }
    return IoStatus::ok;
}

IoStatus Process::read_exact(size_t n, std::string& out, Clock::time_point deadline) {
    char buf[65536];
    while (n > 0) {
        IoStatus s = wait_fd(out_fd_, POLLIN, deadline);
        if (s != IoStatus::ok) return s;
        ssize_t r = ::read(out_fd_, buf, std::min(n, sizeof buf));
        if (r < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return IoStatus::error;
        }
        if (r == 0) return IoStatus::closed;
        out.append(buf, static_cast<size_t>(r));
        n -= static_cast<size_t>(r);
    }
    return IoStatus::ok;
}

void Process::kill() {
    if (pid_ <= 0 || reaped_) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    reap(true);
}

void Process::signal(int sig) {
    if (pid_ <= 0 || reaped_) return;
    ::kill(-pid_, sig);
}

bool Process::exited() {
    if (!reaped_) reap(false);
    return reaped_;
}

void Process::reap(bool block) {
    if (reaped_ || pid_ <= 0) return;
    int status = 0;
    pid_t r;
    do {
        r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
    } while (r < 0 && errno == EINTR);
    if (r == pid_) {
        reaped_ = true;
        exit_description_ = describe_wait_status(status);
        exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? 128 + WTERMSIG(status) : -1;
    } else if (r < 0) {
        reaped_ = true;
        exit_description_ = "already reaped";
    }
}

void set_multicast_off(std::map<std::string, std::string>& env) {
    static const std::pair<const char*, const char*> kOff[] = {
        {"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"}};
    for (const auto& [var, off] : kOff)
        if (!std::getenv(var)) env.emplace(var, off);
}

}  // namespace kz
