#include "engine/kernel_profile.h"

#include <algorithm>
#include <map>
#include <set>

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/torch.h>

namespace kz {

std::vector<KernelTime> profile_kernels(const std::function<void()>& fn) {
    namespace prof = torch::autograd::profiler;
    using torch::profiler::impl::ActivityType;
    using torch::profiler::impl::ProfilerConfig;
    using torch::profiler::impl::ProfilerState;
    const std::set<ActivityType> activities = {ActivityType::CPU, ActivityType::CUDA};
    ProfilerConfig config(ProfilerState::KINETO);
    prof::prepareProfiler(config, activities);
    prof::enableProfiler(config, activities);
    try {
        fn();
        torch::cuda::synchronize();
    } catch (...) {
        prof::disableProfiler();
        throw;
    }
    auto result = prof::disableProfiler();
    std::map<std::string, KernelTime> by_name;
    for (const auto& e : result->events()) {
        if (e.deviceType() != c10::DeviceType::CUDA) continue;
        KernelTime& k = by_name[e.name()];
        k.name = e.name();
        k.calls += 1;
        k.total_us += static_cast<double>(e.durationNs()) / 1e3;
    }
    std::vector<KernelTime> out;
    for (auto& [name, k] : by_name) out.push_back(std::move(k));
    std::sort(out.begin(), out.end(), [](const KernelTime& a, const KernelTime& b) { return a.total_us > b.total_us; });
    return out;
}

}  // namespace kz
