"""Validation of a proposed task module, in the trusted reference worker (design section 4). Every
check is reported by name, pass / fail / skip, with a reason for each failure:

format, runs, deterministic, no_randomness, non_degenerate, input_dependent, well_conditioned,
uses_api_set, runtime_band, memory_band, and compile (torch.compile's output against eager: only when asked, and
only for a module that passed every other check; skipped otherwise).

novel and decontaminated compare sources with the task store and benchmark sets; the controller
computes them.

A reply marked "memory_failure" ran out of device memory somewhere; with other validations beside it,
that may be their doing, and the controller runs the module again alone (tasks/validation.cpp)."""
from __future__ import annotations

import ast
import gc
import inspect
import itertools
import os
import shutil
import sys
import tempfile
import time

import torch

from . import harness

_counter = itertools.count()

RANDOM_CALLS = {"rand", "randn", "randint", "randperm", "rand_like", "randn_like", "randint_like", "bernoulli",
                "multinomial", "normal", "poisson", "normal_", "uniform_", "exponential_", "geometric_",
                "cauchy_", "log_normal_", "random_", "bernoulli_", "dropout", "dropout1d", "dropout2d", "dropout3d",
                "alpha_dropout", "feature_alpha_dropout", "rrelu"}


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def _aliases(tree):
    """Local names of imported modules: {"F": "torch.nn.functional", "nn": "torch.nn", ...}."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _references(tree):
    """Resolved dotted names referenced anywhere (torch.nn.Conv2d, torch.relu, ...) and the method
    names called on any expression (x.sum(...) -> "sum")."""
    aliases = _aliases(tree)
    names, methods = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Attribute, ast.Name)):
            d = _dotted(node)
            if d:
                head, _, rest = d.partition(".")
                full = aliases.get(head, head) + ("." + rest if rest else "")
                names.add(full)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            methods.add(node.func.attr)
    return names, methods


def _uses(api, names, methods):
    target = api["torch"]
    if target in names:
        return True
    # torch.sum(x) may be written x.sum(); F.relu may be torch.relu; nn.functional.x as F.x.
    leaf = target.rsplit(".", 1)[-1]
    if target.startswith("torch.") and not target.startswith("torch.nn.") and leaf in methods:
        return True
    return any(n.endswith("." + leaf) and n.startswith("torch") for n in names)


def _forward_randomness(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "Model":
            for f in node.body:
                if isinstance(f, ast.FunctionDef) and f.name == "forward":
                    for n in ast.walk(f):
                        if isinstance(n, ast.Call):
                            name = n.func.attr if isinstance(n.func, ast.Attribute) else getattr(n.func, "id", "")
                            if name in RANDOM_CALLS:
                                return name
    return None


def _leaves(out):
    return [t for t in harness.flatten(out) if isinstance(t, torch.Tensor)]


def _same(a, b, exact=False):
    la, lb = _leaves(a), _leaves(b)
    if len(la) != len(lb):
        return False
    for x, y in zip(la, lb):
        if x.shape != y.shape or x.dtype != y.dtype:
            return False
        if exact or not x.is_floating_point():
            if not torch.equal(x, y):
                return False
        elif not torch.allclose(x, y, rtol=1e-5, atol=1e-6, equal_nan=True):
            return False
    return True


def warm_up(req):
    """Pays a reference worker's one-time costs before its first validation or job, so that they do
    not land on either: the CUDA context and the comparison's kernels, and with "compile", Inductor's
    import and set-up and a first compilation (several seconds on a GPU, where Triton compiles too)."""
    device = torch.device(req.get("device", "cpu"))
    t0 = time.perf_counter()
    x = torch.randn(64, 64, device=device)
    _cap_memory(device, req.get("memory_cap_bytes"))
    harness.compare(x, x.clone())
    harness.sync(device)
    res = {"ok": True, "context_s": time.perf_counter() - t0, "compile_s": None}
    if req.get("compile"):
        t0 = time.perf_counter()
        fn = torch.compile(lambda t: torch.relu(t * 2.0 + 1.0).sum(-1))  # a pointwise and a reduction kernel
        with torch.no_grad():
            fn(x)
        harness.sync(device)
        res["compile_s"] = time.perf_counter() - t0
    return res


def _cap_memory(device, cap_bytes):
    """What this worker's allocator may hold on the GPU (the validator's share of the device): a
    module that needs more fails here, not a job beside it."""
    if cap_bytes and device.type == "cuda":
        index = harness.device_index(device)
        total = torch.cuda.get_device_properties(index).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, int(cap_bytes) / total), index)


def _mib(tensors):
    """MiB the tensors' elements take."""
    return harness.logical_bytes(tensors) / 2**20


