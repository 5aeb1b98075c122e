// What the linked libtorch is and sees. The policy engine (engine/) is built on libtorch; this is its
// smallest piece, used by `kernelzero info` and to resolve `--device auto`.
#pragma once

#include <string>

namespace kz {

struct TorchInfo {
    bool linked = false;  // false when built with KZ_WITH_TORCH=OFF
    std::string version;  // libtorch's version string
    bool cuda_available = false;
    int cuda_devices = 0;
};

TorchInfo torch_info();

}  // namespace kz
