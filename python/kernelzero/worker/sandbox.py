"""Confinement of a candidate child process: own process group, dies with its parent, scrubbed
environment, resource limits, no network (a fresh network namespace where the OS allows it)."""
from __future__ import annotations

import ctypes
import os
import resource
import signal

CLONE_NEWNET = 0x40000000
PR_SET_PDEATHSIG = 1

# Variables a candidate child keeps; everything else (tokens, proxies, paths of other jobs) is dropped.
KEEP_ENV = ("PATH", "CUDA_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "TRITON_INTERPRET",
            "TRITON_CACHE_DIR", "KZ_BUILD_CACHE", "TORCH_EXTENSIONS_DIR", "TORCH_CUDA_ARCH_LIST", "LANG",
            "NCCL_NVLS_ENABLE", "TRITON_PTXAS_PATH", "CC", "CXX", "PYTORCH_CUDA_ALLOC_CONF")


def first_to_go_out_of_memory() -> None:
    """Puts this process, and every process it forks, first in line for the kernel's OOM killer
    (oom_score_adj 1000, which needs no privilege): a module that fills the host's memory (on a
    host that overcommits, a tensor of terabytes is allocated and then written page by page) takes
    its worker down, never the controller or a neighbour's job."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:  # not Linux, or /proc not mounted: nothing to offer
        pass


def limit_cpu(seconds: int) -> None:
    """Caps the CPU time this process may still use (RLIMIT_CPU counts from process start)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    spent = int(used.ru_utime + used.ru_stime) + 1
    soft, hard = resource.getrlimit(resource.RLIMIT_CPU)
    v = spent + seconds
    if hard != resource.RLIM_INFINITY:
        v = min(v, hard)
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (v, hard))
    except (ValueError, OSError):
        pass


def confine(job_dir: str, cpu_seconds, max_file_bytes: int) -> dict:
    """Applies the sandbox to the current (child) process. Returns {measure: "pass"|"skip"}."""
    applied = {}
    os.setpgid(0, 0)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        applied["parent_death_signal"] = "pass"
        applied["network_isolation"] = "pass" if libc.unshare(CLONE_NEWNET) == 0 else "skip"
    except OSError:
        applied["network_isolation"] = "skip"
    keep = {k: os.environ[k] for k in KEEP_ENV if k in os.environ}
    os.environ.clear()
    os.environ.update(keep)
    os.environ["HOME"] = job_dir
    os.environ["TMPDIR"] = job_dir
    os.chdir(job_dir)
    limits = {
        resource.RLIMIT_CORE: 0,
        resource.RLIMIT_FSIZE: max_file_bytes,
        resource.RLIMIT_NOFILE: 4096,
    }
    if cpu_seconds:
        limits[resource.RLIMIT_CPU] = cpu_seconds
    for res, value in limits.items():
        try:
            soft, hard = resource.getrlimit(res)
            v = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (v, v if res != resource.RLIMIT_CPU else hard))
        except (ValueError, OSError):
            pass
    applied["resource_limits"] = "pass"
    return applied
