import torch
import torch.nn as nn
from kernelzero import cuda as kzc

# One block of 256 threads per row; shared-memory tree reduction (blockDim.x must be 256).
CUDA_SRC = r'''
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

extern "C" __global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                          float* __restrict__ y, int rows, int cols, float eps) {
    __shared__ float sh[KZ_THREADS];
    int row = blockIdx.x;
    if (row >= rows) return;  // uniform over the block
    const float* xr = x + (long long)row * cols;
    float* yr = y + (long long)row * cols;
    float s = 0.0f;
    for (int j = threadIdx.x; j < cols; j += KZ_THREADS) s += xr[j] * xr[j];
    float ms = block_sum(s, sh) / (float)cols;
    float r = rsqrtf(ms + eps);
    for (int j = threadIdx.x; j < cols; j += KZ_THREADS) yr[j] = xr[j] * r * w[j];
}
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.weight.contiguous()
        y = torch.empty_like(x)
        cols = x.shape[-1]
        rows = x.numel() // cols
        kernels.rmsnorm_kernel(grid=(rows,), block=(256,),
                               args=(x, w, y, rows, cols, float(self.eps)), shared_mem=0)
        return y
