// A training run's directory and what it records (design 6.5: a run killed at any point resumes
// from its last checkpoint without losing recorded data):
//   run.json          run id, the resolved configuration, creation time (a resume must match it)
//   run.lock          flock'ed while a trainer owns the directory (a second one is refused)
//   rollouts.jsonl    rollout records (train/rollout_log.h), appended durably per step
//   metrics.jsonl     one object per finished iteration (rewards, pass rates, speedups, gate
//                     open-rate, frontier size and band occupancy, tokens/s, verifier throughput,
//                     stage times), appended durably
//   run.sqlite        the same metrics (table `metrics`) and stage times (table `stages`)
//   checkpoints/iter-NNNNNN/   one per finished iteration, written to a temporary name and renamed:
//                     a directory with that name is complete
//   eval/iter-NNNNNN/ the evaluation's bench run directory
// No torch here.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/files.h"
#include "common/sqlite_db.h"
#include "train/checkpoint_series.h"

namespace kz {

class RunDir {
public:
    // Creates the directory (or opens it with resume = true) and takes its lock. Throws
    // std::runtime_error naming the cause: a directory that already holds a run without --resume,
    // --resume on a directory without one, a configuration that differs from the recorded one
    // (keys other than `iterations` and the budgets), a lock held by another trainer. `defaults`, the
    // configuration's defaults in config's shape: a key the recorded configuration lacks (a setting
    // added since the run began) is taken as recorded where config holds its default there.
    RunDir(const std::string& path, const nlohmann::json& config, bool resume,
           const nlohmann::json& defaults = nlohmann::json::object());
    RunDir(const RunDir&) = delete;
    RunDir& operator=(const RunDir&) = delete;

    const std::string& path() const { return path_; }
    const std::string& run_id() const { return run_id_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }
    std::string rollouts_path() const { return file("rollouts.jsonl"); }
    std::string checkpoint_dir(int64_t iteration) const { return checkpoint_path(path_, iteration); }
    // The same for a run directory this process does not own (a data-parallel rank other than 0).
    static std::string checkpoint_path(const std::string& run_path, int64_t iteration);
    std::string eval_dir(int64_t iteration) const;

    // The newest complete checkpoint's iteration (nullopt: none yet).
    std::optional<int64_t> latest_checkpoint() const { return checkpoints_->latest(); }
    // Writes the checkpoint through `write(tmp_dir)` and renames it into place (CheckpointSeries).
    template <class F>
    void commit_checkpoint(int64_t iteration, F&& write) {
        checkpoints_->commit(iteration, std::forward<F>(write));
    }

    // Removes the complete checkpoints older than the newest `keep` (keep <= 0: none removed).
    void prune_checkpoints(int keep) { checkpoints_->prune(keep); }

    // An iteration's metrics: appended to metrics.jsonl (unless a line for the iteration is already
    // there) and upserted into run.sqlite with its stage times.
    void record_metrics(int64_t iteration, const nlohmann::json& metrics);
    std::vector<nlohmann::json> metrics() const;  // metrics.jsonl, in order

private:
    std::string path_, run_id_;
    std::optional<CheckpointSeries> checkpoints_;  // opened once the lock is held
    std::optional<FileLock> lock_;
    SqliteDb db_;  // declared last: closed before the lock goes
};

// Stage timing: named, timed stages of one iteration, in order.
class StageTimer {
public:
    // Runs f() as the named stage, prints "[train] iter K stage ... s" to stderr, keeps the time.
    template <class F>
    auto run(const std::string& name, F&& f) {
        start(name);
        struct Stop {
            StageTimer* t;
            ~Stop() { t->stop(); }
        } s{this};
        return f();
    }
    nlohmann::json to_json() const;  // {"<stage>": seconds, ...} in order
    void reset(int64_t iteration);

private:
    void start(const std::string& name);
    void stop();
    int64_t iteration_ = 0;
    std::vector<std::pair<std::string, double>> stages_;
    std::string current_;
    double t0_ = 0;
};

// Whether StageTimer and Progress print (data-parallel ranks other than 0 stay quiet). Default on.
void set_train_output(bool enabled);

// A one-line progress bar on stderr for long stages ("[train] <label> 3/8"), redrawn in place on a
// terminal, printed at the end otherwise.
class Progress {
public:
    Progress(std::string label, int64_t total);
    void advance(int64_t n = 1);
    ~Progress();

private:
    std::string label_;
    int64_t total_, done_ = 0;
    bool tty_, quiet_;
};

}  // namespace kz
