"""Fast CUDA path: kernels compiled at run time by NVRTC and launched on torch tensors.

Candidates write `kernels = kzc.compile(SRC)` and launch `kernels.name(grid=..., block=..., args=...)`
(docs/CANDIDATES.md has the full form). Compilation is cached by content hash in a build cache shared
with the verifier's compile workers, which compile ahead of time on CPU (NVRTC needs no GPU), so the
GPU process only loads a cubin.

This is the project's own launcher: it is the one place where ctypes is allowed.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import glob
import hashlib
import os
import re
import threading

__all__ = ["compile", "compile_to_cubin", "CompileError", "LaunchError", "Module", "Kernel",
           "launches_enabled", "set_launch_hook"]


class CompileError(RuntimeError):
    """NVRTC rejected the source; the message holds NVRTC's log."""


class LaunchError(RuntimeError):
    """A kernel could not be launched (bad arguments, driver error)."""


# ---------------------------------------------------------------------------------------------
# Library discovery. The pip wheels of torch bring libnvrtc; libcuda comes from the driver.

def _candidate_dirs():
    dirs = []
    try:
        import nvidia  # namespace package of the CUDA wheels torch depends on
        for base in list(nvidia.__path__):
            dirs += glob.glob(os.path.join(base, "*", "lib"))
    except ImportError:
        pass
    for env in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(env):
            dirs.append(os.path.join(os.environ[env], "lib64"))
    dirs.append("/usr/local/cuda/lib64")
    return dirs


def _load_nvrtc():
    explicit = os.environ.get("KZ_NVRTC_LIBRARY")
    names = [explicit] if explicit else []
    for d in _candidate_dirs():
        names += sorted(glob.glob(os.path.join(d, "libnvrtc.so.*[0-9]")))
        names += sorted(glob.glob(os.path.join(d, "libnvrtc.so")))
    found = ctypes.util.find_library("nvrtc")
    if found:
        names.append(found)
    errors = []
    for n in names:
        if "builtins" in n or ".alt." in n:
            continue
        try:
            return ctypes.CDLL(n), os.path.dirname(n)
        except OSError as e:
            errors.append(f"{n}: {e}")
    raise CompileError("libnvrtc not found (install torch's CUDA wheels or set KZ_NVRTC_LIBRARY); tried: "
                       + "; ".join(errors or names or ["nothing"]))


def _include_dirs(lib_dir):
    dirs = []
    if lib_dir:
        inc = os.path.join(os.path.dirname(lib_dir), "include")
        if os.path.isdir(inc):
            dirs.append(inc)
    for d in _candidate_dirs():
        inc = os.path.join(os.path.dirname(d), "include")
        if os.path.isfile(os.path.join(inc, "cuda_fp16.h")) and inc not in dirs:
            dirs.append(inc)
    return dirs


_lock = threading.Lock()
_nvrtc = None
_nvrtc_dir = None
_cuda = None


def _nvrtc_lib():
    global _nvrtc, _nvrtc_dir
    with _lock:
        if _nvrtc is None:
            _nvrtc, _nvrtc_dir = _load_nvrtc()
        return _nvrtc


def _cuda_lib():
    global _cuda
    with _lock:
        if _cuda is None:
            try:
                _cuda = ctypes.CDLL("libcuda.so.1")
            except OSError as e:
                raise LaunchError(f"libcuda.so.1 (the NVIDIA driver) cannot be loaded: {e}") from e
        return _cuda


def _nvrtc_check(res, what, prog=None):
    if res == 0:
        return
    lib = _nvrtc_lib()
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    msg = lib.nvrtcGetErrorString(res).decode()
    raise CompileError(f"{what}: {msg}")


def _cu_check(res, what):
    if res == 0:
        return
    lib = _cuda_lib()
    s = ctypes.c_char_p()
    lib.cuGetErrorString(res, ctypes.byref(s))
    raise LaunchError(f"{what}: CUDA driver error {res} ({s.value.decode() if s.value else 'unknown'})")


