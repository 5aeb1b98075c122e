import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# y[m, n] = relu(x[m, :] . W[n, :] + lb[n]) * scale + b2[n]; one thread per y element, 16x16 blocks.
CUDA_SRC = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

__global__ void fused_linear_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                         const float* __restrict__ lb, const float* __restrict__ b2,
                                         float* __restrict__ y, int M, int N, int K, float scale) {
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    if (m >= M || n >= N) return;
    const float* xr = x + (long long)m * K;
    const float* wr = w + (long long)n * K;
    float acc = lb[n];
    for (int k = 0; k < K; ++k) acc += xr[k] * wr[k];
    y[(long long)m * N + n] = fmaxf(acc, 0.0f) * scale + b2[n];
}

torch::Tensor fused_linear_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor lb,
                                        torch::Tensor b2, double scale) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && lb.is_cuda() && b2.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                lb.scalar_type() == torch::kFloat32 && b2.scalar_type() == torch::kFloat32,
                "inputs must be float32");
    TORCH_CHECK(x.dim() == 2 && w.dim() == 2 && x.size(1) == w.size(1) &&
                lb.numel() == w.size(0) && b2.numel() == w.size(0), "shape mismatch");
    const at::cuda::OptionalCUDAGuard device_guard(x.device());
    x = x.contiguous();
    w = w.contiguous();
    lb = lb.contiguous();
    b2 = b2.contiguous();
    const int M = (int)x.size(0);
    const int K = (int)x.size(1);
    const int N = (int)w.size(0);
    auto y = torch::empty({M, N}, x.options());
    if (M == 0 || N == 0) return y;
    dim3 block(16, 16);
    dim3 grid((N + 15) / 16, (M + 15) / 16);
    fused_linear_relu_kernel<<<grid, block, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), lb.data_ptr<float>(), b2.data_ptr<float>(),
        y.data_ptr<float>(), M, N, K, (float)scale);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
'''

CPP_SRC = ("torch::Tensor fused_linear_relu_forward(torch::Tensor x, torch::Tensor w, torch::Tensor lb, "
           "torch::Tensor b2, double scale);")

fused_ext = load_inline(
    name="kz_fused_linear_relu_inline",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["fused_linear_relu_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.ext = fused_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ext.fused_linear_relu_forward(x, self.linear.weight, self.linear.bias, self.bias,
                                                  float(self.scale))