def _declared(mod):
    """(MiB of the parameters, buffers and inputs a task declares, its model, its inputs), all on
    the meta device: no memory, no initialisation. A module of tens of GB (nn.Bilinear(4096, 4096,
    1024) has 64 GiB of weight) would otherwise be built and initialised on the CPU (91 s on the
    two-GPU host) before memory_band could turn it down. Every one of these tensors is on the device
    during the real run, so the count is a lower bound of the peak memory_band measures. The inputs
    serve the format check (it needs no values) and, with the model, the probe below. The model and
    the inputs are made apart: a module whose __init__ cannot be built there (it reads a value, or
    names what it never defined) still has its inputs counted, which the format check would
    otherwise make on the CPU (a get_inputs of terabytes fills the host's memory until the kernel
    kills the worker). Either is None where the meta device cannot make it, and None alone when
    neither can: the real run decides then."""
    def on_meta(make):
        try:
            with torch.device("meta"):
                return make()
        except BaseException:  # noqa: BLE001 - anything the module does wrong is found by the real checks
            return None
    model = on_meta(lambda: mod.Model(*harness.init_inputs(mod, 0)))
    xs = on_meta(lambda: harness.make_inputs(mod, 1, "meta"))
    if model is None and xs is None:
        return None
    tensors = [] if model is None else list(model.parameters()) + list(model.buffers())
    tensors += [x for x in xs or [] if isinstance(x, torch.Tensor)]
    return _mib(tensors), model, xs


def _probe_peak_bytes(meta_model, meta_inputs, device):
    """Peak bytes allocated on `device` (a GPU) by one forward of the model with uninitialised weights
    on inputs made on the GPU from the meta inputs' shapes and dtypes (normal floats, zero integers and
    booleans): the task's memory before any CPU-seeded input exists. The real inputs come from the
    CPU's generator (torch.randn of 768 MiB takes ~3 s on one core), so a task over the band after its
    first forward would otherwise be turned down seconds into its validation.
    Memory follows shapes, not values, except where a shape depends on values (nonzero and the like):
    there these inputs stand in for the real ones. None when the forward fails here (uninitialised
    weights, a tensor kept outside the module's parameters and buffers): the real run decides then;
    inf when it runs out of the memory this worker may hold."""
    try:
        model = meta_model.to_empty(device=device).eval()
        xs = [torch.randn(x.shape, dtype=x.dtype, device=device) if x.is_floating_point() or x.is_complex()
              else torch.zeros(x.shape, dtype=x.dtype, device=device) for x in meta_inputs]
        with torch.no_grad():
            model(*xs)
        harness.sync(device)
        return torch.cuda.max_memory_allocated(device)
    except BaseException as e:  # noqa: BLE001
        return float("inf") if harness.is_memory_error(e) else None


