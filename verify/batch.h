// `kernelzero verify --jobs JOBS.jsonl --out RESULTS.jsonl`: a batch of jobs through one verifier (in-process or a
// farm: verify/service.h).
//
// Each input line is {"id", "task", "candidate", "backend"} (paths relative to the jobs file, or
// inline sources). Each result is one line {"id", "job_digest", ...verdict} appended and fsync'ed as
// soon as the job finishes, so a crash or kill loses no finished result. Re-running with the same --out
// skips a job whose id already has a verdict other than infra_error for the same job (job_digest: its
// backend, timeout and sources); the others run, and their earlier lines are removed first, so that
// the file keeps one line per id of the jobs file. Ctrl-C stops dispatching, kills the workers and
// writes nothing for the jobs that were cut short.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "verify/verifier.h"

namespace kz {

struct BatchJob {
    Job job;
    std::string error;  // set when the line itself is unusable: the job gets an early verdict
    int line = 0;
    std::string digest;  // of what its verdict judges: backend, timeout, sources (and the line's error)
};

struct BatchOptions {
    std::string jobs_path, out_path;
    int threads = 2;       // jobs in flight (compile and run stages overlap across them)
    bool progress = true;  // progress bar on stderr
};

struct BatchSummary {
    int total = 0, skipped = 0, done = 0;
    bool interrupted = false;
    std::map<std::string, int> by_status;
};

// Jobs in flight when the user names none: one per lane and compile worker of the started verifier
// (so that compiles overlap runs), at least 2.
int default_in_flight(const VerifyOptions& started);

// Parses a jobs file; lines that are not usable jobs come back with `error` set.
std::vector<BatchJob> read_jobs(const std::string& path);
// The jobs already finished in an existing results file: id -> job_digest of its last verdict other
// than infra_error ("" for a line without one). Malformed or partial lines are ignored.
std::map<std::string, std::string> finished_jobs(const std::string& out_path);

// Runs the batch; `stop` is polled (set by a signal handler) to interrupt.
BatchSummary run_batch(VerifyService& verifier, const BatchOptions& opts, const std::atomic<bool>& stop);

}  // namespace kz
