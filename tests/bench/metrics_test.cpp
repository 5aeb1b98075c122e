// pass@k, fast_p and speedups against cases computed by hand.
#include <gtest/gtest.h>

#include <cmath>

#include "bench/metrics.h"

namespace {

using kz::SampleOutcome;

SampleOutcome s(const std::string& task, bool correct, std::optional<double> eager = {},
                std::optional<double> compile = {}, const std::string& group = "level1") {
    SampleOutcome o;
    o.task = task;
    o.group = group;
    o.correct = correct;
    o.speedup_eager = eager;
    o.speedup_compile = compile;
    return o;
}

TEST(PassAtK, HandComputed) {
    // n = 5, c = 2, k = 1: 2/5.  k = 2: 1 - C(3,2)/C(5,2) = 1 - 3/10.  k = 4: 1 - 0/5 = 1 (n - c < k).
    EXPECT_DOUBLE_EQ(kz::pass_at_k(5, 2, 1), 0.4);
    EXPECT_NEAR(kz::pass_at_k(5, 2, 2), 0.7, 1e-12);
    EXPECT_DOUBLE_EQ(kz::pass_at_k(5, 2, 4), 1.0);
    // n = 10, c = 3, k = 5: 1 - C(7,5)/C(10,5) = 1 - 21/252.
    EXPECT_NEAR(kz::pass_at_k(10, 3, 5), 1.0 - 21.0 / 252.0, 1e-12);
    EXPECT_DOUBLE_EQ(kz::pass_at_k(10, 0, 10), 0.0);
    EXPECT_DOUBLE_EQ(kz::pass_at_k(1, 1, 1), 1.0);
    // Large n stays exact enough: n = 1000, c = 1, k = 1 is 1/1000.
    EXPECT_NEAR(kz::pass_at_k(1000, 1, 1), 0.001, 1e-15);
    EXPECT_THROW(kz::pass_at_k(3, 4, 1), std::invalid_argument);
    EXPECT_THROW(kz::pass_at_k(3, 1, 4), std::invalid_argument);
    EXPECT_THROW(kz::pass_at_k(3, 1, 0), std::invalid_argument);
}

TEST(Metrics, FastPAndGeomeanHandComputed) {
    // Task a: 2 samples, one correct at 2.0x eager / 0.5x compile, one wrong.
    // Task b: 2 samples, both correct at 1.2x and 0.6x eager (no compile baseline).
    // Task c: 2 samples, none correct.
    std::vector<SampleOutcome> xs = {s("a", true, 2.0, 0.5), s("a", false), s("b", true, 1.2),
                                     s("b", true, 0.6),      s("c", false), s("c", false)};
    auto m = kz::compute_metrics(xs, {1, 2});
    const auto& o = m.overall;
    EXPECT_EQ(o.tasks, 3);
    EXPECT_EQ(o.samples, 6);
    EXPECT_EQ(o.correct, 3);
    // pass@1 = mean(1/2, 2/2, 0) = 0.5; pass@2 = mean(1, 1, 0) = 2/3.
    EXPECT_NEAR(*o.pass_at.at(1), 0.5, 1e-12);
    EXPECT_NEAR(*o.pass_at.at(2), 2.0 / 3.0, 1e-12);
    // fast_0 = correct rate = 0.5; fast_1 (eager > 1): a 1/2, b 1/2, c 0 -> 1/3; fast_1.5: a 1/2 -> 1/6;
    // fast_0.5: a 1/2, b 2/2 -> 0.5; fast_2: nobody is strictly above 2.
    EXPECT_NEAR(o.fast_eager.at(0.0), 0.5, 1e-12);
    EXPECT_NEAR(o.fast_eager.at(0.5), 0.5, 1e-12);
    EXPECT_NEAR(o.fast_eager.at(1.0), 1.0 / 3.0, 1e-12);
    EXPECT_NEAR(o.fast_eager.at(1.5), 1.0 / 6.0, 1e-12);
    EXPECT_NEAR(o.fast_eager.at(2.0), 0.0, 1e-12);
    // vs compile: only a's correct sample has a compile speedup (0.5, not above 0.5).
    EXPECT_NEAR(o.fast_compile.at(0.0), 0.5, 1e-12);
    EXPECT_NEAR(o.fast_compile.at(0.5), 0.0, 1e-12);
    // geomean over correct samples: (2.0 * 1.2 * 0.6)^(1/3); compile: 0.5.
    EXPECT_NEAR(*o.geomean_speedup_eager, std::cbrt(2.0 * 1.2 * 0.6), 1e-12);
    EXPECT_NEAR(*o.geomean_speedup_compile, 0.5, 1e-12);
    ASSERT_EQ(m.tasks.size(), 3u);
    EXPECT_EQ(m.tasks[0].task, "a");
    EXPECT_NEAR(*m.tasks[0].best_speedup_eager, 2.0, 1e-12);
    EXPECT_FALSE(m.tasks[2].best_speedup_eager.has_value());
    EXPECT_TRUE(m.by_group.empty());  // one group
}

TEST(Metrics, InfraErrorsAreLeftOutAndLevelsBrokenDown) {
    std::vector<SampleOutcome> xs = {s("l1/a", true, 1.5, {}, "level1"), s("l2/b", false, {}, {}, "level2"),
                                     s("l2/b", true, 3.0, {}, "level2")};
    SampleOutcome infra = s("l2/b", false, {}, {}, "level2");
    infra.infra_error = true;
    xs.push_back(infra);
    auto m = kz::compute_metrics(xs, {1});
    EXPECT_EQ(m.overall.samples, 3);
    EXPECT_EQ(m.overall.infra_errors, 1);
    // pass@1 = mean(1, 1/2) = 0.75 (the infra error is not a sample).
    EXPECT_NEAR(*m.overall.pass_at.at(1), 0.75, 1e-12);
    ASSERT_EQ(m.by_group.size(), 2u);
    EXPECT_NEAR(*m.by_group.at("level1").pass_at.at(1), 1.0, 1e-12);
    EXPECT_NEAR(*m.by_group.at("level2").pass_at.at(1), 0.5, 1e-12);
    EXPECT_NEAR(m.by_group.at("level2").fast_eager.at(2.0), 0.5, 1e-12);
}

TEST(Metrics, PassAtKUndefinedWhenATaskHasTooFewSamples) {
    auto m = kz::compute_metrics({s("a", true), s("a", true), s("b", false)}, {1, 2});
    EXPECT_FALSE(m.overall.pass_at.at(2).has_value());
    EXPECT_NEAR(*m.overall.pass_at.at(1), 0.5, 1e-12);
    auto j = m.to_json();
    EXPECT_TRUE(j["overall"]["pass_at_k"]["pass@2"].is_null());
}

}  // namespace
