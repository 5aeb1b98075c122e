// The local launcher of data-parallel ranks (`kernelzero train --nproc-per-node N`): N copies of a
// command, each with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
// MASTER_ADDR = 127.0.0.1, MASTER_PORT = a free port) and NVLink multicast off (set_multicast_off in
// common/subprocess.h). The ranks find each other through train/data_parallel.h; any other
// launcher (torchrun, Slurm, MPI) that sets the same variables works in its place. No torch here.
#pragma once

#include <atomic>
#include <string>
#include <vector>

namespace kz {

// Runs `argv` as ranks 0..nproc-1 and waits for them all. A rank that fails takes the others down
// (SIGKILL: a rank blocked in a collective with a dead peer would otherwise wait for its timeout; the
// trainer's run directory survives any kill). When `interrupt` becomes true (the launcher's Ctrl-C),
// SIGINT is forwarded to every rank once and they are waited for. Returns 0 when every rank exited 0,
// else the first failing rank's exit code (128 + signal when killed). Throws std::runtime_error when a
// rank cannot be started.
int launch_local_ranks(int nproc, const std::vector<std::string>& argv, const std::atomic<bool>& interrupt);

}  // namespace kz
