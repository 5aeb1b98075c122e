// Facts of the host and the sizes they are counted in.
#pragma once

#include <cstdint>

namespace kz {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kGiB = int64_t{1} << 30;

// The CPUs this process may run on (its affinity mask; all online CPUs where that cannot be read).
int host_cores();

}  // namespace kz
