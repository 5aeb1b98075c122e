import torch
import torch.nn as nn
from kernelzero import cuda as kzc

CUDA_SRC = r'''
extern "C" __global__ void mul_add_kernel(const float* __restrict__ a, const float* __restrict__ b,
                                          const float* __restrict__ c, float* __restrict__ y,
                                          float alpha, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = a[i] * b[i] + alpha * c[i];
}
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self, alpha: float):
        super().__init__()
        self.alpha = alpha

    def forward(self, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        a = a.contiguous()
        b = b.contiguous()
        c = c.contiguous()
        y = torch.empty_like(a)
        n = a.numel()
        kernels.mul_add_kernel(grid=((n + 255) // 256,), block=(256,),
                               args=(a, b, c, y, float(self.alpha), n), shared_mem=0)
        return y
