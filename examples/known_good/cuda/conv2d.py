import torch
import torch.nn as nn
from kernelzero import cuda as kzc

# Direct convolution, NCHW, one thread per output element (n, co, oh, ow); zero padding by bounds checks.
CUDA_SRC = r'''
extern "C" __global__ void conv2d_kernel(const float* __restrict__ x, const float* __restrict__ w,
                                         const float* __restrict__ b, float* __restrict__ y,
                                         int N, int C, int H, int W, int C_out, int KH, int KW,
                                         int OH, int OW, int stride, int pad) {
    long long idx = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long total = (long long)N * C_out * OH * OW;
    if (idx >= total) return;
    int ow = (int)(idx % OW);
    long long t = idx / OW;
    int oh = (int)(t % OH);
    t /= OH;
    int co = (int)(t % C_out);
    int n = (int)(t / C_out);
    float acc = b[co];
    for (int ci = 0; ci < C; ++ci) {
        const float* xp = x + ((long long)n * C + ci) * H * W;
        const float* wp = w + ((long long)co * C + ci) * KH * KW;
        for (int kh = 0; kh < KH; ++kh) {
            int ih = oh * stride - pad + kh;
            if (ih < 0 || ih >= H) continue;
            for (int kw = 0; kw < KW; ++kw) {
                int iw = ow * stride - pad + kw;
                if (iw < 0 || iw >= W) continue;
                acc += xp[(long long)ih * W + iw] * wp[kh * KW + kw];
            }
        }
    }
    y[idx] = acc;
}
'''
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, padding: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=1, padding=padding, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.conv.weight.contiguous()
        b = self.conv.bias.contiguous()
        N, C, H, W = x.shape
        C_out, _, KH, KW = w.shape
        stride = self.conv.stride[0]
        pad = self.conv.padding[0]
        OH = (H + 2 * pad - KH) // stride + 1
        OW = (W + 2 * pad - KW) // stride + 1
        y = torch.empty((N, C_out, OH, OW), device=x.device, dtype=x.dtype)
        total = N * C_out * OH * OW
        kernels.conv2d_kernel(grid=((total + 255) // 256,), block=(256,),
                              args=(x, w, b, y, N, C, H, W, C_out, KH, KW, OH, OW, stride, pad),
                              shared_mem=0)
        return y
