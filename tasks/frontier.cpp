#include "tasks/frontier.h"

#include <algorithm>
#include <array>
#include <functional>
#include <cmath>
#include <numeric>
#include <set>

#include "tasks/similarity.h"
#include "tasks/task_store.h"

namespace kz {

FrontierTracker::FrontierTracker(FrontierOptions opts) : opts_(opts) {}

std::string FrontierTracker::pair_key(const std::string& a, const std::string& b) {
    return a < b ? a + "|" + b : b + "|" + a;
}

BetaStat FrontierTracker::get(const std::string& key) const {
    auto it = stats_.find(key);
    return it == stats_.end() ? BetaStat{} : it->second;
}

void FrontierTracker::update(const std::vector<std::string>& apis, int passed, int samples) {
    std::set<std::string> keys(apis.begin(), apis.end());
    std::vector<std::string> uniq(keys.begin(), keys.end());
    for (size_t i = 0; i < uniq.size(); ++i)
        for (size_t j = i + 1; j < uniq.size(); ++j) keys.insert(pair_key(uniq[i], uniq[j]));
    const double g = opts_.forgetting;
    for (const auto& k : keys) {
        BetaStat& s = stats_[k];
        s.alpha = 1.0 + g * (s.alpha - 1.0) + passed;
        s.beta = 1.0 + g * (s.beta - 1.0) + (samples - passed);
        s.seen = g * s.seen + samples;
    }
}

namespace {

double beta_draw(const BetaStat& s, std::mt19937_64& rng) {
    std::gamma_distribution<double> ga(s.alpha, 1.0), gb(s.beta, 1.0);
    double x = ga(rng), y = gb(rng);
    return x + y > 0 ? x / (x + y) : 0.5;
}

}  // namespace

ApiSet FrontierTracker::draw(const ApiCatalog& catalog, int level, std::mt19937_64& rng) const {
    if (std::uniform_real_distribution<double>(0, 1)(rng) < opts_.explore) {
        // Exploration: a set whose first API is among the least seen.
        std::vector<std::pair<double, std::string>> by_seen;
        for (const auto& a : catalog.apis()) by_seen.emplace_back(get(a.name).seen, a.name);
        std::shuffle(by_seen.begin(), by_seen.end(), rng);
        std::stable_sort(by_seen.begin(), by_seen.end(), [](auto& x, auto& y) { return x.first < y.first; });
        ApiSet s = sample_api_set(catalog, level, rng);
        s.apis[0] = by_seen.front().second;
        std::sort(s.apis.begin() + 1, s.apis.end());
        s.apis.erase(std::unique(s.apis.begin(), s.apis.end()), s.apis.end());
        s.apis.erase(std::remove(s.apis.begin() + 1, s.apis.end(), s.apis[0]), s.apis.end());
        return s;
    }
    ApiSet best;
    double best_gap = 2.0;
    for (int c = 0; c < opts_.candidates; ++c) {
        ApiSet s = sample_api_set(catalog, level, rng);
        std::vector<double> draws;
        for (size_t i = 0; i < s.apis.size(); ++i) {
            draws.push_back(beta_draw(get(s.apis[i]), rng));
            for (size_t j = i + 1; j < s.apis.size(); ++j)
                draws.push_back(beta_draw(get(pair_key(s.apis[i], s.apis[j])), rng));
        }
        double p = std::accumulate(draws.begin(), draws.end(), 0.0) / static_cast<double>(draws.size());
        double gap = std::abs(p - opts_.target);
        if (gap < best_gap) best_gap = gap, best = s;
    }
    return best;
}

void FrontierTracker::load(const TaskStore& store) {
    stats_.clear();
    for (const auto& [key, s] : store.frontier()) stats_[key] = {s[0], s[1], s[2]};
}

void FrontierTracker::save(TaskStore& store) const {
    std::map<std::string, std::array<double, 3>> rows;
    for (const auto& [k, s] : stats_) rows[k] = {s.alpha, s.beta, s.seen};
    store.save_frontier(rows);
}

nlohmann::json FrontierTracker::to_json() const {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& [k, s] : stats_) j[k] = {s.alpha, s.beta, s.seen};
    return j;
}

void FrontierTracker::from_json(const nlohmann::json& j) {
    if (!j.is_object()) throw std::invalid_argument("frontier state must be an object");
    std::map<std::string, BetaStat> stats;
    for (const auto& [k, v] : j.items()) {
        if (!v.is_array() || v.size() != 3)
            throw std::invalid_argument("frontier state of '" + k + "' must be [alpha, beta, seen]");
        stats[k] = {v[0].get<double>(), v[1].get<double>(), v[2].get<double>()};
    }
    stats_ = std::move(stats);
}

std::vector<double> proposer_rewards(const std::vector<ProposalOutcome>& batch, double target, double lambda_rep) {
    std::map<int, int> cluster_size;
    for (const auto& p : batch)
        if (p.cluster >= 0) cluster_size[p.cluster] += 1;
    const double denom = std::max(target, 1.0 - target);
    std::vector<double> r;
    for (const auto& p : batch) {
        if (!p.parsed) {
            r.push_back(-1.0);
        } else if (!p.valid) {
            r.push_back(0.0);
        } else {
            double rep =
                p.cluster >= 0 ? static_cast<double>(cluster_size[p.cluster]) / static_cast<double>(batch.size()) : 0.0;
            r.push_back(1.0 - std::abs(p.pass_rate - target) / denom - lambda_rep * rep);
        }
    }
    return r;
}

std::vector<int> near_duplicate_clusters(const std::vector<std::string>& sources, double threshold) {
    const size_t n = sources.size();
    std::vector<int> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
    std::vector<std::set<std::string>> sh;
    std::vector<std::string> nh;
    for (const auto& s : sources) {
        sh.push_back(shingles(s));
        nh.push_back(normalised_hash(s));
    }
    for (size_t i = 0; i < n; ++i)
        for (size_t j = i + 1; j < n; ++j)
            if (nh[i] == nh[j] || jaccard(sh[i], sh[j]) >= threshold)
                parent[find(static_cast<int>(i))] = find(static_cast<int>(j));
    std::map<int, int> ids;
    std::vector<int> out;
    for (size_t i = 0; i < n; ++i) {
        int root = find(static_cast<int>(i));
        auto it = ids.find(root);
        if (it == ids.end()) it = ids.emplace(root, static_cast<int>(ids.size())).first;
        out.push_back(it->second);
    }
    return out;
}

}  // namespace kz
