"""Reference side (trusted): runs the task's Model, compares the candidate's outputs with its own as
they arrive (transfer.py), measures eager / torch.compile baselines and the task's memory footprint.

Per job the reference keeps one output of its own at a time: it computes the output for the next
slot the child will send (trial i+1 while the child runs trial i), compares on the device, and
drops both."""
from __future__ import annotations

import os
import secrets
import select
import tempfile
import threading
import time

import torch

from . import device_lock, harness, transfer

TIMING_SETS = harness.TIMING_SETS
# How long past the candidate's own time limit a job waits for it to connect (its child may still be
# warming up when the controller opens the job).
CONNECT_SLACK_S = 60


def _reset_memory(device, lock):
    """Gives the cached device memory back and restarts the peak."""
    if device.type == "cuda":
        harness.free_cached_memory(device, lock)
        torch.cuda.reset_peak_memory_stats(device)


class Reference:
    def __init__(self, work_root):
        self.dir = tempfile.mkdtemp(prefix="reference-", dir=work_root)
        os.chmod(self.dir, 0o700)
        self.modules = {}
        self.jobs = {}

    def task(self, source):
        h = harness.source_hash(source)
        mod = self.modules.get(h)
        if mod is None:
            try:
                mod = harness.load_module(source, f"kz_task_{h[:16]}", self.dir)
            except BaseException as e:
                raise harness.TaskError("the task module failed to import: " + harness.describe_exception(e))
            for name in ("Model", "get_inputs", "get_init_inputs"):
                if not hasattr(mod, name):
                    raise harness.TaskError(f"the task module defines no {name}")
            self.modules[h] = mod
        return mod

    # ---- memory footprint -----------------------------------------------------------------------

    def footprint(self, req):
        """An estimate of the task's memory from shapes alone (the model and inputs built on the meta
        device, one forward there): parameters, inputs and outputs, before anything is allocated.
        `estimated: false` when the task cannot run on the meta device."""
        task = self.task(req["task_source"])
        try:
            with torch.device("meta"):
                model = harness.build(task.Model, harness.init_inputs(task, 0), 0, "meta")
            inputs = harness.make_inputs(task, 1, "meta")
            with torch.no_grad():
                out = model(*inputs)
            params = _module_bytes(model)
            return {"ok": True, "estimated": True, "params": params, "inputs": harness.logical_bytes(inputs),
                    "outputs": harness.logical_bytes(out), "forward": harness.logical_bytes(out)}
        except BaseException as e:  # noqa: BLE001 - the measured footprint comes from the baseline
            return {"ok": True, "estimated": False, "why": harness.describe_exception(e)[:300]}

    # ---- baselines ------------------------------------------------------------------------------

    def baseline(self, req):
        device = torch.device(req["device"])
        iters = int(req["timing_iters"])
        task = self.task(req["task_source"])
        seed = 0
        lock = req.get("lock_path")
        adaptive = {k: req.get(k) for k in ("min_iters", "precision", "budget_ms")}
        discard = lambda m, out: None  # noqa: E731 - baselines compare nothing
        _reset_memory(device, lock)
        res = {"ok": True, "compiled": None, "compile_error": None, "torch": torch.__version__,
               "device_name": harness.device_name(device)}
        try:
            try:
                model = harness.build(task.Model, harness.init_inputs(task, seed), seed, device)
                res["memory"] = _measure_forward(model, task, device, lock)
                with device_lock.hold(lock, exclusive=False):
                    sets = harness.InputSets(lambda s: harness.make_inputs(task, s, device),
                                             [harness.slot_seed(seed, "timing", m) for m in range(TIMING_SETS)],
                                             int(req["keep_sets_bytes"]))
                res["eager"], _ = harness.time_callable(model, sets, device, iters, lock_path=lock, checks=0,
                                                        keep=discard, **adaptive)
            except device_lock.DeviceBusy as e:
                return {"ok": False, "busy": True, "error": "timing the reference: " + str(e)}
            except BaseException as e:
                if harness.is_memory_error(e):
                    return {"ok": False, "memory_failure": True,
                            "error": "timing the reference ran out of memory: " + harness.describe_exception(e),
                            "peak_bytes": _peak(device)}
                raise harness.TaskError("timing the reference failed: " + harness.describe_exception(e))
            if req.get("with_compile"):
                try:
                    compiled = torch.compile(model, backend=_inductor_behind_lock(lock, device))
                    t0 = time.perf_counter()
                    with device_lock.hold(lock, exclusive=False):
                        first = sets.get(0)
                    # Unlocked: Inductor compiles (seconds of CPU) inside this first call, and a
                    # reader holding the lock that long would stall every timer; the GPU work in it
                    # takes the lock (_inductor_behind_lock).
                    with torch.no_grad():
                        compiled(*first)
                    harness.sync(device)
                    del first
                    res["compile_s"] = time.perf_counter() - t0
                    res["compiled"], _ = harness.time_callable(compiled, sets, device, iters, lock_path=lock,
                                                               checks=0, keep=discard, **adaptive)
                except device_lock.DeviceBusy as e:
                    return {"ok": False, "busy": True, "error": "timing the compiled reference: " + str(e)}
                except BaseException as e:  # noqa: BLE001 - a task torch.compile cannot handle has no such baseline
                    res["compile_error"] = harness.describe_exception(e)
            res["memory"]["baseline_peak"] = _peak(device)
            return res
        finally:
            model = compiled = sets = None  # noqa: F841
            _reset_memory(device, lock)

    # ---- jobs: outputs compared as the candidate sends them --------------------------------------

    def open_job(self, req):
        """Starts listening for the candidate child of a job; returns where to connect and the token."""
        if req["job_id"] in self.jobs:
            return {"ok": False, "error": f"job {req['job_id']} is already open"}
        job = _Job(self, req)
        self.jobs[req["job_id"]] = job
        job.start()
        return {"ok": True, "channel": {"path": job.path, "token": job.token}}

    def close_job(self, req):
        """Waits for the job's comparisons to end (the child has ended by now: its connection closes),
        stops listening when the child never came, and returns every comparison."""
        job = self.jobs.pop(req["job_id"], None)
        if job is None:
            return {"ok": False, "error": f"no open job {req['job_id']}"}
        done = job.finish(float(req.get("wait_s", 60)))
        res = job.results()
        device, lock = job.device, job.lock
        del job
        _reset_memory(device, lock)
        if not done:
            return {"ok": False, "error": "the reference's comparisons did not end in time"}
        return res


