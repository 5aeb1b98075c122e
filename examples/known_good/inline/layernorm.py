import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

# One block of 256 threads per row; two-pass mean / biased variance with shared-memory tree
# reductions (blockDim.x must be 256).
CUDA_SRC = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#define KZ_THREADS 256

__device__ float block_sum(float v, float* sh) {
    int t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (int s = KZ_THREADS / 2; s > 0; s >>= 1) {
        if (t < s) sh[t] += sh[t + s];
        __syncthreads();
    }
    float r = sh[0];
    __syncthreads();
    return r;
}

__global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                 const float* __restrict__ b, float* __restrict__ y,
                                 int rows, int cols, float eps) {
    __shared__ float sh[KZ_THREADS];
    int row = blockIdx.x;
    if (row >= rows) return;  // uniform over the block
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += KZ_THREADS) s += xr[j];
    float mean = block_sum(s, sh) / (float)cols;
    float v = 0.0f;
    for (int j = threadIdx.x; j < cols; j += KZ_THREADS) {
        float d = xr[j] - mean;
        v += d * d;
    }
    float var = block_sum(v, sh) / (float)cols;
    float rstd = rsqrtf(var + eps);
    for (int j = threadIdx.x; j < cols; j += KZ_THREADS) yr[j] = (xr[j] - mean) * rstd * w[j] + b[j];
}

torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps) {
    TORCH_CHECK(x.is_cuda() && w.is_cuda() && b.is_cuda(), "inputs must be CUDA tensors");
    TORCH_CHECK(x.scalar_type() == torch::kFloat32 && w.scalar_type() == torch::kFloat32 &&
                b.scalar_type() == torch::kFloat32, "inputs must be float32");
    const at::cuda::OptionalCUDAGuard device_guard(x.device());
    x = x.contiguous();
    w = w.contiguous();
    b = b.contiguous();
    const int cols = (int)w.numel();
    TORCH_CHECK(cols > 0 && b.numel() == cols && x.size(-1) == cols, "shape mismatch");
    auto y = torch::empty_like(x);
    if (x.numel() == 0) return y;
    const int rows = (int)(x.numel() / cols);
    layernorm_kernel<<<rows, KZ_THREADS, 0, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<float>(), w.data_ptr<float>(), b.data_ptr<float>(), y.data_ptr<float>(),
        rows, cols, (float)eps);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return y;
}
'''

CPP_SRC = "torch::Tensor layernorm_forward(torch::Tensor x, torch::Tensor w, torch::Tensor b, double eps);"

layernorm_ext = load_inline(
    name="kz_layernorm_inline",
    cpp_sources=CPP_SRC,
    cuda_sources=CUDA_SRC,
    functions=["layernorm_forward"],
    verbose=False,
)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)  # holds weight/bias under the task's names
        self.ext = layernorm_ext

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.ext.layernorm_forward(x, self.ln.weight, self.ln.bias, float(self.ln.eps))
