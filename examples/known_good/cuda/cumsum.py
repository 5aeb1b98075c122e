import torch
import torch.nn as nn
from kernelzero import cuda as kzc

# x viewed as (outer, L, inner); one thread per (outer, inner) line, sequential inclusive scan.
CUDA_SRC = r'''
extern "C" __global__ void cumsum_kernel(const float* __restrict__ x, float* __restrict__ y,
                                         long long n_lines, int L, long long inner) {
    long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (line >= n_lines) return;
    long long o = line / inner;
    long long i = line % inner;
    long long base = o * (long long)L * inner + i;
    float acc = 0.0f;
    for (int r = 0; r < L; ++r) {
        long long off = base + (long long)r * inner;
        acc += x[off];
        y[off] = acc;
    }
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
        L = shape[d]
        outer = 1
        for s in shape[:d]:
            outer *= s
        inner = 1
        for s in shape[d + 1:]:
            inner *= s
        y = torch.empty_like(x)
        n_lines = outer * inner
        kernels.cumsum_kernel(grid=((n_lines + 255) // 256,), block=(256,),
                              args=(x, y, n_lines, L, inner), shared_mem=0)
        return y
