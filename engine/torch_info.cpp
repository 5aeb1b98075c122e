#include "engine/torch_info.h"

#ifdef KZ_WITH_TORCH
#include <torch/version.h>
#include <torch/cuda.h>
#endif

namespace kz {

TorchInfo torch_info() {
    TorchInfo info;
#ifdef KZ_WITH_TORCH
    info.linked = true;
    info.version = TORCH_VERSION;
    info.cuda_available = torch::cuda::is_available();
    info.cuda_devices = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
#endif
    return info;
}

}  // namespace kz
