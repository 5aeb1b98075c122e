"""Candidate side: a fork server whose every job runs in a fresh, confined child.

The parent imports torch and Triton once (never initialising CUDA, so forking stays safe) and forks
a child per job; the child runs the candidate, sends each output to be compared to the reference
worker as it is made (transfer.py: CUDA IPC, nothing written to disk) and reports over a pipe. A
hang, crash, exit call or CUDA error ends only the child: the parent reports it and stays healthy.
The child never receives a reference output: it gets the job's seed, and from the reference only
whether to go on."""
from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import re
import resource
import select
import signal
import tempfile
import time
import traceback

import torch

from . import accounting, device_lock, harness, sandbox, transfer

LOG_TAIL = 4000
# How long before the parent's deadline a job that is still running has its stacks written to its log.
STACK_DUMP_LEAD_S = 1.0


def _tail(path, n=LOG_TAIL):
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - n))
            return f.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _detach(out):
    if isinstance(out, torch.Tensor):
        return out.detach()
    if isinstance(out, (list, tuple)):
        return type(out)(_detach(o) for o in out)
    return out


class Failure(Exception):
    def __init__(self, kind, reason, check=None, cuda_error=False, memory_error=False, retry=False):
        super().__init__(reason)
        self.kind, self.reason, self.check, self.cuda_error = kind, reason, check, cuda_error
        self.memory_error, self.retry = memory_error, retry


def _failure(e, what):
    """A runtime error of the candidate's, flagged when it is the device's (a CUDA error poisons the
    process; running out of memory may be its neighbours' doing: the controller decides)."""
    return Failure("runtime_error", what + harness.describe_exception(e), cuda_error=harness.is_cuda_error(e),
                   memory_error=harness.is_memory_error(e))


def _classify_load_error(e):
    from kernelzero import cuda as kzc
    text = harness.describe_exception(e)
    if isinstance(e, kzc.CompileError):
        return Failure("compile_error", text)
    name = type(e).__name__
    if name in ("CompilationError", "CompileTimeAssertionFailure") or "Error building extension" in text:
        return Failure("compile_error", text)
    if isinstance(e, SyntaxError):
        return Failure("format_error", text)
    return _failure(e, "importing the candidate failed: ")


# Errors a Triton kernel raises when it is compiled (on the GPU) or first interpreted (on the CPU,
# where the interpreter reports what the compiler would have rejected as a Python error).
TRITON_COMPILE_ERRORS = ("CompilationError", "CompileTimeAssertionFailure", "UnsupportedLanguageConstruct")
INTERPRETED_COMPILE_ERRORS = ("AttributeError", "NameError", "TypeError", "UnsupportedLanguageConstruct",
                              "CompilationError")


def _forward_failure(e, recorder, when=""):
    launch = recorder.launch_error
    if launch is not None:
        name, err = launch
        chain = [err] + [c for c in (err.__cause__, err.__context__) if c is not None]
        kinds = {type(x).__name__ for x in chain}
        interpreted = os.environ.get("TRITON_INTERPRET") == "1"
        if kinds & set(TRITON_COMPILE_ERRORS) or (interpreted and kinds & set(INTERPRETED_COMPILE_ERRORS)):
            return Failure("compile_error", f"Triton kernel {name} does not compile: {harness.describe_exception(err)}")
    return _failure(e, f"forward raised{when}: ")


def _stopwatch(into):
    """lap(name) records into[name] = seconds since the previous lap (or since this call)."""
    last = [time.perf_counter()]

    def lap(name):
        now = time.perf_counter()
        into[name] = now - last[0]
        last[0] = now
    return lap


class _Decided(Exception):
    """The reference answered that the job is decided (a comparison failed, or the kernels are decoys):
    nothing further is run."""


