// One matrix multiply by a frozen base weight that serves up to three linear layers side by side
// (q|k|v, gate|up, or one layer alone), with each layer's LoRA update added into its own columns:
//   y[..., off_i : off_i + o_i] = x W_i^T + b_i + s_i (x A_i^T) B_i^T
// As one autograd node with a hand-written backward, because composing it from ATen ops (slices of
// the base product, per-layer casts and scales, a cat) costs a cat of the whole output in forward and
// a full-width zero fill, copy and add per layer in backward: on H200 the 7B-shaped LoRA step went
// from 2.71 to 2.49 s (fp32 LoRA products) and from 1.96 to 1.62 s (bf16) without them
// (docs/BENCHMARKS.md).
#pragma once

#include <torch/torch.h>

#include <vector>

namespace kz {

struct LoraPart {
    torch::Tensor a;     // (r, C) or undefined: this layer has no adapter
    torch::Tensor b;     // (width, r) or undefined
    double scale = 0.0;  // alpha / r
    int64_t width = 0;   // the layer's output features: its columns of y
};

// x (..., C), weight (sum of widths, C), bias (sum of widths) or undefined -> y (..., sum of widths).
// The adapters' products are computed in `lora_dtype`: the adapters' own (fp32 on a bf16 base, as
// peft computes them) or the activations' (as torch.autocast computes them); each update is added to
// y in fp32 arithmetic and rounded once, as peft's fp32 sum cast back to the base dtype is.
// Contract: weight and bias are frozen (a full fine-tune trains the layers one by one, without
// adapters); throws std::logic_error otherwise. Gradients flow to x and to every a and b.
torch::Tensor lora_projection(const torch::Tensor& x, const torch::Tensor& weight, const torch::Tensor& bias,
                              const std::vector<LoraPart>& parts, torch::ScalarType lora_dtype);

}  // namespace kz
