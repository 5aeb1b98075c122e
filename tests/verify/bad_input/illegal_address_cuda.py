"""BAD INPUT: a CUDA kernel that writes far outside its output (fast path).

The launch poisons the child's CUDA context with an illegal-address error. Expected: runtime_error,
reported for this job; the child that saw the error is gone and its fork server is replaced, so the
next job in the same lane runs in a healthy context (the suite's later cases check that).
"""
import torch
import torch.nn as nn
from kernelzero import cuda as kzc

CUDA_SRC = r'''
extern "C" __global__ void relu_wild(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i + (1LL << 40)] = fmaxf(x[i], 0.0f);
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
        kernels.relu_wild(grid=((n + 255) // 256,), block=(256,), args=(x, y, n))
        return y
