#include "tasks/frontier.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/files.h"
#include "tasks/task_store.h"

namespace {

kz::ApiCatalog catalog() { return kz::ApiCatalog::load(std::string(KZ_SOURCE_DIR) + "/tasks/api_catalog.json"); }

}  // namespace

// A simulated Coder with a true pass rate per API; level-1 tasks with G = 8 samples each. Stated
// error: every API's posterior mean within 0.1 of the truth after 3,000 tasks.
TEST(Frontier, RecoversSimulatedPassRates) {
    auto cat = catalog();
    std::mt19937_64 rng(1);
    std::map<std::string, double> truth;
    std::uniform_real_distribution<double> u(0.05, 0.95);
    std::vector<std::string> apis;
    for (size_t i = 0; i < 30; ++i) {
        apis.push_back(cat.apis()[i * 5].name);
        truth[apis.back()] = u(rng);
    }
    kz::FrontierTracker t;
    for (int k = 0; k < 3000; ++k) {
        const std::string& a = apis[k % apis.size()];
        std::binomial_distribution<int> b(8, truth[a]);
        t.update({a}, b(rng), 8);
    }
    double worst = 0;
    for (const auto& a : apis) worst = std::max(worst, std::abs(t.get(a).mean() - truth[a]));
    EXPECT_LT(worst, 0.1);
}

TEST(Frontier, ForgettingFollowsAnImprovingCoder) {
    kz::FrontierOptions o;
    o.forgetting = 0.99;
    kz::FrontierTracker t(o);
    for (int k = 0; k < 300; ++k) t.update({"relu", "softmax"}, 2, 10);  // 0.2
    EXPECT_NEAR(t.get("relu").mean(), 0.2, 0.05);
    for (int k = 0; k < 500; ++k) t.update({"relu", "softmax"}, 8, 10);  // the Coder improved: 0.8
    EXPECT_NEAR(t.get("relu").mean(), 0.8, 0.05);
    EXPECT_NEAR(t.get(kz::FrontierTracker::pair_key("softmax", "relu")).mean(), 0.8, 0.05);
    EXPECT_LT(t.get("relu").seen, 1000.0);  // decayed, not 8,000
}

TEST(Frontier, ThompsonDrawsAimAtTheTarget) {
    auto cat = catalog();
    kz::FrontierOptions o;
    o.explore = 0.0;
    kz::FrontierTracker t(o);
    std::set<std::string> middle;
    for (size_t i = 0; i < cat.apis().size(); ++i) {
        const auto& a = cat.apis()[i].name;
        bool mid = i % 16 == 0;
        if (mid) middle.insert(a);
        for (int k = 0; k < 20; ++k) t.update({a}, mid ? 5 : (i % 2 ? 10 : 0), 10);
    }
    std::mt19937_64 rng(3);
    int hits = 0;
    for (int k = 0; k < 300; ++k) hits += middle.count(t.draw(cat, 1, rng).apis[0]);
    // Uniform draws would hit ~6% (11 of 162 APIs); the sampler should mostly find them.
    EXPECT_GT(hits, 120);
}

TEST(Frontier, SavedAndLoadedThroughTheStore) {
    std::string dir = kz::make_temp_dir(std::filesystem::temp_directory_path().string(), "kz-frontier-");
    {
        kz::TaskStore s(dir + "/t.db");
        kz::FrontierTracker t;
        t.update({"relu", "sum"}, 3, 4);
        t.save(s);
        kz::FrontierTracker u;
        u.load(s);
        EXPECT_DOUBLE_EQ(u.get("relu").alpha, t.get("relu").alpha);
        EXPECT_DOUBLE_EQ(u.get("relu|sum").beta, t.get("relu|sum").beta);
        EXPECT_EQ(u.stats().size(), 3u);
    }
    std::filesystem::remove_all(dir);
}

TEST(ProposerReward, HandComputedValues) {
    using P = kz::ProposalOutcome;
    std::vector<P> batch = {{false, false, 0, -1},
                            {true, false, 0.5, -1},
                            {true, true, 0.5, 0},
                            {true, true, 0.2, 1},
                            {true, true, 1.0, 2}};
    auto r = kz::proposer_rewards(batch, 0.5, 0.0);
    EXPECT_DOUBLE_EQ(r[0], -1.0);
    EXPECT_DOUBLE_EQ(r[1], 0.0);
    EXPECT_DOUBLE_EQ(r[2], 1.0);
    EXPECT_NEAR(r[3], 0.4, 1e-12);  // 1 - |0.2 - 0.5| / 0.5
    EXPECT_NEAR(r[4], 0.0, 1e-12);
    r = kz::proposer_rewards({{true, true, 0.3, 0}, {true, true, 0.9, 1}}, 0.3, 0.0);
    EXPECT_NEAR(r[0], 1.0, 1e-12);
    EXPECT_NEAR(r[1], 1.0 - 0.6 / 0.7, 1e-12);
    // Repetition: two of four in one cluster pay lambda * 2/4.
    r = kz::proposer_rewards({{true, true, 0.5, 7}, {true, true, 0.5, 7}, {true, true, 0.5, 8}, {true, false, 0.5, 9}},
                             0.5, 0.5);
    EXPECT_NEAR(r[0], 1.0 - 0.25, 1e-12);
    EXPECT_NEAR(r[2], 1.0 - 0.125, 1e-12);
    EXPECT_DOUBLE_EQ(r[3], 0.0);
    EXPECT_TRUE(kz::in_frontier_band(0.5));
    EXPECT_FALSE(kz::in_frontier_band(0.9));
}

TEST(ProposerReward, NearDuplicateClusters) {
    std::string a = "def f(x):\n    return torch.relu(x) + 1\n";
    std::string a2 = "def f(x):  # same\n    return torch.relu(x)+1\n";
    std::string b = "def g(y):\n    return torch.softmax(y, dim=1) * 3 - 2\n";
    auto c = kz::near_duplicate_clusters({a, b, a2});
    EXPECT_EQ(c[0], c[2]);
    EXPECT_NE(c[0], c[1]);
}
