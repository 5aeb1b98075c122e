"""BAD INPUT: the file is not valid UTF-8.

This docstring ("café", Latin-1), the string constant below and a comment contain raw bytes
(0xE9, 0xFF, 0xFE) that are invalid UTF-8, and the file has no coding declaration. CPython's own
tokenizer skips undecodable bytes inside comments, so they are also put in string literals, where
compile() fails with "(unicode error) 'utf-8' codec can't decode byte".

Expected: `format_error` (syntax).
"""
import torch
import torch.nn as nn
import triton
import triton.language as tl

# café ÿþ <- invalid UTF-8 bytes
_LABEL = "relu café ÿþ"


@triton.jit
def relu_kernel(x_ptr, y_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask, other=0.0)
    tl.store(y_ptr + offsets, tl.maximum(x, 0.0), mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK_SIZE=1024)
        return out
