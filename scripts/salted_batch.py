"""Writes a batch of new candidates and its jobs file, for scripts/bench_verify.sh. Every candidate is
salted (a comment inside its Triton kernels, a line in its CUDA source), so no build cache holds it:
every compile is real.

  --mix correct   the known-good kernels (all correct)
  --mix rl        the mix an RL step produces: half correct, most of the rest launched on half their
                  grid in every dimension (part of the output never written: incorrect wherever the
                  grid has more than one block), a few that crash (an out-of-bounds store) and a few
                  that hang
Candidate i is for task i // 2 (of the sorted known-good tasks, cycling), on CUDA when i is even and
Triton when odd, unless --task / --backend fix them.

Usage: python3 salted_batch.py KNOWN_GOOD_DIR OUT_DIR N SALT [--mix correct|rl] [--task NAME]
       [--backend cuda|triton] > jobs.jsonl
(KNOWN_GOOD_DIR holds tasks/, triton/ and cuda/ with the same file names.)"""
import argparse
import ast
import json
import os

# Per 64 candidates: 32 correct, 30 on half their grid, 1 crash, 1 hang.
CRASHES_PER_64 = 1
HANGS_PER_64 = 1
HALF_GRID_PER_64 = 30
# The hang's job timeout (seconds): what an RL run on small tasks would allow a candidate (the
# verifier's default, 120 s, is sized for KernelBench's multi-GiB tasks). A hang costs its lane this long.
HANG_TIMEOUT_S = 10

CRASH_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = (tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)).to(tl.int64)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(y_ptr + offs + (1 << 40), tl.maximum(x, 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        return y
'''

CRASH_CUDA = '''
import torch
import torch.nn as nn
from kernelzero import cuda as kzc

CUDA_SRC = r"""
extern "C" __global__ void relu_kernel(const float* x, float* y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i + (1LL << 40)] = fmaxf(x[i], 0.0f);
}
"""
kernels = kzc.compile(CUDA_SRC)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        kernels.relu_kernel(grid=((n + 255) // 256,), block=(256,), args=(x, y, n), shared_mem=0)
        return y
'''

HANG_TRITON = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), 0.0), mask=offs < n)


class ModelNew(nn.Module):
    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(x.numel(), 1024),)](x, y, x.numel(), BLOCK=1024)
        spins = x.numel()
        while spins >= x.numel():
            spins = spins + 1
        return y
'''


def _halved(grid):
    """The grid with every dimension halved (at least 1)."""
    half = [ast.BinOp(e, ast.FloorDiv(), ast.Constant(2)) for e in grid.elts]
    grid.elts = [ast.Call(ast.Name("max", ast.Load()), [ast.Constant(1), h], []) for h in half]


def _jit_names(tree):
    return {f.name for f in ast.walk(tree) if isinstance(f, ast.FunctionDef)
            and any("jit" in ast.unparse(d) for d in f.decorator_list)}


def half_grid(source):
    """Every launch of the candidate's kernels on half its grid: a kernel-level bug, not a torch one."""
    tree = ast.parse(source)
    jit = _jit_names(tree)
    changed = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):  # kernelzero.cuda: kernels.name(grid=(...), ...)
            for kw in node.keywords:
                if kw.arg == "grid" and isinstance(kw.value, ast.Tuple):
                    _halved(kw.value)
                    changed += 1
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in jit:
            if isinstance(node.slice, ast.Tuple):  # triton: kernel[(...)](...)
                _halved(node.slice)
                changed += 1
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Tuple) and any(
                isinstance(t, ast.Name) and t.id == "grid" for t in node.targets):
            _halved(node.value)  # triton: grid = (...); kernel[grid](...)
            changed += 1
    if not changed:
        raise ValueError("no kernel launch grid found")
    return ast.unparse(tree) + "\n"


def salted(source, salt):
    """The source with a salt where a build cache would see it: a comment as the first line of every
    Triton kernel's body, and a line comment at the start of every CUDA source string."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                and any(isinstance(t, ast.Name) and t.id == "CUDA_SRC" for t in node.targets)):
            node.value.value = f"// salt {salt}\n" + node.value.value
    lines = ast.unparse(tree).splitlines()
    # ast.unparse renumbers lines: the kernels are found again in its output.
    out_tree = ast.parse("\n".join(lines))
    jit_lines = sorted((f.body[0].lineno, f.body[0].col_offset) for f in ast.walk(out_tree)
                       if isinstance(f, ast.FunctionDef) and f.name in _jit_names(out_tree))
    for lineno, col in reversed(jit_lines):
        lines.insert(lineno - 1, " " * col + f"# salt {salt}")
    return "\n".join(lines) + "\n"


def plan(i, mix):
    """What candidate i of the batch is: correct, half_grid, crash or hang."""
    k = i % 64
    if mix == "correct" or k >= CRASHES_PER_64 + HANGS_PER_64 + HALF_GRID_PER_64:
        return "correct"
    if k < CRASHES_PER_64:
        return "crash"
    if k < CRASHES_PER_64 + HANGS_PER_64:
        return "hang"
    return "half_grid"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("known_good")
    ap.add_argument("out_dir")
    ap.add_argument("n", type=int)
    ap.add_argument("salt")
    ap.add_argument("--mix", choices=["correct", "rl"], default="rl")
    ap.add_argument("--task")
    ap.add_argument("--backend", choices=["cuda", "triton"])
    a = ap.parse_args()
    known_good, out_dir = os.path.abspath(a.known_good), os.path.abspath(a.out_dir)
    os.makedirs(out_dir, exist_ok=True)
    names = sorted(f[:-3] for f in os.listdir(os.path.join(known_good, "tasks")) if f.endswith(".py"))
    for i in range(a.n):
        kind = plan(i, a.mix)
        backend = a.backend or ("cuda" if i % 2 == 0 else "triton")
        name = a.task or names[(i // 2) % len(names)]
        job = {}
        if kind in ("crash", "hang"):
            name = "relu"
            source = {"crash": CRASH_CUDA if backend == "cuda" else CRASH_TRITON, "hang": HANG_TRITON}[kind]
            backend = "triton" if kind == "hang" else backend
            if kind == "hang":
                job["timeout"] = HANG_TIMEOUT_S
        else:
            with open(os.path.join(known_good, backend, name + ".py")) as f:
                source = f.read()
            if kind == "half_grid":
                source = half_grid(source)
        path = os.path.join(out_dir, f"{i:04d}_{name}_{backend}_{kind}.py")
        with open(path, "w") as f:
            f.write(salted(source, f"{a.salt}-{i}"))
        job.update({"id": f"{a.salt}-{i:04d}-{name}-{backend}-{kind}",
                    "task": os.path.join(known_good, "tasks", name + ".py"), "candidate": path, "backend": backend})
        print(json.dumps(job))


if __name__ == "__main__":
    main()
