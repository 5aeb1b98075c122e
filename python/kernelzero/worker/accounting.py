"""Dynamic anti-hack instruments used around the candidate's forward:

- LaunchRecorder: counts the candidate's own kernel launches (Triton and kernelzero.cuda) and can
  switch them off (kernel ablation: outputs of a real kernel must change when it does not run).
- LibraryOpCensus: a TorchDispatchMode that records every torch operator forward runs outside the
  candidate's own launches; the strict policy rejects compute operators.
- gpu_kernel_share: torch.profiler (CUPTI) time of the candidate's own kernels over all GPU time.
- poison_free_memory: fills free allocator blocks with NaN bytes so an unwritten output is visible.
"""
from __future__ import annotations

import contextlib
import re
import time

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Operators that allocate, reshape, move or fill memory: what a kernel's host code legitimately does.
LAYOUT_OPS = {
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros", "zeros_like", "new_zeros",
    "ones", "ones_like", "new_ones", "full", "full_like", "new_full", "fill", "fill_", "zero_", "view",
    "_unsafe_view", "reshape", "as_strided", "t", "transpose", "permute", "expand", "squeeze", "unsqueeze",
    "flatten", "unflatten", "contiguous", "clone", "copy_", "_to_copy", "to", "detach", "alias", "select",
    "slice", "split", "split_with_sizes", "chunk", "narrow", "unbind", "lift_fresh", "resize_", "cat",
    "stack", "_local_scalar_dense", "sym_size", "sym_stride", "sym_numel", "sym_storage_offset", "size",
    "stride", "numel", "dim", "is_same_size", "arange", "view_as", "expand_as", "reshape_as", "movedim",
    "swapaxes", "diagonal", "unfold", "pad", "constant_pad_nd", "item", "set_", "record_stream",
    "_reshape_alias", "unsafe_split", "unsafe_chunk",
}


def _op_name(func) -> str:
    name = getattr(func, "__name__", str(func))
    return name.split(".")[0]


class LaunchRecorder:
    """Patches Triton's launch entry points and hooks kernelzero.cuda; one instance per process."""

    def __init__(self):
        self.launches = []         # kernel names, in order
        self.enabled = True
        self.inside = 0            # >0 while a custom launch runs (census ignores its internals)
        self.custom_seconds = 0.0
        self.launch_error = None   # (kernel name, exception) of the first launch that raised
        self.measuring = False     # while True, CUDA events bracket every custom launch
        self.spans = []
        # Entered around every Triton JIT compile (a cache miss at launch): the candidate's child lets
        # the device lock go there (device_lock.released).
        self.compile_context = contextlib.nullcontext
        self._open = None
        self._install()

    def _record(self, name):
        self.launches.append(name)

    def _span_start(self):
        if self.measuring and self.enabled:
            self._open = torch.cuda.Event(enable_timing=True)
            self._open.record()

    def _span_end(self):
        if self.measuring and self._open is not None:
            end = torch.cuda.Event(enable_timing=True)
            end.record()
            self.spans.append((self._open, end))
            self._open = None

    def _install(self):
        rec = self
        try:
            from kernelzero import cuda as kzc

            def hook(name, phase):
                if phase == "start":
                    rec._record(name)
                    rec._span_start()
                else:
                    rec._span_end()
            kzc.set_launch_hook(hook)
            self._kzc = kzc
        except Exception:
            self._kzc = None
        try:
            import triton.runtime.jit as tjit
            classes = [tjit.JITFunction]
            try:
                from triton.runtime.interpreter import InterpretedFunction
                classes.append(InterpretedFunction)
            except ImportError:
                pass
            for cls in classes:
                orig = cls.run

                def run(self_fn, *args, _orig=orig, **kwargs):
                    if kwargs.get("warmup"):
                        return _orig(self_fn, *args, **kwargs)
                    fn = getattr(self_fn, "fn", None)
                    rec._record(getattr(fn, "__name__", None) or getattr(self_fn, "__name__", "triton_kernel"))
                    if not rec.enabled:
                        return None
                    rec.inside += 1
                    t0 = time.perf_counter()
                    rec._span_start()
                    try:
                        return _orig(self_fn, *args, **kwargs)
                    except BaseException as e:
                        if rec.launch_error is None:
                            rec.launch_error = (rec.launches[-1], e)
                        raise
                    finally:
                        rec._span_end()
                        rec.custom_seconds += time.perf_counter() - t0
                        rec.inside -= 1
                cls.run = run
            orig_compile = getattr(tjit.JITFunction, "_do_compile", None)
            if orig_compile is not None:
                def do_compile(self_fn, *args, _orig=orig_compile, **kwargs):
                    with rec.compile_context():
                        return _orig(self_fn, *args, **kwargs)
                tjit.JITFunction._do_compile = do_compile
            # A compiled kernel's first launch loads it and builds its launcher (a C compile on a
            # cache miss): host work like the compile itself.
            from triton.compiler import compiler as tcompiler
            orig_init = getattr(tcompiler.CompiledKernel, "_init_handles", None)
            if orig_init is not None:
                def init_handles(kernel, _orig=orig_init):
                    if kernel.module is not None:
                        return _orig(kernel)
                    with rec.compile_context():
                        return _orig(kernel)
                tcompiler.CompiledKernel._init_handles = init_handles
        except ImportError:
            pass

    def set_enabled(self, flag: bool):
        self.enabled = flag
        if self._kzc is not None:
            self._kzc.launches_enabled(flag)

    def reset(self):
        self.launches = []
        self.custom_seconds = 0.0

    def begin_job(self):
        """Forgets everything a previous job in this process left (its launches, a launch error, an
        ablation or a measurement it did not finish)."""
        self.reset()
        self.set_enabled(True)
        self.inside = 0
        self.launch_error = None
        self.measuring = False
        self.spans = []
        self._open = None
        self.compile_context = contextlib.nullcontext