def _inductor_behind_lock(lock, device):
    """torch.compile's default backend (Inductor, default mode), with the first run of each compiled
    graph under the shared device lock: that run autotunes the graph's Triton kernels (benchmarking
    each configuration on the device, hundreds of milliseconds) and runs them once, work that would
    otherwise land inside another job's timed iterations. Compilation itself stays unlocked."""
    def backend(gm, example_inputs):
        from torch._inductor.compile_fx import compile_fx
        fn = compile_fx(gm, example_inputs)
        first = [True]

        def run(*args, **kwargs):
            if not first[0]:
                return fn(*args, **kwargs)
            first[0] = False
            with device_lock.hold(lock, exclusive=False):
                out = fn(*args, **kwargs)
                harness.sync(device)
            return out
        run._boxed_call = getattr(fn, "_boxed_call", False)
        return run
    return backend


def _module_bytes(model):
    if not isinstance(model, torch.nn.Module):
        return 0
    return harness.logical_bytes(list(model.parameters()) + list(model.buffers()))


def _peak(device):
    return torch.cuda.max_memory_reserved(device) if device.type == "cuda" else None


def _measure_forward(model, task, device, lock):
    """What the task holds (parameters, one input set) and what one forward allocates above that
    (its output and workspace), in bytes, measured by the caching allocator."""
    with device_lock.hold(lock, exclusive=False):
        inputs = harness.make_inputs(task, harness.slot_seed(0, "trial"), device)
    mem = {"params": _module_bytes(model), "inputs": harness.logical_bytes(inputs)}
    if device.type != "cuda":
        with torch.no_grad():
            out = model(*inputs)
        mem.update(outputs=harness.storage_bytes(out), forward=harness.storage_bytes(out))
        return mem
    torch.cuda.synchronize(device)
    before = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    with device_lock.hold(lock, exclusive=False), torch.no_grad():
        out = model(*inputs)
        torch.cuda.synchronize(device)
    mem.update(outputs=harness.storage_bytes(out), forward=torch.cuda.max_memory_allocated(device) - before)
    return mem


