#include "engine/decode_graph.h"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

namespace kz {

struct DecodeGraph::Impl {
    at::cuda::CUDAGraph graph;
    torch::Tensor output;
    bool captured = false;
};

DecodeGraph::DecodeGraph() : impl_(std::make_unique<Impl>()) {}
DecodeGraph::~DecodeGraph() = default;

torch::Tensor DecodeGraph::run_and_capture(const std::function<torch::Tensor()>& step) {
    // Capture needs a stream other than the legacy default one; the eager run uses it too, so that
    // per-stream lazy state (cuBLAS workspaces) exists before capture begins.
    torch::cuda::synchronize();
    auto side = c10::cuda::getStreamFromPool();
    torch::Tensor eager;
    {
        c10::cuda::CUDAStreamGuard guard(side);
        eager = step();
        side.synchronize();
        impl_->graph.capture_begin();
        impl_->output = step();
        impl_->graph.capture_end();
    }
    side.synchronize();
    impl_->captured = true;
    return eager;
}

void DecodeGraph::replay() { impl_->graph.replay(); }
bool DecodeGraph::captured() const { return impl_->captured; }
const torch::Tensor& DecodeGraph::output() const { return impl_->output; }

}  // namespace kz