def nvrtc_version():
    lib = _nvrtc_lib()
    major, minor = ctypes.c_int(), ctypes.c_int()
    _nvrtc_check(lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return f"{major.value}.{minor.value}"


# ---------------------------------------------------------------------------------------------
# Compilation (no GPU needed).

DEFAULT_OPTIONS = ("-std=c++17", "--device-as-default-execution-space")


def cache_dir():
    d = os.environ.get("KZ_BUILD_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "kernelzero")
    return os.path.join(d, "nvrtc")


def cache_key(source: str, arch: str, options=()) -> str:
    h = hashlib.sha256()
    for part in (source, arch, "\0".join(DEFAULT_OPTIONS + tuple(options)), nvrtc_version()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def compile_to_cubin(source: str, arch: str, options=()) -> tuple[bytes, bool]:
    """Compile `source` for `arch` (e.g. "sm_90"); returns (cubin, cache_hit).

    The cubin is cached under KZ_BUILD_CACHE by a hash of source, arch, options and NVRTC version;
    entries are written to a temporary name and renamed, so readers never see a partial file."""
    if not isinstance(source, str):
        raise CompileError(f"kernel source must be a str, got {type(source).__name__}")
    options = tuple(str(o) for o in options)
    key = cache_key(source, arch, options)
    path = os.path.join(cache_dir(), key + ".cubin")
    try:
        with open(path, "rb") as f:
            return f.read(), True
    except OSError:
        pass
    lib = _nvrtc_lib()
    prog = ctypes.c_void_p()
    _nvrtc_check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu", 0, None, None),
                 "nvrtcCreateProgram")
    try:
        opts = list(DEFAULT_OPTIONS) + [f"--gpu-architecture={arch}"]
        opts += [f"-I{d}" for d in _include_dirs(_nvrtc_dir)]
        opts += list(options)
        arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
        res = lib.nvrtcCompileProgram(prog, len(opts), arr)
        log_size = ctypes.c_size_t()
        lib.nvrtcGetProgramLogSize(prog, ctypes.byref(log_size))
        log = ctypes.create_string_buffer(log_size.value)
        lib.nvrtcGetProgramLog(prog, log)
        if res != 0:
            raise CompileError("NVRTC compilation failed:\n" + log.value.decode(errors="replace").strip())
        size = ctypes.c_size_t()
        _nvrtc_check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        buf = ctypes.create_string_buffer(size.value)
        _nvrtc_check(lib.nvrtcGetCUBIN(prog, buf), "nvrtcGetCUBIN")
        cubin = buf.raw
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(cubin)
        os.replace(tmp, path)
    except OSError:
        pass  # a read-only cache only costs a recompile
    return cubin, False


# ---------------------------------------------------------------------------------------------
# Loading and launching on torch tensors.

# The verifier turns launches off to check that a candidate's outputs depend on its kernels, and
# counts launches; both go through this hook, which candidates cannot reach (static checks).
_launch_state = {"enabled": True, "hook": None}


def launches_enabled(flag: bool) -> None:
    _launch_state["enabled"] = bool(flag)


def set_launch_hook(hook) -> None:
    """hook(kernel_name, "start") before every launch (also when launches are off) and
    hook(kernel_name, "end") after it."""
    _launch_state["hook"] = hook


_KERNEL_SIG = re.compile(
    r'extern\s+"C"\s+__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+'
    r'(?:__launch_bounds__\s*\([^)]*\)\s*)?([A-Za-z_]\w*)\s*\(([^)]*)\)')
_FLOAT_TYPES = {"float", "double", "half", "__half", "__nv_bfloat16", "nv_bfloat16"}


def parameter_kinds(source: str) -> dict:
    """{kernel name: ["pointer"|"float"|"int", ...]} for the extern "C" kernels whose signature can be
    read from the source. The driver reports only each parameter's size, so without this a Python int
    passed to a float parameter would be packed as an integer's bits."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", source, flags=re.S)
    kinds = {}
    for name, params in _KERNEL_SIG.findall(text):
        out = []
        for p in (x.strip() for x in params.split(",")):
            if not p or p == "void":
                continue
            if "*" in p or "[" in p or "&" in p:
                out.append("pointer")
            elif set(re.findall(r"[A-Za-z_]\w*", p)) & _FLOAT_TYPES:
                out.append("float")
            else:
                out.append("int")
        kinds[name] = out
    return kinds


def _device_arch(torch, device_index):
    major, minor = torch.cuda.get_device_capability(device_index)
    return f"sm_{major}{minor}"


class Kernel:
    def __init__(self, module, name, handle, kinds=None):
        self._module = module
        self.name = name
        self._handle = handle
        self._param_sizes = self._read_param_sizes()
        self._kinds = kinds if kinds and self._param_sizes is not None and len(kinds) == len(self._param_sizes) \
            else None

    def _read_param_sizes(self):
        lib = _cuda_lib()
        fn = getattr(lib, "cuFuncGetParamInfo", None)
        if fn is None:
            return None
        sizes = []
        for i in range(1024):
            off, size = ctypes.c_size_t(), ctypes.c_size_t()
            if fn(self._handle, ctypes.c_size_t(i), ctypes.byref(off), ctypes.byref(size)) != 0:
                break
            sizes.append(size.value)
        return sizes

    def _pack(self, i, arg, size):
        torch = self._module._torch
        kind = self._kinds[i] if self._kinds else None
        if kind == "pointer" and not isinstance(arg, torch.Tensor):
            raise LaunchError(f"{self.name}: argument {i} must be a tensor (the parameter is a pointer), "
                              f"got {type(arg).__name__}")
        if kind in ("int", "float") and isinstance(arg, torch.Tensor):
            raise LaunchError(f"{self.name}: argument {i} is a tensor but the parameter is a {kind} scalar")
        if kind == "float" and isinstance(arg, (bool, int)):
            arg = float(arg)
        if kind == "int" and isinstance(arg, float):
            raise LaunchError(f"{self.name}: argument {i} is a float but the parameter is an integer")
        if isinstance(arg, torch.Tensor):
            if arg.device.type != "cuda":
                raise LaunchError(f"{self.name}: argument {i} is a tensor on {arg.device}, not on the CUDA device")
            if size not in (None, 8):
                raise LaunchError(f"{self.name}: argument {i} is a tensor but the kernel parameter has {size} bytes")
            return ctypes.c_uint64(arg.data_ptr())
        if isinstance(arg, bool):
            arg = int(arg)
        if isinstance(arg, int):
            if size in (None, 8):
                return ctypes.c_int64(arg) if arg < (1 << 63) else ctypes.c_uint64(arg)
            if size == 4:
                return ctypes.c_int32(arg) if -(1 << 31) <= arg < (1 << 31) else ctypes.c_uint32(arg)
            if size == 2:
                return ctypes.c_int16(arg)
            if size == 1:
                return ctypes.c_int8(arg)
        if isinstance(arg, float):
            if size == 4:
                return ctypes.c_float(arg)
            if size in (8, None):
                if size is None:
                    raise LaunchError(f"{self.name}: argument {i}: a float needs the kernel's parameter sizes, "
                                      "which this driver cannot report")
                return ctypes.c_double(arg)
        raise LaunchError(f"{self.name}: argument {i} of type {type(arg).__name__} cannot be passed "
                          f"to a parameter of {size} bytes")

    def __call__(self, grid, block, args=(), shared_mem=0):
        grid = tuple(int(g) for g in grid) + (1,) * (3 - len(grid))
        block = tuple(int(b) for b in block) + (1,) * (3 - len(block))
        if len(grid) != 3 or len(block) != 3:
            raise LaunchError(f"{self.name}: grid and block take 1 to 3 dimensions")
        args = tuple(args)
        if self._param_sizes is not None and len(args) != len(self._param_sizes):
            raise LaunchError(f"{self.name}: takes {len(self._param_sizes)} arguments, got {len(args)}")
        hook = _launch_state["hook"]
        if hook is not None:
            hook(self.name, "start")
        if not _launch_state["enabled"]:
            return
        packed = [self._pack(i, a, self._param_sizes[i] if self._param_sizes else None)
                  for i, a in enumerate(args)]
        ptrs = (ctypes.c_void_p * max(1, len(packed)))(
            *[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in packed])
        torch = self._module._torch
        stream = torch.cuda.current_stream(self._module._device).cuda_stream
        lib = _cuda_lib()
        _cu_check(lib.cuLaunchKernel(self._handle, ctypes.c_uint(grid[0]), ctypes.c_uint(grid[1]),
                                     ctypes.c_uint(grid[2]), ctypes.c_uint(block[0]), ctypes.c_uint(block[1]),
                                     ctypes.c_uint(block[2]), ctypes.c_uint(int(shared_mem)),
                                     ctypes.c_void_p(stream), ptrs, None),
                  f"launching {self.name}")
        if hook is not None:
            hook(self.name, "end")


class Module:
    """A loaded NVRTC module; attribute access returns its `extern "C"` kernels."""

    def __init__(self, cubin, torch, device_index, kinds=None):
        self._torch = torch
        self._param_kinds = kinds or {}
        self._device = device_index
        self._kernels = {}
        lib = _cuda_lib()
        torch.cuda.init()
        with torch.cuda.device(device_index):
            torch.cuda.current_stream()  # makes the primary context current on this thread
            handle = ctypes.c_void_p()
            _cu_check(lib.cuModuleLoadData(ctypes.byref(handle), ctypes.c_char_p(cubin)), "loading the cubin")
        self._handle = handle

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        k = self._kernels.get(name)
        if k is None:
            lib = _cuda_lib()
            fn = ctypes.c_void_p()
            res = lib.cuModuleGetFunction(ctypes.byref(fn), self._handle, name.encode())
            if res != 0:
                raise AttributeError(f"no kernel named {name!r} in this module (kernels must be "
                                     f"declared extern \"C\" __global__)")
            k = self._kernels[name] = Kernel(self, name, fn, self._param_kinds.get(name))
        return k


def compile(source: str, options=(), device=None) -> Module:  # noqa: A001 - the public name candidates use
    """Compile CUDA C++ `source` with NVRTC for the current CUDA device and load it."""
    import torch
    if not torch.cuda.is_available():
        raise LaunchError("kernelzero.cuda needs a CUDA device")
    idx = torch.cuda.current_device() if device is None else torch.device(device).index or 0
    cubin, _ = compile_to_cubin(source, _device_arch(torch, idx), options)
    return Module(cubin, torch, idx, parameter_kinds(source))
