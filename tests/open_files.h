// How many of this process's file descriptors are open on a file (Linux: /proc/self/fd): a test's
// way to see that an object which failed half-way through its construction closed what it opened.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace kz::testing_util {

inline int open_descriptors_of(const std::string& path) {
    namespace fs = std::filesystem;
    const fs::path target = fs::weakly_canonical(path);
    int n = 0;
    std::error_code ec;
    for (const auto& fd : fs::directory_iterator("/proc/self/fd", ec)) {
        std::error_code link_ec;
        const fs::path to = fs::read_symlink(fd.path(), link_ec);
        if (!link_ec && to == target) ++n;
    }
    return n;
}

}  // namespace kz::testing_util
