"""Parity pair (fast path): a ReLU kernel that does not compile (undeclared identifier). Expected:
compile_error, exactly as its load_inline twin (relu_typo_inline.py)."""
import torch
import torch.nn as nn
from kernelzero import cuda as kzc

CUDA_SRC = r'''
extern "C" __global__ void relu_typo(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], zero);
}
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        kernels.relu_typo(grid=((n + 255) // 256,), block=(256,), args=(x, y, n))
        return y
