// A directory of numbered checkpoints (<dir>/<prefix>NNNNNN/), each written under a temporary name
// and renamed into place, so a directory with its final name is complete: a process killed while
// writing one leaves only a "<name>.tmp" that the next opener removes. The trainer's run directory
// keeps one per iteration (iter-), SFT one per epoch and at an interruption (step-). No torch here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kz {

class CheckpointSeries {
public:
    // Creates `dir` if needed and removes what a killed writer left in it.
    CheckpointSeries(std::string dir, std::string prefix);

    const std::string& dir() const { return dir_; }
    std::string path(int64_t n) const { return path(dir_, prefix_, n); }
    static std::string path(const std::string& dir, const std::string& prefix, int64_t n);

    std::vector<int64_t> complete() const;  // ascending
    std::optional<int64_t> latest() const;

    // Writes checkpoint n through `write(tmp_dir)` and renames it into place. An existing complete
    // checkpoint n is an error (nothing is replaced).
    template <class F>
    void commit(int64_t n, F&& write) {
        std::string tmp = begin(n);
        write(tmp);
        finish(n, tmp);
    }

    // Removes the complete checkpoints older than the newest `keep` (keep <= 0: none removed).
    void prune(int keep) const;

private:
    std::string begin(int64_t n) const;
    void finish(int64_t n, const std::string& tmp) const;
    std::string dir_, prefix_;
};

}  // namespace kz
