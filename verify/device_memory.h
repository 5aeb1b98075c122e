// The verifier's jobs' GPU memory, admitted through a DeviceMemoryBudget (common/memory_budget.h).
//
// Each job's need is known before it is admitted to a device: the task's footprint is measured once
// by the reference worker (with its baselines, cached with them) and turned into what the job's two
// processes hold at most (job_memory). A job is admitted only while the needs of all admitted jobs,
// its own included, fit in the device's capacity; other jobs wait, first come first served (a large
// job is never overtaken indefinitely by small ones). The candidate child's share is also its cap
// (torch's per-process memory fraction): a candidate that needs more fails in its own process, not in
// a neighbour's, and the verifier then runs it again alone (verify/verifier.cpp).
//
// Thread safety: these are values and pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "common/host.h"
#include "common/memory_budget.h"

namespace kz {

// A CUDA context with torch loaded (kernels load lazily), as one process holds it on the device.
constexpr int64_t kCudaContextBytes = 640 * kMiB;
// The timing loop keeps its input sets while all of them fit in this, else makes each again when it
// is needed (sent to the workers with every timing request).
constexpr int64_t kKeptTimingSetBytes = 512 * kMiB;

// What a task holds and allocates on its device, in bytes: parameters and buffers, one input set,
// the storage of its output, and what one forward allocates above its parameters and inputs (the
// output and any workspace). `measured`: by the caching allocator around a real forward (with the
// baselines); otherwise estimated from shapes on the meta device, which sees no workspace.
struct TaskFootprint {
    int64_t params = 0, inputs = 0, outputs = 0, forward = 0;
    bool measured = false;

    // The reference worker's `memory` object (measured = true) or `footprint` reply (false); nullopt
    // when it holds no usable figures (a task that cannot run on the meta device, say).
    static std::optional<TaskFootprint> from_json(const nlohmann::json& j, bool measured);
    nlohmann::json to_json() const;
    // What the reference needs for one forward: parameters, an input set, the forward's allocations.
    int64_t reference_peak() const { return params + inputs + forward; }
};

// The most one job holds on the device, by process.
struct JobMemory {
    // The reference worker: the model, one input set, its own output and forward scratch, and the
    // comparison's scratch (the candidate's output is mapped from the child, counted there).
    int64_t reference = 0;
    // The candidate child: the model, up to three input sets (trial inputs and their snapshot; two
    // timing buffers and the set being refreshed), its forward, the harness's L2-flush and poison
    // blocks, with headroom for a candidate that needs somewhat more than the reference. Also the
    // cap of the child's allocator.
    int64_t candidate = 0;
    int64_t total() const { return reference + candidate; }
    nlohmann::json to_json() const;
};

JobMemory job_memory(const TaskFootprint& f);
// The reference worker measuring the baselines: the model, the timing loop's buffers, eager and
// torch.compile forwards (an estimated footprint gets room for the workspace it cannot see).
int64_t baseline_memory(const TaskFootprint& f);

// What the candidate child of a job holds when its candidate needs what the reference does (the
// reference's own module as the candidate): the model twice while it is built, the input sets the
// harness keeps, the forward, the harness's blocks. job_memory's candidate share is this with headroom.
int64_t honest_candidate_memory(const TaskFootprint& f);

// Whether a candidate that ran out of memory alone on the device "needs clearly more" than the
// reference: it held more than half again what a child running the reference's module holds.
bool clearly_more_than_reference(int64_t candidate_bytes, const TaskFootprint& f);

// What a device offers the verifier's jobs: the memory free when the verifier starts, less the CUDA
// contexts its processes hold once busy (per lane a reference worker, a running child and a spare:
// they open them lazily, after the reading), what others in this process will take later
// (`reserved_bytes`: task validation's workers) and a safety margin. Never negative.
int64_t device_capacity(int64_t total_bytes, int64_t free_bytes, int lanes, int64_t reserved_bytes = 0);

}  // namespace kz