def validate_task(req):
    """One validation; the module is imported under a fresh name and forgotten afterwards (a
    long-lived reference worker validates thousands), its scratch directory removed."""
    work = tempfile.mkdtemp(prefix="validate-", dir=req.get("work_dir") or None)
    name = f"kz_validate_{os.getpid()}_{next(_counter)}"
    t0 = time.perf_counter()
    try:
        result = _validate(req, work, name)
        # Where validation time goes (compile_s: its torch.compile).
        result["info"]["validate_s"] = time.perf_counter() - t0
        return result
    except BaseException as e:  # noqa: BLE001
        if not harness.is_memory_error(e):
            raise
        # Out of memory where no check expected it: the controller may run the module again alone.
        return {"ok": False, "memory_failure": True, "error": harness.describe_exception(e)[:2000]}
    finally:
        sys.modules.pop(name, None)
        shutil.rmtree(work, ignore_errors=True)
        if req.get("return_memory"):
            _return_memory()


def _return_memory():
    """Hands what the caching allocator keeps back to the device: the controller's share of the
    device for this validation ends with the reply, and jobs beside it reserve that share next."""
    gc.collect()  # tensors in reference cycles (a module that holds itself) would keep their blocks
    if torch.cuda.is_initialized():
        torch.cuda.empty_cache()


def _cap_mib(req):
    return int(req.get("memory_cap_bytes") or 0) >> 20


# The checks after format, in the order they run; a validation that ends early skips those left.
_AFTER_FORMAT = ("runs", "compile", "deterministic", "no_randomness", "non_degenerate", "input_dependent",
                 "well_conditioned", "runtime_band", "memory_band")


class _Ended(Exception):
    """A check decided the validation; the checks not run are skipped."""


def _validate(req, work, module_name):
    v = _Validation(req)
    try:
        v.format(work, module_name)
        v.memory_probe()
        v.first_run()
        v.repeat_runs()
        v.non_degenerate()
        v.input_dependent()
        v.well_conditioned()
        v.runtime_band()
        v.compile()
    except _Ended:
        pass
    return v.result


