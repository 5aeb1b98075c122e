"""Parity pair (load_inline): the same non-compiling ReLU as relu_typo_nvrtc.py. Expected: compile_error."""
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA_SRC = r'''
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void relu_typo(const float* __restrict__ x, float* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = fmaxf(x[i], zero);
}

torch::Tensor relu_typo_cuda(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long long n = x.numel();
    relu_typo<<<(int)((n + 255) / 256), 256, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
'''
CPP_SRC = "torch::Tensor relu_typo_cuda(torch::Tensor x);"

ext = load_inline(name="kz_parity_relu_typo", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                  functions=["relu_typo_cuda"], verbose=False)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return ext.relu_typo_cuda(x.contiguous())
