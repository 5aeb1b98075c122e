"""One candidate job, as a confined child of the fork server (fork_server.py) runs it: load the task
and the candidate, run the trials, the kernel ablation, the kernel share and the timed iterations,
sending each output to be compared to the reference worker as it is made (transfer.py: CUDA IPC,
nothing written to disk). The child never receives a reference output: it gets the job's seed, and
from the reference only whether to go on."""
from __future__ import annotations

import contextlib
import os
import time

import torch

from . import accounting, device_lock, harness, transfer


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


def stopwatch(into):
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


def run_job(req, job_dir, recorder, progress):
    """Runs one job (`progress`: fork_server.Progress, told when forward calls start and end); returns
    the result, or raises Failure."""
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
        _run_job(req, job_dir, recorder, channel, result, progress)
    except _Decided as d:
        result["stopped"] = str(d)
    except (transfer.ChannelError, device_lock.DeviceBusy) as e:
        raise Failure("infra_error", str(e), retry=True)
    finally:
        channel.close()
    return result


def _run_job(req, job_dir, recorder, channel, result, progress):
    job = _Job(req, recorder, channel, result, progress)
    job.load(job_dir)
    launches, last_inputs = job.trials()
    job.ablation(launches)
    share_probe = job.kernel_share(launches, last_inputs)
    del last_inputs
    job.timing(share_probe)


