// CUDA-graph replay of the decode step: the step's ~900 kernel launches become one graph launch, so
// a decode step costs what the GPU needs, not what the host needs to queue it. The CUDA headers stay
// in decode_graph.cpp.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>

namespace kz {

class DecodeGraph {
public:
    DecodeGraph();
    ~DecodeGraph();
    DecodeGraph(const DecodeGraph&) = delete;
    DecodeGraph& operator=(const DecodeGraph&) = delete;

    // Runs `step` once for real (its lazy initialisations happen outside capture) and returns its
    // output; then captures a second call of it, which does not run. `step` must read and write
    // only tensors that outlive the graph (its inputs, state and the output it returns).
    torch::Tensor run_and_capture(const std::function<torch::Tensor()>& step);
    // Runs the captured step again; its output lands in output().
    void replay();
    bool captured() const;
    const torch::Tensor& output() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace kz