class _Job(threading.Thread):
    """One job's comparisons, on a thread of the reference worker (its main thread goes on answering
    the controller). Slots arrive in the order the child produces them; each is compared against the
    reference's own output for that slot's input seed."""

    def __init__(self, ref, req):
        super().__init__(name=f"kz-job-{req['job_id']}", daemon=True)
        self.ref = ref
        self.req = req
        self.device = torch.device(req["device"])
        self.seed = int(req["seed"])
        self.trials = int(req["trials"])
        self.lock = req.get("lock_path")
        # The child connects within its own run's time, which starts after the job is opened.
        self.deadline = time.monotonic() + float(req["timeout_s"]) + CONNECT_SLACK_S
        tol = dict(harness.DEFAULT_TOLERANCES)
        tol.update({k: tuple(v) for k, v in (req.get("tolerances") or {}).items()})
        self.tolerances = tol
        self.token = secrets.token_hex(16)
        self.path = os.path.join(ref.dir, f"j{secrets.token_hex(6)}.sock")
        self.listener = transfer.listen(self.path)
        self.cancel_r, self.cancel_w = os.pipe()
        self.out = {"trials": [None] * self.trials, "timing": [None] * TIMING_SETS, "recheck": None,
                    "ablation_matches": None, "connected": False, "ended": False, "decided": None}
        self.error = None
        self.task_error = None
        self.memory_failure = None
        self.model = None
        self.task = None
        self.pending = None  # (slot, index, reference output) computed ahead

    # -- controller side --
    def finish(self, wait_s):
        os.write(self.cancel_w, b"x")
        self.join(wait_s)
        if self.is_alive():
            return False
        os.close(self.cancel_r)
        os.close(self.cancel_w)
        return True

    def results(self):
        res = {"ok": True, "trials": self.out["trials"], "timing": self.out["timing"], "recheck": self.out["recheck"],
               "connected": self.out["connected"], "ended": self.out["ended"]}
        if self.out["ablation_matches"] is not None:
            res["ablation_matches"] = self.out["ablation_matches"]
        if self.out["decided"]:
            res["decided"] = self.out["decided"]
        if self.task_error:
            res["task_error"] = self.task_error
        if self.memory_failure:
            res["memory_failure"] = self.memory_failure
        if self.error:
            res["channel_error"] = self.error
        res["peak_bytes"] = _peak(self.device)
        return res

    # -- the thread --
    def run(self):
        conn = None
        try:
            if self.device.type == "cuda":
                # This thread's driver calls (IPC mappings) need the device's context current here.
                torch.cuda.set_device(harness.device_index(self.device))
                torch.cuda.synchronize(self.device)
            self.task = self.ref.task(self.req["task_source"])
            try:
                self.model = harness.build(self.task.Model, harness.init_inputs(self.task, self.seed), self.seed,
                                           self.device)
                self.pending = ("trial", 0, self._reference_output("trial", 0))
            except harness.TaskError:
                raise
            except BaseException as e:
                if harness.is_memory_error(e):
                    raise
                raise harness.TaskError("the reference Model failed: " + harness.describe_exception(e))
            conn = self._accept()
            if conn is None:
                return
            self.out["connected"] = True
            self._serve(conn)
        except harness.TaskError as e:
            self.task_error = str(e)
        except BaseException as e:  # noqa: BLE001 - reported to the controller, never raised
            if harness.is_memory_error(e):
                self.memory_failure = "the reference ran out of memory: " + harness.describe_exception(e)
            else:
                self.error = harness.describe_exception(e)
        finally:
            for s in (conn, self.listener):
                if s is not None:
                    s.close()
            try:
                os.unlink(self.path)
            except OSError:
                pass
            self.model = self.pending = None
            if self.device.type == "cuda":
                torch.cuda.synchronize(self.device)

    def _accept(self):
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.error = "the candidate never connected"
                return None
            ready, _, _ = select.select([self.listener, self.cancel_r], [], [], min(left, 1.0))
            if self.listener in ready:
                conn, _ = self.listener.accept()
                conn.settimeout(max(1.0, self.deadline - time.monotonic()))
                hello = transfer.recv_message(conn)
                if hello.get("token") != self.token:
                    conn.close()
                    continue
                return conn
            if self.cancel_r in ready:
                return None  # the child ended without connecting

    def _reference_output(self, slot, index):
        with device_lock.hold(self.lock, exclusive=False), torch.no_grad():
            inputs = harness.make_inputs(self.task, harness.slot_seed(self.seed, slot, index), self.device)
            out = self.model(*inputs)
            harness.sync(self.device)
        return out.detach() if isinstance(out, torch.Tensor) else out

    def _serve(self, conn):
        while True:
            try:
                msg = transfer.recv_message(conn)
            except EOFError:
                return
            if msg.get("end"):
                self.out["ended"] = True
                return
            slot, index = msg.get("slot"), msg.get("index", 0)
            if slot not in ("trial", "timing", "recheck", "ablation") or not isinstance(index, int):
                raise transfer.ChannelError(f"unexpected message from the candidate: slot {slot!r}")
            if ((slot == "trial" and not 0 <= index < self.trials)
                    or (slot == "timing" and not 0 <= index < TIMING_SETS)):
                raise transfer.ChannelError(f"unexpected slot {slot} {index}")
            if self.pending is not None and self.pending[:2] == (slot, index):
                ref = self.pending[2]
            else:
                ref = self._reference_output(slot, index)
            self.pending = None
            res = self._compare(conn, ref, msg.get("out") or {})
            del ref
            if slot == "ablation" and res.get("unreadable"):
                res["ok"] = True  # fail closed: an ablated output that cannot be read clears no one
            if slot == "trial":
                self.out["trials"][index] = res
            elif slot == "timing":
                self.out["timing"][index] = res
            elif slot == "recheck":
                self.out["recheck"] = res
            else:
                self.out["ablation_matches"] = bool(res["ok"])
            decided = (slot == "ablation") == bool(res["ok"])  # a failed comparison, or a decoy found
            transfer.reply(conn, not decided)
            if decided:
                self.out["decided"] = f"{slot} {index}"
                return
            if slot == "trial" and index + 1 < self.trials:
                self.pending = ("trial", index + 1, self._reference_output("trial", index + 1))

    def _compare(self, conn, ref, desc):
        """Compares the described output with `ref`: metadata first, then the storage's size (both
        refuse without a byte copied), then the values, on the device."""
        mm = harness.meta_mismatch(harness.meta_of(ref), transfer.meta_of_description(desc))
        if not mm:
            mm = _storage_mismatch(ref, desc)
        received = transfer.Received()
        try:
            # Mapping and unmapping another process's allocation is device work: under the shared lock
            # (but not the waits on the child between them).
            with device_lock.hold(self.lock, exclusive=False):
                mapped = not mm and received.map_all(desc)
            transfer.accept_bytes(conn, not mm, everything=not mapped)
            if mm:
                return {"ok": False, "reason": mm, "max_abs_err": None, "max_rel_err": None, "meta": False}
            received.receive(desc, conn, as_bytes=not mapped)
            with device_lock.hold(self.lock, exclusive=False):
                try:
                    out = received.build(desc, self.device, as_bytes=not mapped)
                except Exception as e:  # noqa: BLE001 - the device's own failures are the verifier's
                    if harness.is_memory_error(e) or harness.is_cuda_error(e):
                        raise
                    return {"ok": False,
                            "reason": "the candidate's output cannot be read: " + harness.describe_exception(e),
                            "max_abs_err": None, "max_rel_err": None, "meta": True, "unreadable": True}
                res = harness.compare(ref, out, self.tolerances)
                del out
            if not mapped and any(d.get("ipc") for d in transfer.tensor_leaves(desc)):
                res["transport"] = "host"  # the CUDA allocation could not be mapped: copied instead
            return res
        finally:
            # Kernels reading the mapped memory end before it is unmapped, whatever happened above.
            with device_lock.hold(self.lock, exclusive=False):
                try:
                    harness.sync(self.device)
                finally:
                    received.close()


def _storage_mismatch(ref, desc):
    """An output whose storage is far larger than the reference's is refused before it is mapped or
    read. Like is compared with like: storage bytes on both sides, so a reference that returns a view
    of a larger buffer passes its own check."""
    allowed = 4 * max(harness.storage_bytes(ref), harness.logical_bytes(ref), 1) + (64 << 20)
    got = sum(int(d["storage_bytes"]) for d in transfer.tensor_leaves(desc))
    if got > allowed:
        return f"output storage of {got} bytes is far larger than the reference's ({harness.storage_bytes(ref)} bytes)"
    return None