class _Job:
    """The stages of one job, in order (load, trials, ablation, kernel share, timing); each records
    its own stage time and fills `result`."""

    def __init__(self, req, recorder, channel, result, progress):
        self.req, self.recorder, self.channel, self.result, self.progress = req, recorder, channel, result, progress
        self.device = torch.device(req["device"])
        self.seed = int(req["seed"])
        self.lock = req.get("lock_path")
        self.checks = result["checks"]
        self.stage = stopwatch(result["stages"])
        self.poison_sizes = [int(req.get("poison_bytes", 0))]
        self.task = self.model = None

    def load(self, job_dir):
        req, device, seed = self.req, self.device, self.seed
        try:
            self.task = harness.load_module(req["task_source"], "kz_task", job_dir)
            init_args = harness.init_inputs(self.task, seed)
            ref_model = harness.build(self.task.Model, init_args, seed, device)
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
        self.model = model
        self.result["compile_s"] = time.perf_counter() - t0
        self.stage("load_s")

        # A Triton kernel compiled and loaded at its first launch (seconds of CPU) neither holds the
        # device lock nor counts against the forward call's limit. (The recorder outlives the job:
        # what it holds must not hold the job, whose model would outlive it too.)
        progress = self.progress

        @contextlib.contextmanager
        def host_work():
            with progress.paused(), device_lock.released(device):
                yield
        self.recorder.compile_context = host_work

    # ---- helpers over the loaded job -------------------------------------------------------------

    def call(self, inputs, census=None):
        """One forward call, watched (fork_server.Progress), with the free memory poisoned before it:
        (output, seconds)."""
        with device_lock.hold(self.lock, exclusive=False):
            accounting.poison_free_memory(self.device, self.poison_sizes)
            t = time.perf_counter()
            with self.progress.forward():
                with torch.no_grad(), (census if census is not None else contextlib.nullcontext()):
                    out = self.model(*inputs)
                harness.sync(self.device)
        return _detach(out), time.perf_counter() - t

    def send(self, slot, index, out):
        if not self.channel.send(slot, index, out):
            raise _Decided(f"{slot} {index}")

    def made(self, input_seed):  # unlocked: time_callable holds the lock around its own calls
        return harness.make_inputs(self.task, input_seed, self.device)

    def call_on(self, slot, index=0):  # forward on the slot's inputs, in one shared hold
        with device_lock.hold(self.lock, exclusive=False):
            return self.call(self.made(harness.slot_seed(self.seed, slot, index)))

    # ---- stages ----------------------------------------------------------------------------------

    def trials(self):
        """The correctness trials, each output sent as it is made; returns the kernels launched and
        the last trial's inputs (checked unchanged)."""
        recorder, result, checks = self.recorder, self.result, self.checks
        census = accounting.LibraryOpCensus(recorder)
        forward_seconds = 0.0
        recorder.reset()
        inputs = None
        try:
            for i in range(int(self.req["trials"])):
                inputs = None  # the previous set goes before the next is made
                # One shared hold for the trial's device work (a timer elsewhere waits for at most one
                # trial, and this job queues behind timers once a trial, not once a step); the send
                # waits on the reference and is outside it.
                with device_lock.hold(self.lock, exclusive=False):
                    inputs = self.made(harness.slot_seed(self.seed, "trial", i))
                    snapshot = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
                    out, secs = self.call(inputs, census)
                    changed = harness.first_changed(snapshot, inputs)
                del snapshot
                forward_seconds += secs
                if i == 0:
                    self.stage("trial0_s")  # first calls pay the candidate's lazy loading
                self.send("trial", i, out)
                del out
                if changed is not None:
                    checks["inputs_unchanged"] = "fail"
                    raise Failure("incorrect", f"trial {i}: forward modified input {changed} in place",
                                  "inputs_unchanged")
        except (Failure, _Decided, transfer.ChannelError, device_lock.DeviceBusy):
            raise
        except BaseException as e:
            raise _forward_failure(e, recorder)
        finally:
            # What the trials ran is reported even when the reference stopped them: a rejection
            # (library operators, no kernel launched) outranks an incorrect output.
            launches = list(recorder.launches)
            result["launches"] = len(launches)
            if self.device.type == "cpu" and forward_seconds > 0:
                result["cpu_custom_fraction"] = min(1.0, recorder.custom_seconds / forward_seconds)
            result["library_ops"] = dict(census.compute_ops)
            result["all_ops"] = dict(census.all_ops)
        checks["inputs_unchanged"] = "pass"
        self.stage("trials_s")
        return launches, inputs

    def ablation(self, launches):
        """On fresh inputs (so a cached result cannot stand in), the call with the candidate's own
        launches skipped must not still be right."""
        if launches:
            self.recorder.set_enabled(False)
            try:
                ablated, _ = self.call_on("ablation")
            except BaseException:
                ablated = None  # the kernels matter enough that forward cannot run without them
            finally:
                self.recorder.set_enabled(True)
            harness.sync(self.device)
            if ablated is not None:
                self.send("ablation", 0, ablated)
            del ablated
        self.stage("ablation_s")

    def kernel_share(self, launches, inputs):
        """The share of forward's device time in the candidate's kernels. Returns the probe that
        measures it inside the timed iterations, or None when it was measured here (or cannot be)."""
        device, result = self.device, self.result
        share_probe = None
        if device.type == "cuda" and launches:
            # The launches go through our hooks: CUDA events around each one are enough. Measured with
            # the device to itself, at the end of the timed iterations (time_callable's probe): under
            # the shared lock, another job's kernels would run inside the spans and count as ours.
            def share_probe(probe_inputs, queue_ahead_cycles):
                try:
                    return accounting.event_kernel_share(self.model, probe_inputs, self.recorder, device,
                                                         queue_ahead_cycles)
                except BaseException as e:  # noqa: BLE001 - device failures end the timing; others leave no share
                    if harness.is_cuda_error(e) or harness.is_memory_error(e):
                        raise
                    result["profiler_error"] = harness.describe_exception(e)
                    return None, 0.0
        elif device.type == "cuda":
            # Kernels launched from C++ (load_inline) are visible only to the profiler. It runs on the
            # last trial's inputs (checked unchanged) under the shared lock: starting it costs hundreds
            # of ms of host time, which under the exclusive lock would hold every other job back.
            try:
                with device_lock.hold(self.lock, exclusive=False):
                    frac, per_kernel = accounting.gpu_kernel_share(self.model, inputs,
                                                                   self.req.get("kernel_names", []), device)
                result["custom_fraction"] = frac
                result["share_source"] = "profiler"
                result["gpu_kernels"] = dict(sorted(per_kernel.items(), key=lambda kv: -kv[1])[:12])
            except BaseException as e:  # noqa: BLE001
                if harness.is_cuda_error(e) or harness.is_memory_error(e):
                    raise _failure(e, "forward raised: ")
                result["profiler_error"] = harness.describe_exception(e)
        self.stage("kernel_share_s")
        return share_probe

    def timing(self, share_probe):
        """The timed iterations (their kept outputs sent), then a recheck on fresh inputs."""
        req, result = self.req, self.result
        try:
            with device_lock.hold(self.lock, exclusive=False):
                sets = harness.InputSets(self.made, [harness.slot_seed(self.seed, "timing", m)
                                                     for m in range(harness.TIMING_SETS)],
                                         int(req["keep_sets_bytes"]))
            timing, _ = harness.time_callable(lambda *a: _detach(self.model(*a)), sets, self.device,
                                              int(req["timing_iters"]), warmup=int(req.get("warmup", 3)),
                                              lock_path=self.lock, min_iters=req.get("min_iters"),
                                              precision=req.get("precision"), budget_ms=req.get("budget_ms"),
                                              keep=lambda m, out: self.send("timing", m, out), probe=share_probe)
            del sets
            if share_probe is not None:
                result["custom_fraction"] = timing.pop("probe", None)
                result["share_source"] = "events"
            result["timing"] = timing
            self.stage("timing_s")
            recheck, _ = self.call_on("recheck")
            self.send("recheck", 0, recheck)
            del recheck
        except (_Decided, transfer.ChannelError, device_lock.DeviceBusy):
            raise
        except BaseException as e:
            raise _forward_failure(e, self.recorder, " during timing")
        self.stage("recheck_s")
