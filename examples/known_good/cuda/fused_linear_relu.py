import torch
import torch.nn as nn
from kernelzero import cuda as kzc

# y[m, n] = relu(x[m, :] . W[n, :] + lb[n]) * scale + b2[n]; one thread per y element, 16x16 blocks.
CUDA_SRC = r'''
extern "C" __global__ void fused_linear_relu_kernel(const float* __restrict__ x, const float* __restrict__ w,
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
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.scale = scale
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.linear.weight.contiguous()
        lb = self.linear.bias.contiguous()
        b2 = self.bias.contiguous()
        M, K = x.shape
        N = w.shape[0]
        y = torch.empty((M, N), device=x.device, dtype=x.dtype)
        kernels.fused_linear_relu_kernel(grid=((N + 15) // 16, (M + 15) // 16), block=(16, 16),
                                         args=(x, w, lb, b2, y, M, N, K, float(self.scale)), shared_mem=0)
        return y
