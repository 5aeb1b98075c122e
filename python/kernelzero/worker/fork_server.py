"""The candidate worker's process layer: a fork server whose children run the jobs.

The parent imports torch and Triton once (never initialising CUDA, so forking stays safe) and keeps
children forked ahead: each confines itself, opens the device and loads the harness's kernels before
any job exists. A child then runs jobs one after another, each in a fresh job directory, for as long
as each job leaves the process as the child's first found it (child_state.py): opening a context
costs more than a job, and the driver creates only a few a second on the whole host. A child whose
job failed on the device, ran out of memory, loaded native code or changed anything the next job
could see is retired and the next job goes to a spare.

Between parent and child, framed JSON (protocol.py) on two pipes: a job frame in; out, progress
frames while it runs ({"progress": "forward"} when a forward call starts, {"progress": "host"} when
it returns or pauses for a compile) and one result frame. A hang, crash, exit call or CUDA error ends
only the child: the parent reports it and stays healthy. A forward call that outlasts the job's
`forward_limit_s` is killed at once, so a hung kernel holds its lane for that long, not for the job's
whole timeout."""
from __future__ import annotations

import contextlib
import faulthandler
import itertools
import linecache
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
import time
import traceback

import torch

from . import accounting, child_state, device_lock, harness, protocol, sandbox
from .candidate import Failure, run_job, stopwatch

LOG_TAIL = 4000
# How long before the parent's deadline a job that is still running has its stacks written to its log.
STACK_DUMP_LEAD_S = 1.0
# A child retires after this many jobs even when each left it clean: what jobs leave in host memory
# (Triton's compiled-kernel caches, linecache, imported modules) is not compared, only bounded.
CHILD_MAX_JOBS = 200
# Failure kinds after which a child may run another job (its state is still compared): the candidate
# was wrong, not the process.
REUSABLE_FAILURES = ("incorrect", "compile_error", "format_error", "rejected", "runtime_error")