class _Validation:
    """One module's checks, run in order over its eager runs; `result` holds what they found."""

    def __init__(self, req):
        self.req = req
        self.device = torch.device(req.get("device", "cpu"))
        _cap_memory(self.device, req.get("memory_cap_bytes"))
        self.checks, self.reasons, self.info = {}, {}, {}
        self.result = {"ok": True, "checks": self.checks, "reasons": self.reasons, "info": self.info}
        self.max_mb = float(req.get("max_memory_mb", 4096))
        self.made = {}  # seed -> inputs as get_inputs made them on the CPU, kept for a later run on that seed
        self.mod = self.tree = self.meta_model = self.meta_inputs = None
        self.out = self.model = self.xs = None
        self.base_mem = 0

    def fail(self, name, why):
        self.checks[name] = "fail"
        self.reasons[name] = why

    def end(self, *skipped):
        """Ends the validation here, the named checks skipped unless already decided."""
        for n in skipped:
            self.checks.setdefault(n, "skip")
        raise _Ended()

    def format(self, work, module_name):
        """Parses, defines the three names, imports, and its inputs fit forward; uses_api_set is static
        and needs only the parse."""
        apis = self.req.get("apis") or []
        try:
            self.tree = ast.parse(self.req["source"])
        except SyntaxError as e:
            self.fail("format", f"syntax error: {e}")
            self.end("uses_api_set", *_AFTER_FORMAT)
        names, methods = _references(self.tree)
        missing = [a["name"] for a in apis if not _uses(a, names, methods)]
        if not apis:
            self.checks["uses_api_set"] = "skip"
        elif missing:
            self.fail("uses_api_set", "the module does not use " + ", ".join(missing))
        else:
            self.checks["uses_api_set"] = "pass"
        top = {n.name for n in self.tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
        absent = [n for n in ("Model", "get_inputs", "get_init_inputs") if n not in top]
        if absent:
            self.fail("format", "the module defines no " + ", ".join(absent))
            self.end(*_AFTER_FORMAT)
        try:
            mod = self.mod = harness.load_module(self.req["source"], module_name, work)
            if not (isinstance(mod.Model, type) and issubclass(mod.Model, torch.nn.Module)):
                raise TypeError("Model is not a torch.nn.Module subclass")
            declared_mb, self.meta_model, self.meta_inputs = _declared(mod) or (None, None, None)
            if declared_mb is not None and declared_mb > self.max_mb:
                self.info["memory_mb"] = declared_mb
                counted = "inputs" if self.meta_model is None else "parameters, buffers and inputs"
                self.fail("memory_band", f"the task's {counted} take {declared_mb:.1f} MiB, more than {self.max_mb}")
                self.end("format", *_AFTER_FORMAT)
            harness.init_inputs(mod, 0)
            inputs = self.meta_inputs if self.meta_inputs is not None else harness.make_inputs(mod, 1, "cpu")
            if not inputs or not all(isinstance(x, torch.Tensor) for x in inputs):
                raise TypeError("get_inputs() must return a non-empty list of tensors")
            sig = inspect.signature(mod.Model.forward)
            params = [p for p in sig.parameters.values() if p.name != "self"]
            if not any(p.kind == p.VAR_POSITIONAL for p in params) and len(params) != len(inputs):
                raise TypeError(f"forward takes {len(params)} inputs, get_inputs() returns {len(inputs)}")
            self.checks["format"] = "pass"
        except _Ended:
            raise
        except BaseException as e:  # noqa: BLE001 - a broken module is a verdict, not a crash
            self.fail("format", harness.describe_exception(e))
            self.end(*_AFTER_FORMAT)

    def run(self, seed_model, seed_inputs, reseed=None, remake=True):
        """A forward of a freshly built model on a fresh device copy of the seed's inputs (a forward may
        change its inputs in place). remake=False takes the copy from the inputs an earlier run made:
        torch.randn of ~800 MB of inputs takes seconds on a CPU."""
        mod, device = self.mod, self.device
        model = harness.build(mod.Model, harness.init_inputs(mod, seed_model), seed_model, device)
        if remake or seed_inputs not in self.made:
            self.made[seed_inputs] = harness.make_inputs(mod, seed_inputs, "cpu")
        xs = harness.to_device(self.made[seed_inputs], device, copy=True)
        if reseed is not None:
            torch.manual_seed(reseed)
        with torch.no_grad():
            out = model(*xs)
        harness.sync(device)
        return out, model, xs

    def memory_probe(self):
        """On a GPU, a forward on inputs made there from the meta shapes: a task over the band is
        turned down before its CPU-seeded inputs exist."""
        device, max_mb = self.device, self.max_mb
        if device.type != "cuda":
            return
        torch.cuda.reset_peak_memory_stats(device)
        self.base_mem = torch.cuda.memory_allocated(device)
        probed = (_probe_peak_bytes(self.meta_model, self.meta_inputs, device)
                  if self.meta_model is not None and self.meta_inputs is not None else None)
        self.meta_model = None  # the probe's model (moved onto the GPU in place) must not outlive it
        probed_mb = (probed - self.base_mem) / 2**20 if probed is not None else None
        if probed_mb == float("inf"):
            self.result["memory_failure"] = True
            self.fail("memory_band", f"a forward on inputs made on the GPU runs out of the {_cap_mib(self.req)} MiB "
                                     f"a validation may hold (band {max_mb} MiB)")
            self.end(*_AFTER_FORMAT)
        if probed_mb is not None and probed_mb > max_mb:
            self.info["memory_mb"] = probed_mb
            self.fail("memory_band",
                      f"the task needs {probed_mb:.1f} MiB, more than {max_mb} (a forward on inputs made on the GPU)")
            self.end(*_AFTER_FORMAT)
        torch.cuda.reset_peak_memory_stats(device)  # what memory_band records is the real run's peak

    def first_run(self):
        """runs, and memory_band from its peak."""
        device, max_mb = self.device, self.max_mb
        try:
            self.out, self.model, self.xs = self.run(0, 1)
            if not _leaves(self.out):
                raise TypeError(f"forward returned {type(self.out).__name__}, not tensors")
            self.checks["runs"] = "pass"
        except BaseException as e:  # noqa: BLE001
            if harness.is_memory_error(e):
                self.result["memory_failure"] = True
                if device.type == "cuda":
                    self.fail("memory_band", f"the forward runs out of the {_cap_mib(self.req)} MiB a validation "
                                             f"may hold (band {max_mb} MiB): " + harness.describe_exception(e)[:300])
                    self.end(*_AFTER_FORMAT)
            self.fail("runs", "eager forward failed: " + harness.describe_exception(e))
            self.end(*_AFTER_FORMAT)
        self.info["output_meta"] = harness.meta_of(self.out)

        # What the task needs is one forward's memory: its weights, its inputs and what the forward
        # allocates, measured here and nowhere later. The checks below hold several runs' outputs at
        # once (and the timing its cache-flush buffer): the validator's memory, not the task's, which
        # can be several times the forward's. A module over the band is invalid whatever the other
        # checks give, and is turned down before four more forwards and the timing (for a module this
        # large, seconds of a validation round).
        if device.type == "cuda":
            peak = (torch.cuda.max_memory_allocated(device) - self.base_mem) / 2**20
        else:  # the tensors the task holds: parameters, inputs, outputs
            peak = _mib(list(self.model.parameters()) + list(self.model.buffers()) + list(self.xs)
                        + _leaves(self.out))
        self.info["memory_mb"] = peak
        if peak > max_mb:
            self.fail("memory_band", f"the task needs {peak:.1f} MiB, more than {max_mb}")
            self.end(*_AFTER_FORMAT)
        self.checks["memory_band"] = "pass"

    def repeat_runs(self):
        """deterministic (the same run again) and no_randomness (again under another random state)."""
        out2, _, _ = self.run(0, 1)
        if _same(self.out, out2):
            self.checks["deterministic"] = "pass"
        else:
            self.fail("deterministic", "two runs with the same weights and inputs differ")

        random_call = _forward_randomness(self.tree)
        # Run 2 made its inputs again (a get_inputs that is not seeded shows there); this one only
        # needs the forward under another random state.
        out3, _, _ = self.run(0, 1, reseed=12345, remake=False)
        self.made.pop(1)
        if random_call:
            self.fail("no_randomness", f"forward calls {random_call}")
        elif self.checks["deterministic"] != "pass":
            self.checks["no_randomness"] = "skip"  # a run that differs anyway cannot show what the RNG changes
        elif not _same(self.out, out3):
            self.fail("no_randomness", "forward depends on the random number generator")
        else:
            self.checks["no_randomness"] = "pass"

    def non_degenerate(self):
        leaves = _leaves(self.out)
        floats = [t for t in leaves if t.is_floating_point()]
        bad = None
        for t in floats:
            if not torch.isfinite(t).all():
                bad = "the output holds NaN or Inf"
                break
        if bad is None:
            # Near zero means: the verifier's own comparison would accept an all-zero output.
            zeros = [torch.zeros_like(t) for t in leaves]
            if floats and harness.compare(leaves, zeros)["ok"]:
                scale = (max(t.abs().max().item() for t in floats if t.numel())
                         if any(t.numel() for t in floats) else 0.0)
                bad = f"an all-zero output would pass the verifier's comparison (max |y| = {scale:.3g})"
            elif all(t.numel() > 1 and bool((t == t.reshape(-1)[0]).all()) for t in leaves):
                bad = "the output is constant"
        if bad:
            self.fail("non_degenerate", bad)
        else:
            self.checks["non_degenerate"] = "pass"

    def input_dependent(self):
        out4, _, _ = self.run(0, 2)
        if _same(self.out, out4, exact=True):  # exact: a tiny output that does depend on its inputs still differs
            self.fail("input_dependent", "the output does not change when the inputs change")
        elif self.checks.get("non_degenerate") != "fail" and harness.compare(_leaves(self.out), _leaves(out4))["ok"]:
            # Near-constant: saturated (a softmax of clamped values, a product that underflows), so a
            # candidate that ignores its inputs, or skips a kernel, passes the verifier.
            self.fail("input_dependent", "the outputs for two input sets pass the verifier's comparison with each "
                      "other: a kernel that ignores its inputs would pass")
        else:
            self.checks["input_dependent"] = "pass"

    def well_conditioned(self):
        """The float32 output against the same forward in float64, by the verifier's comparison. A
        module that misses its own float64 result (the sign or rounding of a long sum, an argmax of
        near-ties) fails kernels that only round differently: no candidate is reliably correct."""
        if "fail" in (self.checks.get("deterministic"), self.checks.get("no_randomness")):
            self.checks["well_conditioned"] = "skip"  # a run that differs anyway says nothing of rounding
            return
        default_dtype = torch.get_default_dtype()
        try:
            model = harness.build(self.mod.Model, harness.init_inputs(self.mod, 0), 0, self.device).double()
            xs = harness.to_device(harness.make_inputs(self.mod, 1, "cpu"), self.device, copy=True)
            xs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x for x in xs]
            # A tensor the forward makes itself (the zero bias of a baddbmm) is float64 too: otherwise
            # the operator refuses the mix and the check would be skipped for that module.
            torch.set_default_dtype(torch.float64)
            with torch.no_grad():
                out64 = model(*xs)
            harness.sync(self.device)
        except BaseException as e:  # noqa: BLE001 - an operator without float64: nothing to compare with
            self.checks["well_conditioned"] = "skip"
            self.info["well_conditioned_skipped"] = harness.describe_exception(e)[:300]
            return
        finally:
            torch.set_default_dtype(default_dtype)
        out = _leaves(self.out)
        ref = [r.to(o.dtype) if r.is_floating_point() else r for r, o in zip(_leaves(out64), out)]
        res = harness.compare(ref, out)
        if res["ok"]:
            self.checks["well_conditioned"] = "pass"
        else:
            self.fail("well_conditioned", "the float32 output misses the module's float64 result by more than the "
                      f"verifier's tolerance ({res['reason']}): a kernel that only rounds differently can fail it")

    def runtime_band(self):
        model = self.model
        timing, _ = harness.time_callable(lambda *a: model(*a), [self.xs], self.device,
                                          int(self.req.get("timing_iters", 5)), warmup=1, checks=0)
        ms = (timing["event_ms"] or timing["host_ms"])["median"]
        self.info["eager_ms"] = ms
        lo, hi = float(self.req.get("min_runtime_ms", 0.0)), float(self.req.get("max_runtime_ms", 1000.0))
        if lo <= ms <= hi:
            self.checks["runtime_band"] = "pass"
        else:
            self.fail("runtime_band", f"eager forward takes {ms:.3f} ms, outside [{lo}, {hi}]")

    def compile(self):
        """Last, and only for a module every other check passed: compiling is the slowest check by far
        (seconds per module), and a module that failed another is invalid whatever it gives."""
        if not (self.req.get("compile") and "fail" not in self.checks.values()):
            self.checks["compile"] = "skip"
            return
        try:
            t0 = time.perf_counter()
            compiled = torch.compile(self.model)
            with torch.no_grad():
                cout = compiled(*self.xs)
            harness.sync(self.device)
            self.info["compile_s"] = time.perf_counter() - t0
            if harness.compare(self.out, cout)["ok"]:
                self.checks["compile"] = "pass"
            else:
                self.fail("compile", "torch.compile's output differs from eager")
        except BaseException as e:  # noqa: BLE001
            self.fail("compile", "torch.compile failed: " + harness.describe_exception(e))