def run_job(req, job_dir, recorder):
    checks, stages = {}, {}
    result = {"checks": checks, "compile_s": None, "timing": None, "custom_fraction": None,
              "launches": 0, "library_ops": {}, "cpu_custom_fraction": None, "stages": stages, "stopped": None}
    if req.get("extensions_dir"):
        os.environ["TORCH_EXTENSIONS_DIR"] = req["extensions_dir"]
    try:
        channel = transfer.Sender(req["channel"]["path"], req["channel"]["token"])
    except transfer.ChannelError as e:
        raise Failure("infra_error", str(e))
    try:
        _run_job(req, job_dir, recorder, channel, result)
    except _Decided as d:
        result["stopped"] = str(d)
    except (transfer.ChannelError, device_lock.DeviceBusy) as e:
        raise Failure("infra_error", str(e), retry=True)
    finally:
        channel.close()
    return result


def _run_job(req, job_dir, recorder, channel, result):
    device = torch.device(req["device"])
    seed = int(req["seed"])
    lock = req.get("lock_path")
    checks, stages = result["checks"], result["stages"]
    stage = _stopwatch(stages)
    try:
        task = harness.load_module(req["task_source"], "kz_task", job_dir)
        init_args = harness.init_inputs(task, seed)
        ref_model = harness.build(task.Model, init_args, seed, device)
    except BaseException as e:  # the task is the harness's responsibility, never the candidate's
        raise Failure("infra_error", "task failed in the candidate process: " + harness.describe_exception(e))

    t0 = time.perf_counter()
    try:
        cand = harness.load_module(req["candidate_source"], "kz_candidate", job_dir)
    except BaseException as e:
        raise _classify_load_error(e)
    if not isinstance(getattr(cand, "ModelNew", None), type):
        raise Failure("format_error", "the candidate defines no class ModelNew", "defines_model_new")
    try:
        model = harness.build(cand.ModelNew, init_args, seed, device)
        if isinstance(model, torch.nn.Module) and isinstance(ref_model, torch.nn.Module):
            ref_sd = ref_model.state_dict()
            new_sd = model.state_dict()
            shared = {k: v for k, v in ref_sd.items() if k in new_sd and new_sd[k].shape == v.shape}
            model.load_state_dict(shared, strict=False)
            model.eval()
    except BaseException as e:
        raise _failure(e, "constructing ModelNew failed: ")
    del ref_model
    result["compile_s"] = time.perf_counter() - t0
    stage("load_s")

    # A Triton kernel compiled at its first launch (seconds of CPU) does not hold the device lock.
    recorder.compile_context = lambda: device_lock.released(device)
    poison_sizes = [int(req.get("poison_bytes", 0))]
    census = accounting.LibraryOpCensus(recorder)

    def call(inputs, census=None):
        with device_lock.hold(lock, exclusive=False):
            accounting.poison_free_memory(device, poison_sizes)
            t = time.perf_counter()
            with torch.no_grad(), (census if census is not None else contextlib.nullcontext()):
                out = model(*inputs)
            harness.sync(device)
        return _detach(out), time.perf_counter() - t

    def send(slot, index, out):
        if not channel.send(slot, index, out):
            raise _Decided(f"{slot} {index}")

    def made(input_seed):  # unlocked: time_callable holds the lock around its own calls
        return harness.make_inputs(task, input_seed, device)

    def inputs_for(slot, index=0):
        with device_lock.hold(lock, exclusive=False):
            return made(harness.slot_seed(seed, slot, index))

    forward_seconds = 0.0
    recorder.reset()
    inputs = None
    try:
        for i in range(int(req["trials"])):
            inputs = None  # the previous set goes before the next is made
            inputs = inputs_for("trial", i)
            with device_lock.hold(lock, exclusive=False):
                snapshot = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
            out, secs = call(inputs, census)
            forward_seconds += secs
            if i == 0:
                stage("trial0_s")  # first calls pay the candidate's lazy loading
            send("trial", i, out)
            del out
            with device_lock.hold(lock, exclusive=False):
                changed = harness.first_changed(snapshot, inputs)
            del snapshot
            if changed is not None:
                checks["inputs_unchanged"] = "fail"
                raise Failure("incorrect", f"trial {i}: forward modified input {changed} in place", "inputs_unchanged")
    except (Failure, _Decided, transfer.ChannelError, device_lock.DeviceBusy):
        raise
    except BaseException as e:
        raise _forward_failure(e, recorder)
    finally:
        # What the trials ran is reported even when the reference stopped them: a rejection
        # (library operators, no kernel launched) outranks an incorrect output.
        launches = list(recorder.launches)
        result["launches"] = len(launches)
        if device.type == "cpu" and forward_seconds > 0:
            result["cpu_custom_fraction"] = min(1.0, recorder.custom_seconds / forward_seconds)
        result["library_ops"] = dict(census.compute_ops)
        result["all_ops"] = dict(census.all_ops)
    checks["inputs_unchanged"] = "pass"
    stage("trials_s")

    # Ablation: on fresh inputs (so a cached result cannot stand in), the call with the candidate's
    # own launches skipped must not still be right.
    if launches:
        recorder.set_enabled(False)
        try:
            ablated, _ = call(inputs_for("ablation"))
        except BaseException:
            ablated = None  # the kernels matter enough that forward cannot run without them
        finally:
            recorder.set_enabled(True)
        harness.sync(device)
        if ablated is not None:
            send("ablation", 0, ablated)
        del ablated
    stage("ablation_s")

    share_probe = None
    if device.type == "cuda" and launches:
        # The launches go through our hooks: CUDA events around each one are enough. Measured with the
        # device to itself, at the end of the timed iterations (time_callable's probe): under the
        # shared lock, another job's kernels would run inside the spans and count as ours.
        def share_probe(probe_inputs, queue_ahead_cycles):
            try:
                return accounting.event_kernel_share(model, probe_inputs, recorder, device, queue_ahead_cycles)
            except BaseException as e:  # noqa: BLE001 - device failures end the timing; others leave no share
                if harness.is_cuda_error(e) or harness.is_memory_error(e):
                    raise
                result["profiler_error"] = harness.describe_exception(e)
                return None, 0.0
    elif device.type == "cuda":
        # Kernels launched from C++ (load_inline) are visible only to the profiler. It runs on the last
        # trial's inputs (checked unchanged) under the shared lock: starting it costs hundreds of ms
        # of host time, which under the exclusive lock would hold every other job back.
        try:
            with device_lock.hold(lock, exclusive=False):
                frac, per_kernel = accounting.gpu_kernel_share(model, inputs, req.get("kernel_names", []), device)
            result["custom_fraction"] = frac
            result["share_source"] = "profiler"
            result["gpu_kernels"] = dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])[:12])
        except BaseException as e:  # noqa: BLE001
            if harness.is_cuda_error(e) or harness.is_memory_error(e):
                raise _failure(e, "forward raised: ")
            result["profiler_error"] = harness.describe_exception(e)
    inputs = None
    stage("kernel_share_s")

    try:
        with device_lock.hold(lock, exclusive=False):
            sets = harness.InputSets(made, [harness.slot_seed(seed, "timing", m) for m in range(harness.TIMING_SETS)],
                                     int(req["keep_sets_bytes"]))
        timing, _ = harness.time_callable(lambda *a: _detach(model(*a)), sets, device,
                                          int(req["timing_iters"]), warmup=int(req.get("warmup", 3)),
                                          lock_path=lock, min_iters=req.get("min_iters"),
                                          precision=req.get("precision"), budget_ms=req.get("budget_ms"),
                                          keep=lambda m, out: send("timing", m, out), probe=share_probe)
        del sets
        if share_probe is not None:
            result["custom_fraction"] = timing.pop("probe", None)
            result["share_source"] = "events"
        result["timing"] = timing
        stage("timing_s")
        recheck, _ = call(inputs_for("recheck"))
        send("recheck", 0, recheck)
        del recheck
    except (_Decided, transfer.ChannelError, device_lock.DeviceBusy):
        raise
    except BaseException as e:
        raise _forward_failure(e, recorder, " during timing")
    stage("recheck_s")


