#include "engine/torch_info.h"

#include <torch/cuda.h>
#include <torch/version.h>

namespace kz {

TorchInfo torch_info() {
    TorchInfo info;
    info.linked = true;
    info.version = TORCH_VERSION;
    info.cuda_available = torch::cuda::is_available();
    info.cuda_devices = info.cuda_available ? static_cast<int>(torch::cuda::device_count()) : 0;
    return info;
}

}  // namespace kz
