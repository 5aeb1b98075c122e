"""What a candidate child must leave as it found it before it may run another job.

A child runs jobs one after another while each leaves the process as the previous found it: opening a
CUDA context and loading the harness's kernels costs a fresh child more than a job itself, and the
driver creates contexts only a few at a time host-wide however many processes ask
(docs/BENCHMARKS.md). Whether a job left the process clean is decided after it, by comparing a
snapshot taken before the child's first job:

- the Python objects the harness and every candidate reach: each function, class, module and
  descriptor bound in `PROTECTED_MODULES` and the kernelzero modules, and in the classes they bind (a
  patched `torch.Tensor.clone`, a rebound `harness.first_changed`);
- torch's process-wide settings (grad mode, default dtype and device, TF32 and reduced-precision
  flags, deterministic algorithms, dispatch and torch-function mode stacks, the current stream);
- the interpreter's hooks (trace and profile functions, import hooks, signal handlers, Python threads);
- native code: an executable mapping of a file outside the installation (a load_inline extension,
  whose C++ ran at load time and could have registered kernels or started threads for every later
  job). Triton's generated launchers, in its cache, are Triton's own code and are allowed;
- the device: every stream idle and healthy, nothing left allocated by the job.

Anything that differs retires the child; the next job runs in a fresh one. The checks run in the child
itself, which a job could in principle have subverted: they are a second layer behind the static
checks (no assignment into torch, no ctypes, no introspection), not a replacement for them."""
from __future__ import annotations

import gc
import os
import signal
import site
import sys
import threading
import types

import torch

# The modules whose bindings are compared (and every kernelzero module): what the harness calls and
# what a candidate reaches by name; with them, every class they bind. Not every loaded module: walking
# them all would cost each job more for little more, since the static checks already refuse
# assignments into any of them.
PROTECTED_MODULES = frozenset((
    "torch", "torch.nn", "torch.nn.functional", "torch.nn.init", "torch.cuda", "torch.autograd", "torch.random",
    "torch.functional", "torch._tensor", "torch.nn.modules.module", "torch._C", "torch._C._VariableFunctions",
    "torch._C._nn", "torch.linalg", "torch.fft", "torch.special", "triton", "triton.language", "triton.language.core",
    "triton.language.math", "triton.runtime", "triton.runtime.jit", "triton.runtime.autotuner", "numpy", "builtins",
    "math", "time", "os", "sys", "functools", "operator", "contextlib", "collections", "itertools", "random",
    "importlib", "linecache", "json", "struct", "select", "signal", "resource", "gc", "threading"))
# Values whose rebinding is a patch: module-level counters and caches change legitimately and are not
# compared.
_BOUND_TYPES = frozenset((types.FunctionType, types.BuiltinFunctionType, types.ModuleType, types.MethodType,
                          types.MethodDescriptorType, types.WrapperDescriptorType, types.GetSetDescriptorType,
                          types.MemberDescriptorType, types.ClassMethodDescriptorType, classmethod, staticmethod,
                          property))
_MAX_REPORTED = 5


def _protected(name: str) -> bool:
    return name in PROTECTED_MODULES or name == "kernelzero" or name.startswith("kernelzero.")


def _bindings() -> tuple[dict, dict]:
    """(owner, name) -> value for every protected binding (held, and compared by identity: an id could
    be reused once a rebound original is freed); and the classes among the owners, by name."""
    out, classes = {}, {}
    for mod_name, mod in list(sys.modules.items()):
        d = getattr(mod, "__dict__", None) if _protected(mod_name) else None
        if not isinstance(d, dict):
            continue
        for k, v in list(d.items()):
            t = type(v)  # never isinstance: deprecated-name proxies warn when asked for their class
            if t in _BOUND_TYPES or issubclass(t, type):
                out[(mod_name, k)] = v
                if issubclass(t, type):
                    classes[f"{v.__module__}.{v.__qualname__}"] = v
    for owner, cls in classes.items():
        for k, v in list(vars(cls).items()):
            t = type(v)
            if t in _BOUND_TYPES or issubclass(t, type):
                out[(owner, k)] = v
    return out, classes


def _inherited(cls, name):
    for base in cls.__mro__[1:]:
        if name in vars(base):
            return vars(base)[name]
    return None