def _cpu_seconds():
    """CPU time of this process and of the processes it waited for (Triton's ptxas), warm-up
    included: what one job costs the host's cores."""
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


def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 1 << 16)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _warm_python(recorder):
    """Imports and first-use work of the harness on the CPU (never CUDA: the parent must stay forkable)."""
    import torch.profiler  # noqa: F401 - the load_inline share measurement
    from kernelzero import cuda as kzc  # noqa: F401
    x = torch.ones(8)
    with torch.no_grad(), accounting.LibraryOpCensus(recorder):
        y = (x + 1).clone()
    harness.first_changed([x], [y])
    transfer.describe((y, 1))


def _warm_harness_ops(device, recorder):
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
    needs more fails here, in its own process, instead of in a neighbour's."""
    if not cap_bytes or torch.device(device).type != "cuda":
        return None
    index = harness.device_index(device)
    total = torch.cuda.get_device_properties(index).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, int(cap_bytes) / total), index)
    return int(cap_bytes)


def spare_main(job_fd, result_fd, job_dir, device, recorder):
    """A pre-forked child: confines itself and opens the device *before* its job exists, so that neither
    is on a job's critical path; then reads one job, runs it, reports and exits. Never returns."""
    code = 0
    try:
        _close_other_fds({job_fd, result_fd})
        log_fd = os.open(os.path.join(job_dir, "log.txt"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(log_fd)
        warm = {}
        lap = _stopwatch(warm)
        profile_dir = os.environ.get("KZ_PROFILE_DIR")  # diagnostics: a cProfile report per job
        applied = sandbox.confine(job_dir, cpu_seconds=None, max_file_bytes=4 << 30)
        lap("child_confine_s")
        if torch.device(device).type == "cuda":
            torch.cuda.init()
            lap("child_cuda_init_s")
            _warm_harness_ops(device, recorder)
            lap("child_warm_ops_s")
        data = _read_all(job_fd)
        if not data:
            os._exit(0)  # discarded spare
        req = json.loads(data.decode())
        for counters in (device_lock.waits, device_lock.held):  # the job's own
            counters.update({k: 0.0 for k in counters})
        # Where a job that runs out of time is stuck: shortly before the parent's deadline a watchdog
        # thread of faulthandler's writes every thread's stack into the log the verdict quotes. A
        # watchdog inside the child rather than a signal from the parent: it does not depend on which
        # of the child's threads (the CUDA driver starts its own) a signal lands on.
        timeout_s = float(req.get("timeout_s", 0) or 0)
        if timeout_s > 0:
            faulthandler.dump_traceback_later(max(0.5 * timeout_s, timeout_s - STACK_DUMP_LEAD_S), exit=False)
        sandbox.limit_cpu(int(req.get("cpu_seconds", 3600)))
        torch.set_num_threads(int(req.get("threads", 2)))
        cap = _cap_memory(device, req.get("memory_cap_bytes"))
        try:
            result = _profiled(run_job, profile_dir)(req, job_dir, recorder)
            result["ok"] = True
        except Failure as f:
            result = {"ok": False, "kind": f.kind, "reason": f.reason, "check": f.check, "cuda_error": f.cuda_error,
                      "memory_error": f.memory_error, "retry": f.retry}
        except BaseException as e:
            result = {"ok": False, "kind": "runtime_error", "reason": harness.describe_exception(e),
                      "cuda_error": harness.is_cuda_error(e), "memory_error": harness.is_memory_error(e),
                      "trace": traceback.format_exc()[-2000:]}
        faulthandler.cancel_dump_traceback_later()
        if torch.device(device).type == "cuda":
            result["memory"] = {"peak_bytes": torch.cuda.max_memory_reserved(device), "cap_bytes": cap,
                                "tried_bytes": _tried_bytes(result.get("reason") or "")}
            # Freed before the exit, which would otherwise unmap tens of GiB outside the lock.
            try:
                harness.free_cached_memory(device, req.get("lock_path"))
            except BaseException:  # noqa: BLE001 - a context the candidate broke: its exit frees what it can
                pass
        result["sandbox"] = applied
        result.setdefault("stages", {}).update(warm)
        result["stages"].update({"lock_wait_" + k: v for k, v in device_lock.waits.items()})
        result["stages"].update({"lock_held_" + k: v for k, v in device_lock.held.items()})
        result["stages"]["child_cpu_s"] = _cpu_seconds()
        out = json.dumps(result, default=str, allow_nan=True).encode()
        while out:
            n = os.write(result_fd, out)
            out = out[n:]
    except BaseException:
        code = 3
    finally:
        os._exit(code)


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


class _Spare:
    def __init__(self, pid, job_w, result_r, job_dir):
        self.pid, self.job_w, self.result_r, self.job_dir = pid, job_w, result_r, job_dir

    def alive(self):
        try:
            pid, _ = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            return False
        return pid == 0

    def discard(self):
        for fd in (self.job_w, self.result_r):
            try:
                os.close(fd)
            except OSError:
                pass
        try:
            os.killpg(self.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.waitpid(self.pid, 0)
        except ChildProcessError:
            pass


class ForkServer:
    """Runs each job in its own child. `spares` children are kept warm (confined, device opened); a
    job goes to the oldest, and a replacement is forked as soon as it is handed out. More than one
    spare helps when jobs arrive faster than a child warms up."""

    def __init__(self, work_root, device, spares=1):
        self.work_root = work_root
        self.device = device
        self.spares_wanted = max(1, int(spares))
        os.makedirs(work_root, exist_ok=True)
        self.spares = []
        # Everything a child does in Python before its job is done here once, before any fork: a
        # child inherits the imports and hooks instead of paying seconds for them per job (the first
        # TorchDispatchMode alone imports torch._dynamo).
        self.recorder = accounting.LaunchRecorder()
        _warm_python(self.recorder)

    def _fork_spare(self):
        job_dir = tempfile.mkdtemp(prefix="job-", dir=self.work_root)
        job_r, job_w = os.pipe()
        result_r, result_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            spare_main(job_r, result_w, job_dir, self.device, self.recorder)
        os.close(job_r)
        os.close(result_w)
        return _Spare(pid, job_w, result_r, job_dir)

    def warm(self, req=None):
        for sp in [sp for sp in self.spares if not sp.alive()]:
            sp.discard()
            self.spares.remove(sp)
        while len(self.spares) < self.spares_wanted:
            self.spares.append(self._fork_spare())
        return {"ok": True, "spares": len(self.spares)}

    def run(self, req):
        t0 = time.perf_counter()
        self.warm()
        child = self.spares.pop(0)
        data = json.dumps(req).encode()
        try:
            while data:
                n = os.write(child.job_w, data)
                data = data[n:]
        except OSError:
            pass  # the child died; reported below as a crash
        os.close(child.job_w)
        dispatch_s = time.perf_counter() - t0
        self.warm()  # the next job's child warms up while this one runs
        r, pid, job_dir = child.result_r, child.pid, child.job_dir
        deadline = time.monotonic() + float(req["timeout_s"])
        chunks = []
        timed_out = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([r], [], [], min(left, 1.0))
            if ready:
                b = os.read(r, 1 << 16)
                if not b:
                    break
                chunks.append(b)
        os.close(r)
        if timed_out:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
        log = _tail(os.path.join(job_dir, "log.txt"))
        if timed_out:
            return {"ok": False, "kind": "timeout",
                    "reason": f"candidate did not finish within {req.get('timeout_s')} s",
                    "job_dir": job_dir, "log": log}
        try:
            result = json.loads(b"".join(chunks).decode()) if chunks else None
        except ValueError:
            result = None
        if result is None:
            if os.WIFSIGNALED(status):
                how = f"was killed by signal {os.WTERMSIG(status)}"
            else:
                how = f"exited with code {os.WEXITSTATUS(status)}"
            return {"ok": False, "kind": "runtime_error",
                    "reason": f"candidate process {how} before reporting a result",
                    "job_dir": job_dir, "log": log, "crashed": True}
        result["job_dir"] = job_dir
        result["log"] = log
        result.setdefault("stages", {})["dispatch_s"] = dispatch_s
        return result
