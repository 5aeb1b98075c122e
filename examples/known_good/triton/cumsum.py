import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def cumsum_kernel(x_ptr, y_ptr, L, inner, BLOCK: tl.constexpr):
    # x viewed as (outer, L, inner); one program per (outer, inner) line, scanned in one block
    pid = tl.program_id(0)
    o = pid // inner
    i = pid % inner
    offs = tl.arange(0, BLOCK)
    mask = offs < L
    ptrs = o * L * inner + offs * inner + i
    x = tl.load(x_ptr + ptrs, mask=mask, other=0.0)
    y = tl.cumsum(x, axis=0)
    tl.store(y_ptr + ptrs, y, mask=mask)


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
        BLOCK = triton.next_power_of_2(L)
        cumsum_kernel[(outer * inner,)](x, y, L, inner, BLOCK=BLOCK)
        return y
