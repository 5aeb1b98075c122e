import torch
import torch.nn as nn
from kernelzero import cuda as kzc

# Max over dim (values): x viewed as (outer, R, inner), one thread per output element (outer * inner of them).
CUDA_SRC = r'''
extern "C" __global__ void max_dim_kernel(const float* __restrict__ x, float* __restrict__ y,
                                            long long n_out, int R, long long inner) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n_out) return;
    long long o = idx / inner;
    long long i = idx % inner;
    const float* p = x + o * (long long)R * inner + i;
    float acc = p[0];
    for (int r = 1; r < R; ++r) acc = fmaxf(acc, p[(long long)r * inner]);
    y[idx] = acc;
}
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        d = self.dim % x.dim()
        shape = list(x.shape)
        R = shape[d]
        outer = 1
        for s in shape[:d]:
            outer *= s
        inner = 1
        for s in shape[d + 1:]:
            inner *= s
        y = torch.empty(shape[:d] + shape[d + 1:], device=x.device, dtype=x.dtype)
        n_out = outer * inner
        kernels.max_dim_kernel(grid=((n_out + 255) // 256,), block=(256,),
                                 args=(x, y, n_out, R, inner), shared_mem=0)
        return y
