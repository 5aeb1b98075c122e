// GPU memory admission (verify/device_memory.h) on fake device sizes: no GPU involved.
#include "verify/device_memory.h"
#include "verify/service.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

using kz::DeviceMemoryBudget;
using kz::kGiB;

namespace {

std::atomic<bool> never{false};

// Waits (briefly) until `pred` holds; false if it never does.
template <class Pred>
bool eventually(Pred pred) {
    for (int i = 0; i < 400; ++i) {
        if (pred()) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return pred();
}

kz::TaskFootprint footprint(double params_gib, double inputs_gib, double outputs_gib, double forward_gib) {
    kz::TaskFootprint f;
    f.params = static_cast<int64_t>(params_gib * kGiB);
    f.inputs = static_cast<int64_t>(inputs_gib * kGiB);
    f.outputs = static_cast<int64_t>(outputs_gib * kGiB);
    f.forward = static_cast<int64_t>(forward_gib * kGiB);
    f.measured = true;
    return f;
}

}  // namespace

TEST(DeviceMemory, AdmitsWhileTheSumFits) {
    DeviceMemoryBudget b(100 * kGiB);
    auto r1 = b.acquire(40 * kGiB, never);
    auto r2 = b.acquire(60 * kGiB, never);
    EXPECT_TRUE(r1.admitted() && r2.admitted());
    EXPECT_EQ(b.in_use(), 100 * kGiB);
    EXPECT_EQ(r2.beside(), 40 * kGiB);
    std::atomic<bool> third{false};
    std::thread t([&] {
        auto r3 = b.acquire(10 * kGiB, never);
        third = true;
    });
    EXPECT_TRUE(eventually([&] { return b.waiting() == 1; }));
    EXPECT_FALSE(third.load());  // 110 GiB would not fit
    r1.release();
    t.join();
    EXPECT_TRUE(third.load());
    EXPECT_EQ(b.peak_in_use(), 100 * kGiB);
    r2.release();
    EXPECT_EQ(b.in_use(), 0);
}

TEST(DeviceMemory, ALargeJobIsNotOvertakenBySmallOnes) {
    DeviceMemoryBudget b(100 * kGiB);
    auto running = b.acquire(50 * kGiB, never);
    std::atomic<int> order{0};
    std::atomic<int> big_at{-1}, small_at{-1};
    // 95 GiB: once admitted, the big job leaves no room for the small one until it is done, so the
    // order below is the admission order (with room for both, the small one's thread could count
    // first after the big one was admitted).
    std::thread big([&] {
        auto r = b.acquire(95 * kGiB, never);  // waits for the 50 GiB job to leave
        big_at = order++;
    });
    ASSERT_TRUE(eventually([&] { return b.waiting() == 1; }));
    std::thread small([&] {
        auto r = b.acquire(10 * kGiB, never);  // would fit now, but arrived after the big one
        small_at = order++;
    });
    ASSERT_TRUE(eventually([&] { return b.waiting() == 2; }));
    EXPECT_EQ(small_at.load(), -1);
    running.release();
    big.join();
    small.join();
    EXPECT_EQ(big_at.load(), 0);
    EXPECT_EQ(small_at.load(), 1);
}

TEST(DeviceMemory, AJobLargerThanTheDeviceIsRefusedNotQueued) {
    DeviceMemoryBudget b(80 * kGiB);
    try {
        b.acquire(81 * kGiB, never);
        FAIL() << "no exception";
    } catch (const std::length_error& e) {
        EXPECT_NE(std::string(e.what()).find("81.0 GiB"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("80.0 GiB"), std::string::npos) << e.what();
    }
    EXPECT_EQ(b.waiting(), 0);
    auto all = b.acquire_all(never);  // the whole device is not too large
    EXPECT_EQ(all.bytes(), 80 * kGiB);
}

TEST(DeviceMemory, AloneWaitsForTheDeviceToEmpty) {
    DeviceMemoryBudget b(100 * kGiB);
    auto r = b.acquire(kGiB, never);
    std::atomic<bool> alone{false};
    std::thread t([&] {
        auto all = b.acquire_all(never);
        alone = true;
        EXPECT_EQ(all.beside(), 0);
    });
    ASSERT_TRUE(eventually([&] { return b.waiting() == 1; }));
    EXPECT_FALSE(alone.load());
    r.release();
    t.join();
    EXPECT_TRUE(alone.load());
}

TEST(DeviceMemory, StopWakesWaitersWithoutAdmitting) {
    DeviceMemoryBudget b(10 * kGiB);
    auto r = b.acquire(10 * kGiB, never);
    std::atomic<bool> stop{false};
    bool admitted = true;
    std::thread t([&] { admitted = b.acquire(kGiB, stop).admitted(); });
    ASSERT_TRUE(eventually([&] { return b.waiting() == 1; }));
    stop = true;
    b.wake();
    t.join();
    EXPECT_FALSE(admitted);
    EXPECT_EQ(b.in_use(), 10 * kGiB);
}

TEST(DeviceMemory, ReservationsMoveAndReleaseOnce) {
    DeviceMemoryBudget b(10 * kGiB);
    DeviceMemoryBudget::Reservation outer;
    {
        auto r = b.acquire(4 * kGiB, never);
        outer = std::move(r);
        EXPECT_FALSE(r.admitted());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
    }
    EXPECT_EQ(b.in_use(), 4 * kGiB);
    outer.release();
    outer.release();
    EXPECT_EQ(b.in_use(), 0);
}

// Many threads asking for random sizes: what is admitted never exceeds the capacity, and every
// request is served.
TEST(DeviceMemory, ConcurrentJobsNeverOversubscribe) {
    const int64_t capacity = 64 * kGiB;
    DeviceMemoryBudget b(capacity);
    std::atomic<int64_t> held{0}, worst{0};
    std::atomic<int> served{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t)
        threads.emplace_back([&, t] {
            std::mt19937 rng(t);
            std::uniform_int_distribution<int64_t> size(1, 40);
            for (int i = 0; i < 50; ++i) {
                const int64_t bytes = size(rng) * kGiB;
                auto r = b.acquire(bytes, never);
                const int64_t now = held += bytes;
                int64_t w = worst.load();
                while (now > w && !worst.compare_exchange_weak(w, now)) {}
                std::this_thread::sleep_for(std::chrono::microseconds(200));
                held -= bytes;
                ++served;
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(served.load(), 400);
    EXPECT_LE(worst.load(), capacity);
    EXPECT_LE(b.peak_in_use(), capacity);
    EXPECT_EQ(b.in_use(), 0);
}

// The need of a job from its task's footprint, on an H200-sized device: KernelBench level 1's
// largest elementwise tasks (6 GiB in, 6 GiB out) run two or three at a time, small tasks many.
TEST(DeviceMemory, JobNeedsFromFootprints) {
    const int64_t capacity = kz::device_capacity(int64_t{143} * 1000 * 1000 * 1000, 139 * kGiB, 8);
    EXPECT_GT(capacity, 110 * kGiB);  // 8 lanes x 3 contexts and a 4% margin out of 139 GiB free
    EXPECT_LT(capacity, 125 * kGiB);

    const auto relu = footprint(0, 6, 6, 6);
    const auto need = kz::job_memory(relu);
    EXPECT_GE(need.reference, relu.reference_peak());                    // it holds at least what the reference needs
    EXPECT_GE(need.candidate, relu.reference_peak() + 2 * relu.inputs);  // plus a snapshot / timing buffers
    const int64_t at_once = capacity / need.total();
    EXPECT_GE(at_once, 2);
    EXPECT_LE(at_once, 3);

    const auto tiny = footprint(0.001, 0.001, 0.001, 0.001);
    EXPECT_GE(capacity / kz::job_memory(tiny).total(), 16);

    // A baseline measured from an estimate leaves room for workspace the meta device cannot see.
    auto estimate = relu;
    estimate.measured = false;
    EXPECT_GT(kz::baseline_memory(estimate), kz::baseline_memory(relu));

    // "Clearly more than the reference": half again what a child running the reference's module
    // holds, so the harness's own input sets never make an honest candidate look greedy.
    const int64_t honest = kz::honest_candidate_memory(relu);
    EXPECT_GE(honest, relu.reference_peak() + 2 * relu.inputs);
    EXPECT_FALSE(kz::clearly_more_than_reference(honest + 2 * kGiB, relu));
    EXPECT_TRUE(kz::clearly_more_than_reference(2 * honest, relu));
    EXPECT_TRUE(kz::clearly_more_than_reference(200 * kGiB, relu));
}

TEST(DeviceMemory, FootprintsFromTheWorkersReplies) {
    auto f = kz::TaskFootprint::from_json(
        {{"params", 1024}, {"inputs", 3221225472.0}, {"outputs", 4096}, {"forward", 8192}}, true);
    ASSERT_TRUE(f.has_value());
    EXPECT_EQ(f->inputs, int64_t{3221225472});  // past 32 bits
    EXPECT_TRUE(f->measured);
    EXPECT_FALSE(kz::TaskFootprint::from_json({{"estimated", false}, {"why", "nonzero on meta"}}, false).has_value());
    EXPECT_FALSE(kz::TaskFootprint::from_json({{"params", -1}, {"inputs", 0}, {"outputs", 0}, {"forward", 0}}, true)
                     .has_value());
    EXPECT_FALSE(kz::TaskFootprint::from_json(nullptr, true).has_value());
    EXPECT_FALSE(kz::TaskFootprint::from_json({{"params", 1e30}, {"inputs", 0}, {"outputs", 0}, {"forward", 0}}, true)
                     .has_value());                         // beyond any device: refused, not wrapped
    EXPECT_EQ(kz::device_capacity(80 * kGiB, kGiB, 4), 0);  // never negative
}

TEST(DeviceMemory, AutoLanesFollowCoresAndDeviceMemory) {
    EXPECT_EQ(kz::auto_lanes(16, 141 * kGiB), 8);
    EXPECT_EQ(kz::auto_lanes(128, 141 * kGiB), 8);
    EXPECT_EQ(kz::auto_lanes(16, 24 * kGiB), 1);
    EXPECT_EQ(kz::auto_lanes(16, 80 * kGiB), 5);
    EXPECT_EQ(kz::auto_lanes(2, 141 * kGiB), 1);
    EXPECT_EQ(kz::auto_lanes(8, 0), 4);  // the CPU: cores alone
}
