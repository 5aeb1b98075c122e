"""Reference side (trusted): runs the task's Model on the job's inputs, keeps the outputs in this
process, compares the candidate's outputs with them, and measures eager / torch.compile baselines."""
from __future__ import annotations

import os
import tempfile
import time

import torch

from . import harness

TIMING_SETS = 3


def _seeds(seed, trials):
    return {"trials": [seed + 1 + i for i in range(trials)], "recheck": seed + 101,
            "timing": [seed + 201 + m for m in range(TIMING_SETS)], "ablation": seed + 301}


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

    def _run(self, model, task, seed, device):
        inputs = harness.make_inputs(task, seed, device)
        with torch.no_grad():
            out = model(*inputs)
        harness.sync(device)
        if isinstance(out, torch.Tensor):
            out = out.detach()
        return out

    def prepare(self, req):
        device = torch.device(req["device"])
        seed = int(req["seed"])
        try:
            task = self.task(req["task_source"])
            model = harness.build(task.Model, harness.init_inputs(task, seed), seed, device)
            seeds = _seeds(seed, int(req["trials"]))
            outs = {"trials": [self._run(model, task, s, device) for s in seeds["trials"]],
                    "recheck": self._run(model, task, seeds["recheck"], device),
                    "timing": [self._run(model, task, s, device) for s in seeds["timing"]],
                    "ablation": self._run(model, task, seeds["ablation"], device)}
        except harness.TaskError:
            raise
        except BaseException as e:
            raise harness.TaskError("the reference Model failed: " + harness.describe_exception(e))
        first = outs["trials"][0]
        nbytes = sum(t.numel() * t.element_size() for t in harness.flatten(first) if isinstance(t, torch.Tensor))
        self.jobs[req["job_id"]] = outs
        return {"ok": True, "meta": harness.meta_of(first), "bytes": nbytes}

    def compare(self, req):
        ref = self.jobs.pop(req["job_id"], None)
        if ref is None:
            return {"ok": False, "error": f"no prepared reference for job {req['job_id']}"}
        tol = {k: tuple(v) for k, v in (req.get("tolerances") or {}).items()} or None
        tolerances = dict(harness.DEFAULT_TOLERANCES)
        if tol:
            tolerances.update(tol)
        try:
            got = torch.load(req["outputs_path"], weights_only=True)
        except BaseException as e:
            return {"ok": True, "unreadable": "candidate outputs cannot be read: " + harness.describe_exception(e)}
        res = {"ok": True}
        try:
            res["trials"] = [harness.compare(r, o, tolerances) for r, o in zip(ref["trials"], got["trials"])]
            res["recheck"] = harness.compare(ref["recheck"], got["recheck"], tolerances)
            res["timing"] = [harness.compare(r, o, tolerances) for r, o in zip(ref["timing"], got["timing"])]
            if got.get("ablated") is not None:
                res["ablation_matches"] = harness.compare(ref["ablation"], got["ablated"], tolerances)["ok"]
        except (KeyError, TypeError) as e:
            return {"ok": True, "unreadable": "candidate outputs are malformed: " + harness.describe_exception(e)}
        return res

    def drop(self, req):
        self.jobs.pop(req["job_id"], None)
        return {"ok": True}

    def baseline(self, req):
        device = torch.device(req["device"])
        iters = int(req["timing_iters"])
        task = self.task(req["task_source"])
        seed = 0
        try:
            model = harness.build(task.Model, harness.init_inputs(task, seed), seed, device)
            sets = [harness.make_inputs(task, seed + 201 + m, device) for m in range(TIMING_SETS)]
            eager, _ = harness.time_callable(model, sets, device, iters, lock_path=req.get("lock_path"), checks=0)
        except BaseException as e:
            raise harness.TaskError("timing the reference failed: " + harness.describe_exception(e))
        res = {"ok": True, "eager": eager, "compiled": None, "compile_error": None, "torch": torch.__version__,
               "device_name": harness.device_name(device)}
        if req.get("with_compile"):
            try:
                compiled = torch.compile(model)
                t0 = time.perf_counter()
                with torch.no_grad():
                    compiled(*sets[0])
                harness.sync(device)
                res["compile_s"] = time.perf_counter() - t0
                res["compiled"], _ = harness.time_callable(compiled, sets, device, iters,
                                                           lock_path=req.get("lock_path"), checks=0)
            except BaseException as e:
                res["compile_error"] = harness.describe_exception(e)
        return res
