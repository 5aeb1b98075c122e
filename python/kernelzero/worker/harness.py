"""What the reference and candidate sides share: loading modules, deterministic inputs, output
metadata, comparison and timing. Both sides derive every input from the job's secret seed, so inputs
never travel between processes and the candidate never receives a reference output."""
from __future__ import annotations

import hashlib
import importlib.util
import math
import os
import random
import statistics
import sys
import time

import torch

from . import device_lock

DEFAULT_TOLERANCES = {  # dtype -> (atol, rtol); fp32 per the design, looser for reduced precision
    "torch.float32": (1e-2, 1e-2), "torch.float64": (1e-2, 1e-2), "torch.float16": (2e-2, 2e-2),
    "torch.bfloat16": (5e-2, 5e-2), "torch.complex64": (1e-2, 1e-2),
}


class TaskError(RuntimeError):
    """The task module itself is broken: never the candidate's fault."""


def source_hash(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def load_module(source: str, name: str, directory: str):
    """Imports `source` as module `name` from a file in `directory` (Triton reads kernel source through
    inspect, which needs a real file)."""
    path = os.path.join(directory, f"{name}.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write(source)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


def seed_everything(seed: int) -> None:
    seed = int(seed) % (1 << 63)
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy
        numpy.random.seed(seed % (1 << 32))
    except ImportError:
        pass


def to_device(obj, device, copy=False):
    """Tensors (in nested lists and tuples) on `device`; copy=True gives new tensors even where they are
    there already."""
    if isinstance(obj, torch.Tensor):
        return obj.to(device, copy=copy)
    if isinstance(obj, (list, tuple)):
        return type(obj)(to_device(o, device, copy) for o in obj)
    return obj


def make_inputs(task, seed: int, device):
    """The task's inputs for `seed`, on `device`. Off the CPU they are made there (a torch.device
    context around get_inputs: factories without a device argument allocate on it), so a multi-GiB
    input costs the device milliseconds instead of the host seconds, and nothing is copied. Every
    process that makes inputs for a seed on a device gets the same values (the generators are
    seeded from it); a get_inputs that cannot run that way (NumPy interop, say) is made on the CPU
    and moved, by every process alike."""
    dev = torch.device(device)
    seed_everything(seed)
    inputs = None
    if dev.type != "cpu":
        try:
            with dev:
                inputs = task.get_inputs()
        except Exception:  # noqa: BLE001 - made on the CPU below, as every side does
            seed_everything(seed)
            inputs = None
    if inputs is None:
        inputs = task.get_inputs()
    if not isinstance(inputs, (list, tuple)):
        raise TaskError(f"get_inputs() returned {type(inputs).__name__}, not a list")
    return [to_device(x, dev) for x in inputs]


# Seeds of one job's input sets, from its secret seed: both sides derive them here.
TIMING_SETS = 3


def slot_seed(seed: int, slot: str, index: int = 0) -> int:
    """The input seed of a compared output: trial i, timing set m, the re-check or the ablation."""
    base = {"trial": 1, "recheck": 101, "timing": 201, "ablation": 301}[slot]
    return int(seed) + base + int(index)


def storage_bytes(out) -> int:
    """Bytes of the storages behind an output's tensors (what holding it costs, views included)."""
    return sum(t.untyped_storage().nbytes() if t.device.type != "meta" else 0
               for t in flatten(out) if isinstance(t, torch.Tensor))


def logical_bytes(out) -> int:
    return sum(t.numel() * t.element_size() for t in flatten(out) if isinstance(t, torch.Tensor))


def init_inputs(task, seed: int):
    seed_everything(seed)
    args = task.get_init_inputs()
    if not isinstance(args, (list, tuple)):
        raise TaskError(f"get_init_inputs() returned {type(args).__name__}, not a list")
    return list(args)


def build(cls, args, seed: int, device):
    seed_everything(seed)
    model = cls(*args)
    return model.to(device).eval() if isinstance(model, torch.nn.Module) else model


def flatten(out):
    """Outputs as a list of leaves: a tensor is one leaf, tuples/lists are flattened in order."""
    if isinstance(out, (list, tuple)):
        leaves = []
        for o in out:
            leaves += flatten(o)
        return leaves
    return [out]


def meta_of(out):
    """Shape/dtype/device description of an output (not its values)."""
    if isinstance(out, torch.Tensor):
        return {"kind": "tensor", "shape": list(out.shape), "dtype": str(out.dtype), "device": out.device.type}
    if isinstance(out, (list, tuple)):
        return {"kind": type(out).__name__, "items": [meta_of(o) for o in out]}
    if isinstance(out, (int, float, bool)) or out is None:
        return {"kind": type(out).__name__}
    return {"kind": type(out).__name__}


def meta_mismatch(expected, got, path="output"):
    """None when `got` has the expected structure, shapes, dtypes and devices; else the reason."""
    if expected["kind"] != got["kind"]:
        return f"{path} is a {got['kind']}, expected a {expected['kind']}"
    if expected["kind"] == "tensor":
        for key in ("shape", "dtype", "device"):
            if expected[key] != got[key]:
                return f"{path} has {key} {got[key]}, expected {expected[key]}"
        return None
    if "items" in expected:
        if len(expected["items"]) != len(got["items"]):
            return f"{path} has {len(got['items'])} items, expected {len(expected['items'])}"
        for i, (e, g) in enumerate(zip(expected["items"], got["items"])):
            r = meta_mismatch(e, g, f"{path}[{i}]")
            if r:
                return r
    return None


# Elements compared at once: bounds the comparison's scratch memory (a few float64 copies of a chunk)
# however large the output is.
COMPARE_CHUNK = 1 << 23


def _paired_chunks(a, b, limit):
    """Flat, equally long pieces of `a` and `b` (same shape, any strides) of at most `limit` elements,
    in the same order; only a piece is ever copied."""
    if a.dim() == 0 or a.numel() <= limit:
        yield a.reshape(-1), b.reshape(-1)
        return
    per_row = a[0].numel()
    if per_row > limit:
        for i in range(a.shape[0]):
            yield from _paired_chunks(a[i], b[i], limit)
        return
    rows = max(1, limit // max(per_row, 1))
    for s in range(0, a.shape[0], rows):
        yield a[s:s + rows].reshape(-1), b[s:s + rows].reshape(-1)


def _failed(reason, meta=True, max_abs=None, max_rel=None):
    return {"ok": False, "reason": reason, "max_abs_err": max_abs, "max_rel_err": max_rel, "meta": meta}


def _compare_floats(i, r, o, atol, rtol):
    """One floating-point leaf, in chunks on the leaf's device; a single synchronisation at the end."""
    dev = r.device
    zero = torch.zeros((), dtype=torch.float64, device=dev)
    max_abs, max_rel, diff_sq, ref_sq = zero.clone(), zero.clone(), zero.clone(), zero.clone()
    n_nonfinite_bad = torch.zeros((), dtype=torch.int64, device=dev)
    n_unreproduced, n_bad = n_nonfinite_bad.clone(), n_nonfinite_bad.clone()
    for rc, oc in _paired_chunks(r, o, COMPARE_CHUNK):
        rf, of = rc.double(), oc.double()
        ref_finite = torch.isfinite(rf)
        n_nonfinite_bad += (~torch.isfinite(of) & ref_finite).sum()
        same_nonfinite = (of == rf) | (torch.isnan(of) & torch.isnan(rf))
        n_unreproduced += ((~ref_finite) & ~same_nonfinite).sum()
        diff = torch.where(ref_finite, (of - rf).abs(), zero)
        if diff.numel():
            max_abs = torch.maximum(max_abs, torch.nan_to_num(diff, nan=float("inf")).max())
            rel = diff / rf.abs().clamp_min(1e-12)
            max_rel = torch.maximum(max_rel, torch.nan_to_num(rel, nan=float("inf")).max())
        n_bad += ((diff > atol + rtol * rf.abs()) & ref_finite).sum()
        diff_sq += torch.nan_to_num(diff, nan=float("inf")).square().sum()
        ref_sq += torch.where(ref_finite, rf, zero).square().sum()
    stats = torch.stack([max_abs, max_rel, diff_sq, ref_sq, n_nonfinite_bad.double(), n_unreproduced.double(),
                         n_bad.double()]).tolist()
    max_abs_v, max_rel_v, diff_sq_v, ref_sq_v, nonfinite_bad, unreproduced, bad = stats
    # Errors past float64's range are reported as unknown (JSON has no infinity).
    max_abs_v, max_rel_v = finite_or_none(max_abs_v), finite_or_none(max_rel_v)
    if nonfinite_bad:
        return _failed(f"output leaf {i}: {int(nonfinite_bad)} NaN/Inf values where the reference is finite")
    if unreproduced:
        return _failed(f"output leaf {i}: non-finite reference values not reproduced")
    if bad:
        return _failed(f"output leaf {i}: {int(bad)} of {r.numel()} elements outside atol={atol} rtol={rtol} "
                       f"(max abs err {max_abs_v if max_abs_v is None else f'{max_abs_v:.4g}'})", True, max_abs_v,
                       max_rel_v)
    # Elementwise allclose passes anything when the reference is far below atol (zeros pass a
    # softmax over 4096 columns: KernelBench issue #165); the error relative to the reference's
    # own norm must also be small.
    ref_norm = math.sqrt(ref_sq_v)
    if math.isfinite(ref_norm) and ref_norm > 1e-12 * max(1, r.numel()) ** 0.5:
        rel_l2 = math.sqrt(diff_sq_v) / ref_norm
        if rel_l2 > rtol:
            return _failed(f"output leaf {i}: relative L2 error {rel_l2:.3g} exceeds {rtol} "
                           "(elementwise within atol only because the reference is tiny)", True, max_abs_v, max_rel_v)
    return {"ok": True, "max_abs_err": max_abs_v, "max_rel_err": max_rel_v}


def compare(ref, out, tolerances=None):
    """Compares candidate output `out` with reference `ref`, on the reference's device, in chunks (so
    a multi-GiB output needs no more than a few chunks of scratch). Returns a dict with ok, reason,
    max_abs_err and max_rel_err. NaN/Inf where the reference is finite fails."""
    tolerances = tolerances or DEFAULT_TOLERANCES
    mm = meta_mismatch(meta_of(ref), meta_of(out))
    if mm:
        return _failed(mm, meta=False)
    max_abs = 0.0
    max_rel = 0.0
    for i, (r, o) in enumerate(zip(flatten(ref), flatten(out))):
        if not isinstance(r, torch.Tensor):
            if r != o:
                return _failed(f"output leaf {i} is {o!r}, expected {r!r}")
            continue
        o = o.to(r.device)
        atol, rtol = tolerances.get(str(r.dtype), (1e-2, 1e-2))
        if r.dtype == torch.bool or not (r.is_floating_point() or r.is_complex()):
            bad = sum(int((rc != oc).sum()) for rc, oc in _paired_chunks(r, o, COMPARE_CHUNK))
            if bad:
                return _failed(f"output leaf {i}: {bad} of {r.numel()} elements differ")
            continue
        if r.is_complex():
            r, o = torch.view_as_real(r), torch.view_as_real(o)
        res = _compare_floats(i, r, o, atol, rtol)
        if not res["ok"]:
            return res
        max_abs = max(max_abs, res["max_abs_err"] or 0.0)
        max_rel = max(max_rel, res["max_rel_err"] or 0.0)
    return {"ok": True, "reason": "", "max_abs_err": max_abs, "max_rel_err": max_rel, "meta": True}


def bitwise_view(t):
    """`t`'s bytes as integers of its element size (a view: comparing these compares bit patterns,
    NaNs included, with one integer kernel whatever the dtype)."""
    kinds = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}
    k = kinds.get(t.element_size())
    if t.dtype == torch.bool or k is None or t.is_complex():
        return t
    return t.view(k)


def first_changed(snapshot, inputs):
    """Index of the first tensor input whose bits differ from its snapshot (compared on its device, in
    chunks: no mask the size of the input), else None."""
    for k, (a, b) in enumerate(zip(snapshot, inputs)):
        if isinstance(a, torch.Tensor):
            if not isinstance(b, torch.Tensor) or a.shape != b.shape or a.dtype != b.dtype:
                return k
            if not all(torch.equal(x, y) for x, y in _paired_chunks(bitwise_view(a), bitwise_view(b), COMPARE_CHUNK)):
                return k
    return None


def device_index(device) -> int:
    """The CUDA device index of `device` ("cuda" alone: the current device), for the torch.cuda calls
    that take no index-less device."""
    dev = torch.device(device)
    return dev.index if dev.index is not None else torch.cuda.current_device()


def sync(device):
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def free_cached_memory(device, lock_path):
    """Gives the caching allocator's free device memory back to the driver, under the shared device
    lock: freeing multi-GiB segments is device work that must not land in another job's timed
    iterations."""
    if torch.device(device).type == "cuda":
        with device_lock.hold(lock_path, exclusive=False):
            torch.cuda.synchronize(device)
            torch.cuda.empty_cache()


def summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def median_ci_halfwidth(values):
    """Half the width of a distribution-free ~95% confidence interval of the median (order statistics
    n/2 -/+ 0.98 sqrt(n)), or None for fewer than 6 values."""
    n = len(values)
    if n < 6:
        return None
    v = sorted(values)
    lo = max(1, round(n / 2 - 0.98 * math.sqrt(n)))
    hi = min(n, round(n / 2 + 1 + 0.98 * math.sqrt(n)))
    return (v[hi - 1] - v[lo - 1]) / 2


# Part of the baseline cache's key: reference timings measured by another method are not reused.
TIMING_METHOD = "cuda-events-after-spin-2"

_spin_cycles_per_ms = {}


def _cycles_per_ms(dev):
    """Clock cycles of torch.cuda._sleep per millisecond on this device, measured once per process."""
    key = str(dev)
    if key not in _spin_cycles_per_ms:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        torch.cuda.synchronize(dev)
        _spin_cycles_per_ms[key] = cycles / max(start.elapsed_time(end), 1e-3)
    return _spin_cycles_per_ms[key]


class InputSets:
    """The timing loop's input sets, made from their seeds by `make(seed)`: kept when all of them fit
    in `keep_bytes`, else made again each time one is needed (on the device that costs milliseconds,
    and the loop then holds one set beside its buffers instead of all of them)."""

    def __init__(self, make, seeds, keep_bytes):
        self.make, self.seeds = make, list(seeds)
        first = make(self.seeds[0])
        self.kept = None
        if len(self.seeds) * max(logical_bytes(first), 1) <= keep_bytes:
            self.kept = [first] + [make(s) for s in self.seeds[1:]]
        self._first = first if self.kept is None else None

    def __len__(self):
        return len(self.seeds)

    def get(self, m):
        if self.kept is not None:
            return self.kept[m]
        if self._first is not None and m == 0:
            first, self._first = self._first, None
            return first
        return self.make(self.seeds[m])


# The longest spin kernel the timing loop puts ahead of a forward, in ms.
MAX_SPIN_MS = 50.0
# A probe's forward runs instrumented (an event pair per operator), so it enqueues slower than the
# timed ones: its spin is this many times the longest enqueue seen, and at least MIN_PROBE_SPIN_MS.
PROBE_AHEAD = 4.0
MIN_PROBE_SPIN_MS = 0.5


def time_callable(fn, input_sets, device, iters, warmup=3, buffers=2, lock_path=None, checks=10,
                  min_iters=None, precision=None, budget_ms=None, keep=None, probe=None):
    """Times fn(*inputs) the way the design's section 5.4 says.

    `input_sets` are M distinct input lists (a list, or an InputSets). The loop owns `buffers` input
    buffers (so pointers rotate) and, before every iteration, refreshes the chosen buffer in place
    with the next input set (so the same pointer sees new values: a result cached by pointer or
    identity is stale). On CUDA: L2 flushed before each iteration, then CUDA events on the current
    stream around the call.

    The timed iterations measure the device, not the host: before the start event the stream is kept
    busy by a spin kernel that outlasts the host's enqueueing of forward (twice the longest enqueue
    seen so far), so the interval holds forward's kernels back to back rather than the gaps in which
    the host was still launching them. Without it a small task's time is mostly Python and launch
    latency, which a busy host (other jobs, compilers) stretches at random: a module timed against
    itself came out at 0.31x-0.97x. Timed iterations whose enqueue outlasted the spin (the device may
    have waited for the host) are counted in `host_bound_iters`; a forward that synchronises inside is
    timed with its waits, as it should be.

    Adaptive length: at most `iters` timed iterations; after `min_iters` (when given) the loop stops
    as soon as the median is known to +-`precision` (relative half-width of its ~95% interval) or the
    timed iterations add up to `budget_ms`. Warm-up and timed iterations hold the device lock
    exclusively; nothing else of the verifier's runs on the device meanwhile.

    Work on other streams could run during the spin, unseen by the events, so `checks` further
    iterations run without it (under the shared lock) and measure `outside_stream_ms`: once the timed
    stream's end event has completed, how long a device-wide synchronise still waits, beyond what a
    synchronise with nothing to wait for costs the harness at that moment.

    Each input set's output is taken from one of these untimed ones, run straight after one on
    another set (so at least 2M run): a forward that returns a cached result when called at the
    loop's pace returns another set's. With `keep`, keep(m, output) is called for it outside the lock
    (what it raises ends the loop) and nothing is returned for it; otherwise last_outputs[m] holds
    it. `host_ms` is the host's time in the call (on
    CUDA: enqueueing, not waiting).

    `probe(inputs, queue_ahead_cycles) -> (value, enqueue_ms)` (CUDA only) is one more measurement that
    needs the device to itself, run once after the timed iterations without giving up the lock: its
    spin kernel is sized from the enqueue times seen here (PROBE_AHEAD x the longest), and when its
    own enqueue outlasts that, it runs once more behind the longest spin. Its value is `probe` in the
    timings. Returns (timings, last_outputs).

    One function on purpose: its closures share the iteration's buffers, lock holds and spin sizing,
    and a split changes what runs under each hold, which only the GPU parity suite can re-check."""
    dev = torch.device(device)
    is_cuda = dev.type == "cuda"
    m_sets = len(input_sets)
    get = input_sets.get if isinstance(input_sets, InputSets) else input_sets.__getitem__
    bufs = []
    flush_src = flush_dst = None
    cycles_per_ms = None
    with device_lock.hold(lock_path, exclusive=False):
        for b in range(buffers):
            src = get(b % m_sets)
            bufs.append([x.clone() if isinstance(x, torch.Tensor) else x for x in src])
            del src
        if is_cuda:
            # L2 is flushed by a device-to-device copy of twice its size (a copy engine memcpy: no
            # torch kernel to load in a fresh process).
            l2 = getattr(torch.cuda.get_device_properties(dev), "L2_cache_size", 64 << 20) or (64 << 20)
            flush_src = torch.empty(2 * l2, dtype=torch.uint8, device=dev)
            flush_dst = torch.empty_like(flush_src)
            cycles_per_ms = _cycles_per_ms(dev)
    if not is_cuda:
        checks = 0
    # Untimed iterations: `checks`, and at least one kept per input set, each after one on another set.
    tail = max(checks, 2 * m_sets if m_sets >= 2 else m_sets)
    min_iters = min(int(min_iters), iters) if min_iters else iters
    event_ms, host_ms, outside_ms, spin_ms = [], [], [], []
    host_bound = 0
    longest_enqueue_ms = 0.0
    last = [None] * m_sets
    j = 0  # iterations so far: the input set and buffer of the next

    def refill(s=None):
        """The next iteration's buffer, holding input set `s` (default: the next in turn): (set
        index, buffer)."""
        nonlocal j
        s = j % m_sets if s is None else s
        buf = bufs[j % buffers]
        j += 1
        src, sx = get(s), None
        for bx, sx in zip(buf, src):
            if isinstance(bx, torch.Tensor):
                bx.copy_(sx)
        del src, sx  # a set made again for this iteration is not held through forward
        return s, buf

    def one(timed, measure_outside, s=None):
        nonlocal longest_enqueue_ms, host_bound
        s, buf = refill(s)
        if not is_cuda:
            h0 = time.perf_counter()
            out = fn(*buf)
            if timed:
                host_ms.append((time.perf_counter() - h0) * 1e3)
            return s, out
        flush_dst.copy_(flush_src)
        torch.cuda.synchronize(dev)
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        spin = min(max(2.0 * longest_enqueue_ms, 0.05), MAX_SPIN_MS)
        if timed:
            torch.cuda._sleep(int(spin * cycles_per_ms))
        h0 = time.perf_counter()
        start.record()
        out = fn(*buf)
        end.record()
        returned = time.perf_counter()
        # First wait for the timed stream alone, then for the whole device: the second wait is
        # work on other streams. Both it and the harness's reference synchronise below start with
        # the timed stream idle, so the host's wake-up latency (large and erratic on a loaded
        # host) is in both and cancels.
        end.synchronize()
        t_end = time.perf_counter()
        torch.cuda.synchronize(dev)
        t_all = time.perf_counter()
        n0 = time.perf_counter()
        torch.cuda.synchronize(dev)
        n1 = time.perf_counter()
        enqueue = (returned - h0) * 1e3
        longest_enqueue_ms = max(longest_enqueue_ms, enqueue)
        if timed:
            event_ms.append(start.elapsed_time(end))
            host_ms.append(enqueue)
            spin_ms.append(spin)
            host_bound += enqueue > spin
        elif measure_outside:
            outside_ms.append(((t_all - t_end) - (n1 - n0)) * 1e3)
        return s, out

    def enough():
        n = len(event_ms) if is_cuda else len(host_ms)
        if n >= iters:
            return True
        if n < min_iters:
            return False
        times = event_ms if is_cuda else host_ms
        if budget_ms and sum(times) >= budget_ms:
            return True
        if precision:
            half = median_ci_halfwidth(times)
            return half is not None and half <= precision * statistics.median(times)
        return False

    with torch.no_grad():
        with device_lock.hold(lock_path, exclusive=True):
            for _ in range(warmup):
                one(False, False)
            while not enough():
                one(True, False)
            probed = None
            if probe is not None and is_cuda:
                ahead = min(max(PROBE_AHEAD * longest_enqueue_ms, MIN_PROBE_SPIN_MS), MAX_SPIN_MS)
                _, buf = refill()
                probed, enqueue = probe(buf, int(ahead * cycles_per_ms))
                if enqueue > ahead and ahead < MAX_SPIN_MS:
                    probed, enqueue = probe(buf, int(MAX_SPIN_MS * cycles_per_ms))
        # The untimed iterations in one shared hold, then one per input set whose output is kept:
        # keep (a send to the reference) waits on another process, outside the lock. Each kept
        # iteration comes straight after one on another set, in the same hold, as a timed one does:
        # a forward that tells the timing loop by its pace and returns its previous output there
        # hands back another set's answer.
        pairs = m_sets >= 2
        kept_from = tail - (2 * m_sets if pairs else m_sets)
        with device_lock.hold(lock_path, exclusive=False):
            for k in range(kept_from):
                one(False, k < checks)
        k = kept_from
        for s in range(m_sets):
            with device_lock.hold(lock_path, exclusive=False):
                if pairs:
                    one(False, k < checks, (s - 1) % m_sets)
                    k += 1
                s, out = one(False, k < checks, s)
                k += 1
            if keep is not None:
                keep(s, out)
            else:
                last[s] = out
            del out
    result = {"host_ms": summary(host_ms) if host_ms else None,
              "event_ms": summary(event_ms) if event_ms else None,
              "outside_stream_ms": summary(outside_ms) if outside_ms else None}
    if is_cuda and event_ms:
        result["method"] = TIMING_METHOD
        result["spin_ms"] = summary(spin_ms)
        result["host_bound_iters"] = host_bound
        if probe is not None:
            result["probe"] = probed
    return result, last


def device_name(device):
    dev = torch.device(device)
    if dev.type == "cuda":
        return torch.cuda.get_device_name(dev)
    import platform
    return f"cpu:{platform.machine()}"


def describe_exception(e: BaseException) -> str:
    s = f"{type(e).__name__}: {e}"
    return s if len(s) < 4000 else s[:4000] + "..."


def is_cuda_error(e: BaseException) -> bool:
    s = str(e)
    return any(k in s for k in ("CUDA error", "cudaError", "illegal memory access", "CUDA_ERROR",
                                "misaligned address", "unspecified launch failure", "device-side assert"))


def is_memory_error(e: BaseException) -> bool:
    """Failures that mean the device ran out of memory, directly or inside a library that says so its
    own way (cuDNN's internal and execution errors included: under memory pressure that is how its
    workspace allocations fail)."""
    if isinstance(e, torch.OutOfMemoryError):
        return True
    s = str(e)
    return any(k in s for k in ("out of memory", "CUDA_ERROR_OUT_OF_MEMORY", "CUBLAS_STATUS_ALLOC_FAILED",
                                "CUDNN_STATUS_ALLOC_FAILED", "CUDNN_STATUS_INTERNAL_ERROR",
                                "CUDNN_STATUS_EXECUTION_FAILED", "cudaErrorMemoryAllocation"))


def finite_or_none(x):
    return None if x is None or (isinstance(x, float) and not math.isfinite(x)) else x