def _tail(path, n=LOG_TAIL):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _cpu_seconds():
    """CPU time of this process and of the processes it waited for (Triton's ptxas)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _close_other_fds(keep):
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


def _output_to(directory):
    """Points this process's stdout and stderr at `directory`/log.txt."""
    log_fd = os.open(os.path.join(directory, "log.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.close(log_fd)


def warm_python(recorder):
    """Imports and first-use work of the harness on the CPU (never CUDA: the parent must stay forkable)."""
    import torch.profiler  # noqa: F401 - the load_inline share measurement
    from kernelzero import cuda as kzc  # noqa: F401
    x = torch.ones(8)
    with torch.no_grad(), accounting.LibraryOpCensus(recorder):
        y = (x + 1).clone()
    harness.first_changed([x], [y])
    from . import transfer
    transfer.describe((y, 1))


def warm_harness_ops(device, recorder):
    """Creates the CUDA context and loads the kernels the harness itself uses (CUDA loads a kernel's
    module on first use), so that a job's first trial does not pay for them."""
    x = torch.randn(4096).to(device)
    with accounting.LibraryOpCensus(recorder):
        y = x.clone()
    y.copy_(x)
    harness.first_changed([x], [y])  # the in-place check's comparison kernels
    accounting.poison_free_memory(device, [1 << 16])
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(1000)
    end.record()
    torch.cuda.synchronize(device)
    start.elapsed_time(end)


def _tried_bytes(reason):
    """The allocation an out-of-memory error says failed ("Tried to allocate 6.00 GiB"), in bytes."""
    m = re.search(r"Tried to allocate ([0-9.]+) (GiB|MiB|KiB|B)\b", reason)
    if not m:
        return 0
    return int(float(m.group(1)) * {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "B": 1}[m.group(2)])


def _cap_memory(device, cap_bytes):
    """Caps what this child's allocator may hold on the device at its share of the device: a job that
    needs more fails here, in its own process, instead of in a neighbour's. No cap: the whole device."""
    if torch.device(device).type != "cuda":
        return None
    index = harness.device_index(device)
    total = torch.cuda.get_device_properties(index).total_memory
    fraction = min(1.0, int(cap_bytes) / total) if cap_bytes else 1.0
    torch.cuda.set_per_process_memory_fraction(fraction, index)
    return int(cap_bytes) if cap_bytes else None


class Progress:
    """The child's side of the forward watch: tells the parent when a forward call starts and when it
    returns (or pauses for host work of unbounded length: a Triton kernel's compile and load), and
    moves the stack-dump watchdog to just before whichever deadline is nearer."""

    def __init__(self, fd, forward_limit_s, job_deadline):
        self.fd, self.limit_s, self.job_deadline = fd, forward_limit_s, job_deadline
        self.inside = False

    def _send(self, what):
        protocol.write_frame(self.fd, {"progress": what})

    def _arm(self, deadline):
        left = deadline - time.monotonic()
        if left > 0:
            faulthandler.dump_traceback_later(max(0.5 * left, left - STACK_DUMP_LEAD_S), exit=False)

    @contextlib.contextmanager
    def forward(self):
        if not self.limit_s or self.inside:
            yield
            return
        self.inside = True
        self._send("forward")
        self._arm(min(self.job_deadline, time.monotonic() + self.limit_s))
        try:
            yield
        finally:
            self.inside = False
            self._send("host")
            self._arm(self.job_deadline)

    @contextlib.contextmanager
    def paused(self):
        if not self.inside:
            yield
            return
        self.inside = False
        self._send("host")
        self._arm(self.job_deadline)
        try:
            yield
        finally:
            self.inside = True
            self._send("forward")
            self._arm(min(self.job_deadline, time.monotonic() + self.limit_s))


def _profiled(fn, profile_dir):
    if not profile_dir:
        return fn

    def run(*args):
        import cProfile
        import io
        import pstats
        prof = cProfile.Profile()
        try:
            return prof.runcall(fn, *args)
        finally:
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("cumulative").print_stats(45)
            with open(os.path.join(profile_dir, f"job-{os.getpid()}.txt"), "w") as f:
                f.write(text.getvalue())
    return run


def _run_one(req, env, device, recorder, result_fd):
    """One job in this child: its directory, environment, limits and watchdog; returns its result."""
    job_dir = req["job_dir"]
    _output_to(job_dir)
    os.chdir(job_dir)
    os.environ.clear()
    os.environ.update(env)
    os.environ["HOME"] = os.environ["TMPDIR"] = job_dir
    for counters in (device_lock.waits, device_lock.held):  # the job's own
        counters.update({k: 0.0 for k in counters})
    recorder.begin_job()
    # Where a job that runs out of time is stuck: shortly before the parent's deadline a watchdog
    # thread of faulthandler's writes every thread's stack into the log the verdict quotes. A
    # watchdog inside the child rather than a signal from the parent: it does not depend on which
    # of the child's threads (the CUDA driver starts its own) a signal lands on.
    timeout_s = float(req.get("timeout_s", 0) or 0)
    job_deadline = time.monotonic() + timeout_s if timeout_s > 0 else float("inf")
    progress = Progress(result_fd, req.get("forward_limit_s"), job_deadline)
    if timeout_s > 0:
        progress._arm(job_deadline)
    sandbox.limit_cpu(int(req.get("cpu_seconds", 3600)))
    torch.set_num_threads(int(req.get("threads", 2)))
    cap = _cap_memory(device, req.get("memory_cap_bytes"))
    try:
        result = _profiled(run_job, os.environ.get("KZ_PROFILE_DIR"))(req, job_dir, recorder, progress)
        result["ok"] = True
    except Failure as f:
        result = {"ok": False, "kind": f.kind, "reason": f.reason, "check": f.check, "cuda_error": f.cuda_error,
                  "memory_error": f.memory_error, "retry": f.retry}
    except BaseException as e:
        result = {"ok": False, "kind": "runtime_error", "reason": harness.describe_exception(e),
                  "cuda_error": harness.is_cuda_error(e), "memory_error": harness.is_memory_error(e),
                  "trace": traceback.format_exc()[-2000:]}
    faulthandler.cancel_dump_traceback_later()
    # What the recorder kept of the job goes before its memory is freed: a launch error's traceback
    # holds the job's frames, and through them its model.
    recorder.begin_job()
    if torch.device(device).type == "cuda":
        result["memory"] = {"peak_bytes": torch.cuda.max_memory_reserved(device), "cap_bytes": cap,
                            "tried_bytes": _tried_bytes(result.get("reason") or "")}
        torch.cuda.reset_peak_memory_stats(device)
        # Freed before the next job or the exit, which would otherwise unmap tens of GiB outside the lock.
        try:
            harness.free_cached_memory(device, req.get("lock_path"))
        except BaseException:  # noqa: BLE001 - a context the candidate broke: the child retires
            result["cuda_error"] = True
    for name in ("kz_task", "kz_candidate"):
        sys.modules.pop(name, None)
    linecache.clearcache()
    stages = result.setdefault("stages", {})
    stages.update({"lock_wait_" + k: v for k, v in device_lock.waits.items()})
    stages.update({"lock_held_" + k: v for k, v in device_lock.held.items()})
    return result


def _retire_reasons(result, state, index):
    """Why this child must not run another job (empty: it may)."""
    if not result.get("ok"):
        if result.get("kind") not in REUSABLE_FAILURES:
            return [f"the job ended in {result.get('kind')}"]
        if result.get("cuda_error") or result.get("memory_error"):
            return ["the job ended in a device error" if result.get("cuda_error") else "the job ran out of memory"]
    if index + 1 >= CHILD_MAX_JOBS:
        return [f"{CHILD_MAX_JOBS} jobs run"]
    return state.differences()


def child_main(job_fd, result_fd, child_dir, device, recorder):
    """A pre-forked child: confines itself and opens the device before any job exists, so that neither
    is on a job's critical path; then runs jobs until one leaves it unfit for the next or the parent
    closes the job pipe. Never returns."""
    code = 0
    try:
        _close_other_fds({job_fd, result_fd})
        _output_to(child_dir)
        warm = {}
        lap = stopwatch(warm)
        applied = sandbox.confine(child_dir, cpu_seconds=None, max_file_bytes=4 << 30)
        env = dict(os.environ)
        lap("child_confine_s")
        if torch.device(device).type == "cuda":
            torch.cuda.init()
            lap("child_cuda_init_s")
            warm_harness_ops(device, recorder)
            lap("child_warm_ops_s")
        state = child_state.ChildState(device)
        lap("child_snapshot_s")
        cpu_reported = 0.0
        for index in itertools.count():
            try:
                req = protocol.read_frame(job_fd)
            except EOFError:
                break  # discarded
            result = _run_one(req, env, device, recorder, result_fd)
            t0 = time.perf_counter()
            retired = _retire_reasons(result, state, index)
            stages = result["stages"]
            stages.update(warm)  # the child's warm-up is reported with its first job
            warm = {}
            stages["child_check_s"] = time.perf_counter() - t0
            stages["child"] = {"job_index": index, "retired": "; ".join(retired) or None}
            cpu = _cpu_seconds()
            stages["child_cpu_s"] = cpu - cpu_reported  # the first job's includes the warm-up
            cpu_reported = cpu
            result["sandbox"] = applied
            protocol.write_frame(result_fd, {"result": result}, allow_nan=True)
            if retired:
                break
    except BaseException:
        code = 3
    finally:
        os._exit(code)


class _Child:
    def __init__(self, pid, job_w, result_r, child_dir):
        self.pid, self.job_w, self.child_dir = pid, job_w, child_dir
        self.frames = protocol.FrameReader(result_r)
        self.jobs = 0  # jobs it has finished

    def alive(self):
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return pid == 0

    def kill(self):
        for kill in (os.killpg, os.kill):
            try:
                kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass

    def reap(self):
        """Closes the pipes and collects the process (killed unless it already ended); its exit status."""
        for fd in (self.job_w, self.frames.fd):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                self.kill()
                _, status = os.waitpid(self.pid, 0)
        except ChildProcessError:
            status = 0
        shutil.rmtree(self.child_dir, ignore_errors=True)
        return status


class ForkServer:
    """Runs each job in a warm child. The child that ran the last job runs the next while it is fit
    to (child_state.py); `spares` more are kept warm for when it is not."""

    def __init__(self, work_root, device, spares=1):
        self.work_root = work_root
        self.device = device
        self.spares_wanted = max(1, int(spares))
        os.makedirs(work_root, exist_ok=True)
        self.spares = []
        self.current = None
        # Everything a child does in Python before its job is done here once, before any fork: a
        # child inherits the imports and hooks instead of paying seconds for them per job (the first
        # TorchDispatchMode alone imports torch._dynamo).
        self.recorder = accounting.LaunchRecorder()
        warm_python(self.recorder)

    def _fork(self):
        child_dir = tempfile.mkdtemp(prefix="child-", dir=self.work_root)
        job_r, job_w = os.pipe()
        result_r, result_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            child_main(job_r, result_w, child_dir, self.device, self.recorder)
        os.close(job_r)
        os.close(result_w)
        return _Child(pid, job_w, result_r, child_dir)

    def warm(self, req=None):
        for child in [c for c in self.spares if not c.alive()]:
            child.reap()
            self.spares.remove(child)
        while len(self.spares) < self.spares_wanted:
            self.spares.append(self._fork())
        return {"ok": True, "spares": len(self.spares)}

    def _take(self):
        child, self.current = self.current, None
        if child is not None and child.alive():
            return child
        if child is not None:
            child.reap()
        self.warm()
        return self.spares.pop(0)

    def run(self, req):
        t0 = time.perf_counter()
        child = self._take()
        job_dir = tempfile.mkdtemp(prefix="job-", dir=self.work_root)
        try:
            protocol.write_frame(child.job_w, dict(req, job_dir=job_dir))
        except OSError:
            pass  # the child died; reported below as a crash
        dispatch_s = time.perf_counter() - t0
        if child.jobs:
            # A spare warms up while this job runs; not beside a child's first job, which is still
            # opening its own context: contexts open a few a second host-wide, and a lane's first
            # job should not wait for its spare's.
            self.warm()
        result = self._await(child, req)
        result["job_dir"] = job_dir
        result["log"] = _tail(os.path.join(job_dir, "log.txt"))
        result.setdefault("stages", {})["dispatch_s"] = dispatch_s
        return result

    def _await(self, child, req):
        """The child's result frame, or the failure of a child that crashed or ran out of time (then
        killed). Keeps the child as the next job's when it says it may run another."""
        timeout_s = float(req["timeout_s"])
        deadline = time.monotonic() + timeout_s
        limit_s = req.get("forward_limit_s")
        forward_deadline = None
        while True:
            until = min(deadline, forward_deadline) if forward_deadline else deadline
            try:
                frame = child.frames.read(until)
            except TimeoutError:
                child.kill()
                child.reap()
                reason = (f"a forward call did not return within {limit_s:g} s"
                          if forward_deadline and forward_deadline <= deadline else
                          f"candidate did not finish within {req.get('timeout_s')} s")
                return {"ok": False, "kind": "timeout", "reason": reason}
            except protocol.ProtocolError as e:
                frame = {"broken": str(e)}
            if frame is not None and "progress" in frame:
                if limit_s:
                    forward_deadline = time.monotonic() + float(limit_s) if frame["progress"] == "forward" else None
                continue
            if frame is not None and isinstance(frame.get("result"), dict):
                result = frame["result"]
                child.jobs += 1
                if result.get("stages", {}).get("child", {}).get("retired"):
                    child.reap()
                else:
                    self.current = child
                return result
            status = child.reap()
            if os.WIFSIGNALED(status):
                how = f"was killed by signal {os.WTERMSIG(status)}"
            else:
                how = f"exited with code {os.WEXITSTATUS(status)}"
            if frame is not None:
                how = "broke the protocol with its parent"
            return {"ok": False, "kind": "runtime_error", "crashed": True,
                    "reason": f"candidate process {how} before reporting a result"}
