import torch
import torch.nn as nn
from kernelzero import cuda as kzc

# One block of 256 threads per row; two-pass mean / biased variance with shared-memory tree
# reductions (blockDim.x must be 256).
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

extern "C" __global__ void layernorm_kernel(const float* __restrict__ x, const float* __restrict__ w,
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
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: int):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape)  # holds weight/bias under the task's names

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.ln.weight.contiguous()
        b = self.ln.bias.contiguous()
        y = torch.empty_like(x)
        cols = w.numel()
        rows = x.numel() // cols
        kernels.layernorm_kernel(grid=(rows,), block=(256,),
                                 args=(x, w, b, y, rows, cols, float(self.ln.eps)), shared_mem=0)
        return y
