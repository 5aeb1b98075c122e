#include "train/data_parallel.h"

#include <cstdlib>
#include <stdexcept>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace kz {

namespace {

std::optional<int> env_int(const char* name) {
    const char* v = std::getenv(name);
    if (!v || !*v) return std::nullopt;
    char* end = nullptr;
    long x = std::strtol(v, &end, 10);
    if (*end != '\0' || x < 0 || x > (1 << 30))
        throw std::invalid_argument(std::string(name) + "='" + v + "' is not a non-negative integer");
    return static_cast<int>(x);
}

class ProcessGroup : public Collective {
public:
    ProcessGroup(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<c10d::Backend> pg, int rank, int world,
                 torch::Device device)
        : store_(std::move(store)), pg_(std::move(pg)), rank_(rank), world_(world), device_(device) {}
    torch::Device device() const override { return device_; }
    int rank() const override { return rank_; }
    int world() const override { return world_; }
    void all_reduce_sum(std::vector<torch::Tensor>& tensors) override {
        if (tensors.empty()) return;
        c10d::AllreduceOptions o;
        o.reduceOp = c10d::ReduceOp::SUM;
        // One flat buffer: a collective per tensor would cost a round trip each.
        std::vector<torch::Tensor> flat = {torch::cat(flatten(tensors))};
        pg_->allreduce(flat, o)->wait();
        unflatten(flat[0], tensors);
    }
    void broadcast(std::vector<torch::Tensor>& tensors, int root) override {
        if (tensors.empty()) return;
        c10d::BroadcastOptions o;
        o.rootRank = root;
        std::vector<torch::Tensor> flat = {torch::cat(flatten(tensors))};
        pg_->broadcast(flat, o)->wait();
        unflatten(flat[0], tensors);
    }

private:
    static std::vector<torch::Tensor> flatten(const std::vector<torch::Tensor>& ts) {
        std::vector<torch::Tensor> out;
        // fp32 for the sum (bf16 gradients included), fp64 kept when asked for.
        const auto dt = ts[0].scalar_type() == torch::kFloat64 ? torch::kFloat64 : torch::kFloat32;
        for (const auto& t : ts) out.push_back(t.detach().reshape({-1}).to(dt));
        return out;
    }
    static void unflatten(const torch::Tensor& flat, std::vector<torch::Tensor>& ts) {
        torch::NoGradGuard no_grad;
        int64_t off = 0;
        for (auto& t : ts) {
            const int64_t n = t.numel();
            t.copy_(flat.slice(0, off, off + n).view(t.sizes()));
            off += n;
        }
    }
    c10::intrusive_ptr<c10d::Store> store_;
    c10::intrusive_ptr<c10d::Backend> pg_;
    int rank_, world_;
    torch::Device device_;
};

}  // namespace

std::optional<DistEnv> DistEnv::from_environment() {
    auto world = env_int("WORLD_SIZE");
    if (!world) return std::nullopt;
    DistEnv e;
    e.world = *world;
    e.rank = env_int("RANK").value_or(0);
    e.local_rank = env_int("LOCAL_RANK").value_or(e.rank);
    if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
    e.master_port = env_int("MASTER_PORT").value_or(29500);
    if (e.world < 1) throw std::invalid_argument("WORLD_SIZE must be >= 1");
    if (e.rank >= e.world) throw std::invalid_argument("RANK " + std::to_string(e.rank) + " is outside WORLD_SIZE " + std::to_string(e.world));
    if (e.master_port < 1 || e.master_port > 65535) throw std::invalid_argument("MASTER_PORT must be a TCP port");
    return e;
}

double Collective::sum(double local) {
    std::vector<torch::Tensor> t = {torch::tensor({local}, torch::kFloat64).to(device())};
    all_reduce_sum(t);
    return t[0].item<double>();
}

std::unique_ptr<Collective> make_process_group(const DistEnv& env, const std::string& backend,
                                               std::chrono::seconds timeout) {
    try {
        c10d::TCPStoreOptions so;
        so.port = static_cast<std::uint16_t>(env.master_port);
        so.isServer = env.rank == 0;
        so.numWorkers = static_cast<std::size_t>(env.world);
        so.timeout = timeout;
        auto store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
        c10::intrusive_ptr<c10d::Backend> pg;
        torch::Device device = torch::kCPU;
        if (backend == "gloo") {
            auto o = c10d::ProcessGroupGloo::Options::create(timeout);
            o->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(env.master_addr));
            pg = c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank, env.world, o);
        } else if (backend == "nccl") {
#ifdef USE_C10D_NCCL
            setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
            device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(env.local_rank));
            pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world);
#else
            throw std::runtime_error("this libtorch was built without NCCL");
#endif
        } else {
            throw std::runtime_error("unknown backend '" + backend + "' (gloo or nccl)");
        }
        return std::make_unique<ProcessGroup>(store, pg, env.rank, env.world, device);
    } catch (const c10::Error& e) {
        throw std::runtime_error(backend + " process group (rank " + std::to_string(env.rank) + " of " +
                                 std::to_string(env.world) + ", " + env.master_addr + ":" +
                                 std::to_string(env.master_port) + "): " + e.what_without_backtrace());
    }
}

void all_reduce_gradients(Collective& c, const std::vector<std::pair<std::string, torch::Tensor>>& params) {
    std::vector<torch::Tensor> grads;
    for (const auto& [name, p] : params) {
        if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
        grads.push_back(p.mutable_grad());
    }
    c.all_reduce_sum(grads);
}

}  // namespace kz
