#include "train/data_parallel.h"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#ifdef USE_C10D_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include "common/subprocess.h"

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
    // NCCL's communicators are released here (what destroy_process_group does in Python).
    ~ProcessGroup() override {
        try {
            pg_->shutdown();
        } catch (const std::exception&) {  // a peer already gone: nothing left to release cleanly
        }
    }
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

    std::vector<std::string> all_gather_bytes(const std::string& local) override {
        // Lengths first, then every rank's bytes padded to the longest (allgather wants equal sizes).
        auto i64 = torch::TensorOptions().dtype(torch::kInt64).device(device_);
        std::vector<torch::Tensor> len = {
            torch::tensor({static_cast<int64_t>(local.size())}, torch::kInt64).to(device_)};
        std::vector<std::vector<torch::Tensor>> lens(1);
        for (int r = 0; r < world_; ++r) lens[0].push_back(torch::zeros({1}, i64));
        pg_->allgather(lens, len)->wait();
        std::vector<int64_t> n;
        int64_t longest = 1;
        for (const auto& t : lens[0]) n.push_back(t.cpu().item<int64_t>()), longest = std::max(longest, n.back());
        std::vector<torch::Tensor> mine = {padded(local, longest)};
        std::vector<std::vector<torch::Tensor>> all(1);
        for (int r = 0; r < world_; ++r) all[0].push_back(torch::empty({longest}, i64.dtype(torch::kUInt8)));
        pg_->allgather(all, mine)->wait();
        std::vector<std::string> out;
        for (int r = 0; r < world_; ++r) {
            auto c = all[0][static_cast<size_t>(r)].cpu();
            out.emplace_back(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()),
                             static_cast<size_t>(n[static_cast<size_t>(r)]));
        }
        return out;
    }
    std::string broadcast_bytes(const std::string& data, int root) override {
        c10d::BroadcastOptions o;
        o.rootRank = root;
        std::vector<torch::Tensor> len = {
            torch::tensor({static_cast<int64_t>(data.size())}, torch::kInt64).to(device_)};
        pg_->broadcast(len, o)->wait();
        const int64_t n = len[0].cpu().item<int64_t>();
        std::vector<torch::Tensor> bytes = {padded(rank_ == root ? data : std::string(), std::max<int64_t>(n, 1))};
        pg_->broadcast(bytes, o)->wait();
        auto c = bytes[0].cpu();
        return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), static_cast<size_t>(n));
    }
    void barrier(const std::string& name, std::chrono::seconds timeout) override {
        const std::string in = "kz/barrier/" + name, out = in + "/out";
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        auto wait_for = [&](const std::string& key, int64_t n) {
            while (store_->add(key, 0) < n) {
                if (std::chrono::steady_clock::now() > deadline)
                    throw std::runtime_error("barrier '" + name + "': not every rank arrived within " +
                                             std::to_string(timeout.count()) + " s");
                std::this_thread::sleep_for(std::chrono::milliseconds(50));
            }
        };
        store_->add(in, 1);
        wait_for(in, world_);
        // Rank 0 hosts the store: it leaves last, so that no rank still polling finds it gone.
        if (rank_ == 0)
            wait_for(out, world_ - 1);
        else
            store_->add(out, 1);
    }

    int64_t add(const std::string& name, int64_t delta) override { return store_->add("kz/counter/" + name, delta); }

    void publish(const std::string& key, const std::string& value) override {
        store_->set("kz/value/" + key, std::vector<uint8_t>(value.begin(), value.end()));
    }
    std::string await(const std::string& key, std::chrono::seconds timeout) override {
        const std::string k = "kz/value/" + key;
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        // Not the store's blocking wait: it would hold the connection that this rank's other threads share.
        while (!store_->check({k})) {
            if (std::chrono::steady_clock::now() > deadline)
                throw std::runtime_error("'" + key + "' was not published by any rank within " +
                                         std::to_string(timeout.count()) + " s");
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        const std::vector<uint8_t> v = store_->get(k);
        return std::string(v.begin(), v.end());
    }

private:
    torch::Tensor padded(const std::string& s, int64_t n) const {
        auto t = torch::zeros({n}, torch::kUInt8);
        if (!s.empty()) std::memcpy(t.data_ptr<uint8_t>(), s.data(), s.size());
        return t.to(device_);
    }
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
    e.local_world = env_int("LOCAL_WORLD_SIZE").value_or(e.world);
    if (const char* a = std::getenv("MASTER_ADDR"); a && *a) e.master_addr = a;
    e.master_port = env_int("MASTER_PORT").value_or(29500);
    if (e.world < 1) throw std::invalid_argument("WORLD_SIZE must be >= 1");
    if (e.local_world < 1 || e.local_world > e.world)
        throw std::invalid_argument("LOCAL_WORLD_SIZE must be in 1..WORLD_SIZE");
    if (e.rank >= e.world)
        throw std::invalid_argument("RANK " + std::to_string(e.rank) + " is outside WORLD_SIZE " +
                                    std::to_string(e.world));
    if (e.master_port < 1 || e.master_port > 65535) throw std::invalid_argument("MASTER_PORT must be a TCP port");
    return e;
}

void bind_local_device(const DistEnv& env) {
    std::vector<std::string> devices;
    if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES"); v && *v) {
        std::stringstream ss(v);
        for (std::string d; std::getline(ss, d, ',');) devices.push_back(d);
        if (devices.size() == 1) return;  // already one device per process (a launcher did it)
        if (env.local_rank >= static_cast<int>(devices.size()))
            throw std::invalid_argument("LOCAL_RANK " + std::to_string(env.local_rank) +
                                        " but CUDA_VISIBLE_DEVICES lists " + std::to_string(devices.size()) +
                                        " device(s): '" + v + "'");
        setenv("CUDA_VISIBLE_DEVICES", devices[static_cast<size_t>(env.local_rank)].c_str(), 1);
    } else {
        setenv("CUDA_VISIBLE_DEVICES", std::to_string(env.local_rank).c_str(), 1);
    }
}

double Collective::sum(double local) {
    std::vector<torch::Tensor> t = {torch::tensor({local}, torch::kFloat64).to(device())};
    all_reduce_sum(t);
    return t[0].item<double>();
}

std::unique_ptr<Collective> make_process_group(const DistEnv& env, const std::string& backend,
                                               std::chrono::seconds timeout, int cuda_device) {
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
            std::map<std::string, std::string> off;
            set_multicast_off(off);
            for (const auto& [var, value] : off) setenv(var.c_str(), value.c_str(), /*overwrite=*/0);
            device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(cuda_device));
            auto o = c10d::ProcessGroupNCCL::Options::create();
            o->timeout = timeout;
            pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world, o);
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
