#include "train/checkpoint_series.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>

namespace kz {

namespace fs = std::filesystem;

CheckpointSeries::CheckpointSeries(std::string dir, std::string prefix)
    : dir_(std::move(dir)), prefix_(std::move(prefix)) {
    fs::create_directories(dir_);
    for (const auto& e : fs::directory_iterator(dir_)) {
        const std::string n = e.path().filename().string();
        if (n.rfind(prefix_, 0) == 0 && n.find(".tmp") != std::string::npos) fs::remove_all(e.path());
    }
}

std::string CheckpointSeries::path(const std::string& dir, const std::string& prefix, int64_t n) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%06lld", static_cast<long long>(n));
    return dir + "/" + prefix + buf;
}

std::vector<int64_t> CheckpointSeries::complete() const {
    std::vector<int64_t> out;
    for (const auto& e : fs::directory_iterator(dir_)) {
        const std::string n = e.path().filename().string();
        if (n.rfind(prefix_, 0) != 0 || n.find(".tmp") != std::string::npos || !e.is_directory()) continue;
        try {
            out.push_back(std::stoll(n.substr(prefix_.size())));
        } catch (const std::exception&) {}
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::optional<int64_t> CheckpointSeries::latest() const {
    const std::vector<int64_t> all = complete();
    if (all.empty()) return std::nullopt;
    return all.back();
}

std::string CheckpointSeries::begin(int64_t n) const {
    if (fs::exists(path(n))) throw std::runtime_error("checkpoint " + path(n) + " already exists");
    std::string tmp = path(n) + ".tmp";
    fs::remove_all(tmp);
    fs::create_directories(tmp);
    return tmp;
}

void CheckpointSeries::finish(int64_t n, const std::string& tmp) const {
    // Everything under tmp was written with write-then-rename (common/files.h), so a rename of the
    // directory publishes a complete checkpoint; fsync the parent so the rename itself survives.
    fs::rename(tmp, path(n));
    int fd = ::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
        ::fsync(fd);
        ::close(fd);
    }
}

void CheckpointSeries::prune(int keep) const {
    if (keep <= 0) return;
    const std::vector<int64_t> all = complete();
    for (size_t i = 0; i + static_cast<size_t>(keep) < all.size(); ++i) fs::remove_all(path(all[i]));
}

}  // namespace kz
