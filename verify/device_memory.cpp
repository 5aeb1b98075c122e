#include "verify/device_memory.h"

#include <algorithm>

namespace kz {

using nlohmann::json;

namespace {

// The candidate child's own blocks: the L2 flush (four times the L2 size), the poison blocks (two
// of each size up to 256 MiB), cuBLAS's workspace.
constexpr int64_t kHarnessBlocks = kGiB;
// The reference's comparison: a few float64 copies of one chunk (harness.COMPARE_CHUNK elements).
constexpr int64_t kCompareScratch = 768 * kMiB;
// The caching allocator rounds blocks up and fragments: what it holds exceeds what is allocated.
constexpr double kAllocatorSlack = 1.10;
constexpr int64_t kAllocatorFloor = 256 * kMiB;
// A candidate may need somewhat more than the reference (its own buffers, other algorithms).
constexpr double kCandidateHeadroom = 1.5;

int64_t with_slack(int64_t bytes) {
    return static_cast<int64_t>(static_cast<double>(bytes) * kAllocatorSlack) + kAllocatorFloor;
}

// A byte count from a worker's reply; -1 when absent, negative or beyond any device (2^50).
int64_t bytes_of(const json& j, const char* key) {
    if (!j.contains(key) || !j[key].is_number()) return -1;
    const double v = j[key].get<double>();
    return v < 0 || v > 0x1p50 ? -1 : static_cast<int64_t>(v);
}

}  // namespace

std::optional<TaskFootprint> TaskFootprint::from_json(const json& j, bool measured) {
    if (!j.is_object() || j.value("estimated", true) == false) return std::nullopt;
    TaskFootprint f;
    f.params = bytes_of(j, "params");
    f.inputs = bytes_of(j, "inputs");
    f.outputs = bytes_of(j, "outputs");
    f.forward = bytes_of(j, "forward");
    if (f.params < 0 || f.inputs < 0 || f.outputs < 0 || f.forward < 0) return std::nullopt;
    f.measured = measured;
    return f;
}

json TaskFootprint::to_json() const {
    return {{"params", params}, {"inputs", inputs}, {"outputs", outputs}, {"forward", forward}, {"measured", measured}};
}

json JobMemory::to_json() const { return {{"reference", reference}, {"candidate", candidate}}; }

int64_t honest_candidate_memory(const TaskFootprint& f) {
    const int64_t kept_sets = std::min<int64_t>(3 * f.inputs, kKeptTimingSetBytes);
    return with_slack(2 * f.params + 3 * f.inputs + f.forward + kHarnessBlocks + kept_sets);
}

JobMemory job_memory(const TaskFootprint& f) {
    JobMemory m;
    m.reference = with_slack(f.params + f.inputs + f.forward + kCompareScratch);
    m.candidate = static_cast<int64_t>(static_cast<double>(honest_candidate_memory(f)) * kCandidateHeadroom);
    return m;
}

int64_t baseline_memory(const TaskFootprint& f) {
    // An estimate from shapes sees no workspace: room for it, as much as the output again and a GiB.
    const int64_t forward = f.measured ? f.forward : 2 * std::max(f.forward, f.outputs) + kGiB;
    const int64_t kept_sets = std::min<int64_t>(3 * f.inputs, kKeptTimingSetBytes);
    return with_slack(f.params + 3 * f.inputs + kept_sets + 2 * forward + kHarnessBlocks / 2);
}

bool clearly_more_than_reference(int64_t candidate_bytes, const TaskFootprint& f) {
    return static_cast<double>(candidate_bytes) > 1.5 * static_cast<double>(honest_candidate_memory(f));
}

int64_t device_capacity(int64_t total_bytes, int64_t free_bytes, int lanes, int64_t reserved_bytes) {
    const int64_t margin = std::max<int64_t>(2 * kGiB, total_bytes / 25);
    return std::max<int64_t>(0, free_bytes - 3 * static_cast<int64_t>(std::max(lanes, 0)) * kCudaContextBytes -
                                    std::max<int64_t>(0, reserved_bytes) - margin);
}

}  // namespace kz