def _settings(device) -> dict:
    s = {
        "grad_enabled": torch.is_grad_enabled(),
        "inference_mode": torch.is_inference_mode_enabled(),
        "default_dtype": str(torch.get_default_dtype()),
        "default_device": str(torch.get_default_device()),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "anomaly_detection": torch.is_anomaly_enabled(),
        "torch_function_modes": torch._C._len_torch_function_stack(),
        "dispatch_modes": torch._C._len_torch_dispatch_stack(),
        "cudnn": (torch.backends.cudnn.enabled, torch.backends.cudnn.benchmark, torch.backends.cudnn.deterministic,
                  torch.backends.cudnn.allow_tf32),
        "matmul": (torch.backends.cuda.matmul.allow_tf32,
                   torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
                   torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction),
        "autocast": (torch.is_autocast_enabled("cpu"), torch.is_autocast_enabled("cuda")),
        "trace": (id(sys.gettrace()), id(sys.getprofile()), id(threading.gettrace()), id(threading.getprofile())),
        "import_hooks": (tuple(map(id, sys.meta_path)), tuple(map(id, sys.path_hooks))),
        "signals": tuple(id(signal.getsignal(s)) for s in sorted(signal.valid_signals())
                         if s not in (signal.SIGKILL, signal.SIGSTOP)),
        "python_threads": tuple(sorted(t.ident or 0 for t in threading.enumerate())),
        "recursion_limit": sys.getrecursionlimit(),
    }
    if torch.device(device).type == "cuda":
        s["current_device"] = torch.cuda.current_device()
        stream = torch.cuda.current_stream()
        s["current_stream"] = (stream.stream_id, stream.device_index, stream.device_type)
    return s


def _trusted_roots() -> tuple:
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/lib", "/lib64", "/opt"}
    roots.update(site.getsitepackages())
    for key in ("CUDA_HOME", "CUDA_PATH", "TRITON_CACHE_DIR"):
        if os.environ.get(key):
            roots.add(os.environ[key])
    return tuple(os.path.realpath(r).rstrip("/") + "/" for r in roots if r)


def _native_files() -> set:
    """Files mapped executable into this process."""
    files = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                parts = line.split(None, 5)
                if len(parts) == 6 and "x" in parts[1] and parts[5].startswith("/"):
                    files.add(parts[5].strip())
    except OSError:
        pass
    return files


class ChildState:
    """The snapshot a child takes before its first job (after it opened the device)."""

    def __init__(self, device):
        self.device = device
        self.trusted = _trusted_roots()
        # Triton's interpreter (the CPU) rebinds triton.language itself, and leaves some of it rebound
        # after a kernel calls a jit function (triton 3.6, interpreter.py ASTTransformer.__call__).
        self.interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        self.bindings, self.classes = _bindings()
        self.owners = {owner for owner, _ in self.bindings}
        self.settings = _settings(device)
        self.native = _native_files()
        self.allocated = self._allocated()

    def _allocated(self) -> int:
        return torch.cuda.memory_allocated(self.device) if torch.device(self.device).type == "cuda" else 0

    def differences(self) -> list[str]:
        """What the process no longer shares with the snapshot (empty: another job may run here)."""
        why = []
        if torch.device(self.device).type == "cuda":
            try:
                torch.cuda.synchronize(self.device)
                torch.zeros(1, device=self.device).add_(1).item()
            except BaseException as e:  # noqa: BLE001 - any failure of the device retires the child
                return [f"the device no longer works ({type(e).__name__}: {str(e)[:200]})"]
        now = self._allocated()
        if now > self.allocated:  # reference cycles may still hold a tensor: collected, then counted
            gc.collect()
            now = self._allocated()
        if now > self.allocated:
            why.append(f"{now - self.allocated} bytes of device memory still allocated")
        settings = _settings(self.device)
        why += [f"torch setting {k} changed" for k, v in self.settings.items() if settings.get(k) != v]
        new_native = sorted(p for p in _native_files() - self.native if not p.startswith(self.trusted))
        why += [f"native code loaded from {p}" for p in new_native[:_MAX_REPORTED]]
        bindings, _ = _bindings()
        changed = [k for k, v in self.bindings.items() if k in bindings and bindings[k] is not v and self._compared(k)]
        removed = [k for k in self.bindings if k not in bindings and self._compared(k)]  # or bound to a non-callable
        added = [k for k in bindings.keys() - self.bindings.keys()
                 if k[0] in self.owners and self._compared(k) and not self._harmless(k)]
        for label, keys in (("rebound", changed), ("deleted", removed), ("bound", added)):
            why += [f"{label} {owner}.{name}" for owner, name in sorted(keys)[:_MAX_REPORTED]]
        return why

    def _harmless(self, key) -> bool:
        """A name bound afresh that changes nothing: a submodule imported for the first time (it binds
        itself in its package), or a class attribute bound to what the class inherited anyway (Triton's
        interpreter leaves `tensor.__repr__` so when it restores what it patched)."""
        owner, name = key
        if owner in self.classes:
            cls = self.classes[owner]
            return vars(cls).get(name) is _inherited(cls, name)
        return isinstance(vars(sys.modules[owner]).get(name), types.ModuleType) if owner in sys.modules else False

    def _compared(self, key) -> bool:
        return not (self.interpreted and key[0].startswith("triton.language"))
