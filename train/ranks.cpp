#include "train/ranks.h"

#include <stdexcept>

#include "train/data_parallel.h"
#include "train/policy.h"

namespace kz {

using json = nlohmann::json;

Ranks::Ranks(Collective* dp) : dp_(dp), rank_(dp ? dp->rank() : 0), world_(dp ? dp->world() : 1) {}

bool Ranks::stopping(const std::atomic<bool>& stop) const { return dp_ ? dp_->sum(stop ? 1.0 : 0.0) > 0 : stop.load(); }

json Ranks::from_leader(const json& j) const {
    if (!dp_) return j;
    return json::parse(dp_->broadcast_bytes(leader() ? j.dump(-1, ' ', false, json::error_handler_t::replace) : ""));
}

std::vector<json> Ranks::gather(const json& local) const {
    if (!dp_) return {local};
    std::vector<json> out;
    for (const auto& b : dp_->all_gather_bytes(local.dump(-1, ' ', false, json::error_handler_t::replace)))
        out.push_back(json::parse(b));
    return out;
}

std::pair<size_t, size_t> Ranks::block(size_t n) const {
    return {n * static_cast<size_t>(rank_) / static_cast<size_t>(world_),
            n * static_cast<size_t>(rank_ + 1) / static_cast<size_t>(world_)};
}

double Ranks::sum(double local) const { return dp_ ? dp_->sum(local) : local; }

void Ranks::barrier(const std::string& name, std::chrono::seconds timeout) const {
    if (dp_) dp_->barrier(name, timeout);
}

void Ranks::check_same_weights(Policy& p) const {
    if (!dp_) return;
    torch::NoGradGuard no_grad;
    double sum = 0;
    for (const auto& [name, t] : p.optimizer().params()) sum += t.sum(torch::kFloat64).item<double>();
    auto all = gather(json(sum));
    for (int r = 1; r < world_; ++r)
        if (all[static_cast<size_t>(r)] != all[0])
            throw std::runtime_error("rank " + std::to_string(r) + "'s " + p.name() +
                                     " weights differ from rank 0's (checksums " + all[static_cast<size_t>(r)].dump() +
                                     " vs " + all[0].dump() + "): the ranks loaded different models or adapters");
}

void Ranks::share_weights(Policy& p) const {
    if (!dp_) return;
    std::vector<torch::Tensor> ts;
    for (const auto& [name, t] : p.optimizer().params()) ts.push_back(t);
    dp_->broadcast(ts, 0);
    p.reset_optimizer();
}

}  // namespace kz
