import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def mean_dim_kernel(x_ptr, y_ptr, n_out, inner, R: tl.constexpr, BLOCK: tl.constexpr):
    # x viewed as (outer, R, inner); y as (outer, inner); one lane per output element
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n_out
    o = offs // inner
    i = offs % inner
    base = o * R * inner + i
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r in range(R):
        acc += tl.load(x_ptr + base + r * inner, mask=mask, other=0.0)
    tl.store(y_ptr + offs, acc / R, mask=mask)


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
        out_shape = shape[:d] + shape[d + 1:]
        y = torch.empty(out_shape, device=x.device, dtype=x.dtype)
        n_out = outer * inner
        BLOCK = 256
        mean_dim_kernel[(triton.cdiv(n_out, BLOCK),)](x, y, n_out, inner, R=R, BLOCK=BLOCK)
        return y
