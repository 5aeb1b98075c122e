// Data parallelism across processes (design section 9): one process per GPU (or CPU rank), PyTorch's
// c10d process groups, NCCL on GPUs and gloo on the CPU, set up from torchrun-style environment
// variables (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT) so that torchrun, Slurm or MPI
// launchers work unchanged. What the trainer needs of it: sums across ranks (gradients, token counts),
// broadcasts (rank 0's weights, rank 0's decisions), all-gathers of serialised records (every rank's
// rollouts and verdicts) and a barrier that may wait long (while rank 0 alone evaluates).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace kz {

struct DistEnv {
    int rank = 0, world = 1, local_rank = 0;
    int local_world = 1;  // ranks on this host: LOCAL_WORLD_SIZE (torchrun sets it), else the whole world
    std::string master_addr = "127.0.0.1";
    int master_port = 29500;
    // The launcher's variables; nullopt when WORLD_SIZE is unset. Throws std::invalid_argument naming
    // a variable that is set but malformed (or a rank outside the world).
    static std::optional<DistEnv> from_environment();
};

// One GPU per rank: narrows CUDA_VISIBLE_DEVICES to this rank's device (entry LOCAL_RANK of the
// launcher's list, or device LOCAL_RANK when unset), so that the rank's models, its verifier's
// workers and its NCCL communicator all see that GPU as cuda:0. Must run before CUDA is initialised.
// Throws std::invalid_argument when LOCAL_RANK is past the listed devices.
void bind_local_device(const DistEnv& env);

// The ranks' collective operations. Every rank must make the same calls in the same order.
class Collective {
public:
    virtual ~Collective() = default;
    virtual int rank() const = 0;
    virtual int world() const = 0;
    virtual torch::Device device() const = 0;  // where its tensors live: the CPU (gloo) or this rank's GPU
    // In place: each tensor becomes the sum of that tensor over the ranks.
    virtual void all_reduce_sum(std::vector<torch::Tensor>& tensors) = 0;
    // In place: each tensor becomes rank `root`'s.
    virtual void broadcast(std::vector<torch::Tensor>& tensors, int root = 0) = 0;
    // Every rank's `local`, in rank order (any lengths).
    virtual std::vector<std::string> all_gather_bytes(const std::string& local) = 0;
    // Rank `root`'s `data` on every rank (the others' argument is ignored).
    virtual std::string broadcast_bytes(const std::string& data, int root = 0) = 0;
    // Returns once every rank has called barrier(name); `name` is used once per run. Waits through the
    // store, not the backend, so that it may wait longer than a collective's timeout. Throws
    // std::runtime_error after `timeout`.
    virtual void barrier(const std::string& name, std::chrono::seconds timeout) = 0;
    // Adds `delta` to the counter `name` that all ranks share (0 at first) and returns its new value
    // (delta 0 reads it). Thread-safe; not collective (ranks may call it any number of times).
    virtual int64_t add(const std::string& name, int64_t delta) = 0;
    // The next number (0, 1, 2, ...) of the sequence `name`: every number goes to exactly one caller,
    // whichever rank and thread asks first (work shared out as it is taken, not in fixed blocks).
    int64_t claim(const std::string& name) { return add("claim/" + name, 1) - 1; }
    // Makes `value` readable by every rank under `key` (written once per run). Thread-safe; not collective.
    virtual void publish(const std::string& key, const std::string& value) = 0;
    // The value published under `key`, once some rank has (polls the store, so that other threads'
    // store calls go on meanwhile). Throws std::runtime_error naming the key after `timeout`.
    virtual std::string await(const std::string& key, std::chrono::seconds timeout) = 0;
    double sum(double local);  // all_reduce_sum of one number
};

// A c10d process group: "gloo" (CPU tensors) or "nccl" (tensors on `cuda_device`). Rank 0 hosts the
// TCP store at master_addr:master_port; the others connect to it (within `timeout`, also each
// collective's limit). NVLink multicast is turned off (set_multicast_off in common/subprocess.h)
// unless the environment sets it. Throws std::runtime_error naming the backend and the cause.
std::unique_ptr<Collective> make_process_group(const DistEnv& env, const std::string& backend,
                                               std::chrono::seconds timeout = std::chrono::seconds(300),
                                               int cuda_device = 0);

// Averages or sums the gradients of `params` across the ranks: a parameter without a gradient on this
// rank contributes zeros (every rank must all-reduce the same list).
void all_reduce_gradients(Collective& c, const std::vector<std::pair<std::string, torch::Tensor>>& params);

}  // namespace kz