class LibraryOpCensus(TorchDispatchMode):
    def __init__(self, recorder: LaunchRecorder):
        super().__init__()
        self.recorder = recorder
        self.compute_ops = {}
        self.all_ops = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.recorder.inside == 0:
            name = _op_name(func)
            self.all_ops[name] = self.all_ops.get(name, 0) + 1
            if name not in LAYOUT_OPS:
                self.compute_ops[name] = self.compute_ops.get(name, 0) + 1
        return func(*args, **(kwargs or {}))


class _OpSpans(TorchDispatchMode):
    """CUDA events around every torch operator run outside the candidate's own launches."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder
        self.spans = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.recorder.inside:
            return func(*args, **(kwargs or {}))
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        out = func(*args, **(kwargs or {}))
        end.record()
        self.spans.append((start, end))
        return out


def event_kernel_share(fn, inputs, recorder, device, queue_ahead_cycles):
    """Share of GPU time in the candidate's own kernels, from CUDA events around each of its launches
    and around each torch operator (allocations cost ~0). Used when every custom launch goes through
    our hooks (Triton, kernelzero.cuda): far cheaper than starting the profiler in every process.

    A spin kernel of `queue_ahead_cycles` keeps the GPU busy while the host queues the whole forward:
    an event pair then measures the GPU executing what lies between them, not the host's launch gaps
    (which, on small problems, would otherwise dominate every span). Returns (share, enqueue_ms); a
    share whose enqueue outlasted the spin may hold such gaps. Meant to run with the device to itself
    (harness.time_callable's probe): another process's kernels in a span would count as ours."""
    torch.cuda.synchronize(device)
    recorder.spans = []
    recorder.measuring = True
    ops = _OpSpans(recorder)
    try:
        torch.cuda._sleep(int(queue_ahead_cycles))
        h0 = time.perf_counter()
        with torch.no_grad(), ops:
            fn(*inputs)
        enqueue_ms = (time.perf_counter() - h0) * 1e3
        torch.cuda.synchronize(device)
    finally:
        recorder.measuring = False
    custom = sum(s.elapsed_time(e) for s, e in recorder.spans)
    other = sum(s.elapsed_time(e) for s, e in ops.spans)
    total = custom + other
    return (custom / total if total > 0 else None), enqueue_ms


def gpu_kernel_share(fn, inputs, kernel_names, device):
    """Runs fn once under the CUDA profiler; returns (fraction of GPU time in the candidate's own kernels,
    {kernel name: microseconds})."""
    from torch.profiler import ProfilerActivity, profile
    pats = [re.compile(r"(?<![A-Za-z0-9_])" + re.escape(n) + r"(?![A-Za-z0-9_])") for n in kernel_names]
    torch.cuda.synchronize(device)
    with profile(activities=[ProfilerActivity.CUDA]) as prof, torch.no_grad():
        fn(*inputs)
        torch.cuda.synchronize(device)
    total = 0.0
    custom = 0.0
    per_kernel = {}
    for e in prof.events():
        if not str(getattr(e, "device_type", "")).endswith("CUDA"):
            continue
        t = getattr(e, "device_time", None)
        if t is None:
            t = getattr(e, "cuda_time", 0.0)
        t = float(t or 0.0)
        total += t
        per_kernel[e.name[:120]] = per_kernel.get(e.name[:120], 0.0) + t
        if any(p.search(e.name) for p in pats):
            custom += t
    return (custom / total if total > 0 else None), per_kernel


MAX_POISON_BLOCK = 256 << 20
_poison_host = None  # pinned 0xFF bytes, the source of every poison block on CUDA


def poison_free_memory(device, sizes_bytes=()):
    """Allocates and frees NaN-byte (0xFF) blocks so the caching allocator hands out poisoned memory:
    an output the candidate never writes reads as NaN, never as someone else's result.

    On CUDA the blocks are filled by host-to-device copies from a pinned buffer rather than by a fill
    kernel: a fresh process pays for loading (and decompressing) every torch kernel it touches for
    the first time, and the harness keeps that cost off every job by launching no torch kernels."""
    global _poison_host
    dev = torch.device(device)
    top = 27 if dev.type == "cuda" else 21  # on the CPU large blocks go back to the OS anyway
    sizes = sorted(set(min(int(s), MAX_POISON_BLOCK) for s in sizes_bytes if s > 0))
    sizes += [1 << k for k in range(9, top, 2)]
    if dev.type == "cuda":
        if _poison_host is None or _poison_host.numel() < max(sizes):
            _poison_host = torch.full((max(sizes),), 255, dtype=torch.uint8).pin_memory()

        def block(s):
            return torch.empty(s, dtype=torch.uint8, device=dev).copy_(_poison_host[:s], non_blocking=True)
    else:
        def block(s):
            return torch.full((s,), 255, dtype=torch.uint8)
    blocks = [block(s) for s in sizes for _ in range(2)]
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    del blocks
