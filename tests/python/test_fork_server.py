"""The candidate worker's fork server on the CPU: a child runs job after job while each leaves it clean,
and is retired when one does not (a changed setting, a patched function, a crash, a hung forward)."""
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

from kernelzero.worker import protocol
from kernelzero.worker.reference import Reference

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KNOWN_GOOD = os.path.join(ROOT, "examples", "known_good")


def _read(path):
    with open(path) as f:
        return f.read()


TASK = _read(os.path.join(KNOWN_GOOD, "tasks", "relu.py"))
GOOD = _read(os.path.join(KNOWN_GOOD, "triton", "relu.py"))
FORWARD = "        x = x.contiguous()\n"


def _in_forward(line):
    """The known-good ReLU with `line` run at the start of every forward call."""
    assert FORWARD in GOOD
    return GOOD.replace(FORWARD, f"        {line}\n" + FORWARD)


class ForkServer(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="kz-fork-test-")
        env = dict(os.environ, KZ_SPARE_CHILDREN="1", TRITON_CACHE_DIR=os.path.join(self.dir, "triton"))
        self.proc = subprocess.Popen([sys.executable, "-m", "kernelzero.worker", "--role", "candidate", "--device",
                                      "cpu", "--work-root", os.path.join(self.dir, "candidate")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self.assertEqual(protocol.read_frame(self.proc.stdout.fileno())["event"], "ready")
        self.ref = Reference(self.dir)
        self.ids = itertools.count()

    def tearDown(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        self.proc.stdout.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def run_job(self, candidate, forward_limit_s=None, timeout_s=60):
        job_id = f"j{next(self.ids)}"
        common = {"job_id": job_id, "task_source": TASK, "device": "cpu", "seed": 1234, "trials": 2,
                  "timeout_s": timeout_s, "lock_path": None}
        opened = self.ref.open_job(dict(common, tolerances={"torch.float32": [1e-2, 1e-2]}))
        req = dict(common, id=1, op="run", candidate_source=candidate, backend="triton", warmup=1,
                   channel=opened["channel"], poison_bytes=0, memory_cap_bytes=None, kernel_names=[],
                   extensions_dir=None, forward_limit_s=forward_limit_s, cpu_seconds=600, threads=1,
                   timing_iters=3, min_iters=2, precision=0.5, budget_ms=100, keep_sets_bytes=0)
        protocol.write_frame(self.proc.stdin.fileno(), req)
        result = protocol.read_frame(self.proc.stdout.fileno())
        compared = self.ref.close_job({"job_id": job_id, "wait_s": 30})
        return result, compared

    def child(self, result):
        """(which job of its child this was, why the child retired after it or None)."""
        child = result["stages"]["child"]
        return child["job_index"], child["retired"]

    def test_a_child_runs_jobs_until_one_leaves_it_changed(self):
        r, cmp = self.run_job(GOOD)
        self.assertTrue(r["ok"], r)
        self.assertFalse(cmp.get("decided"), cmp)  # every output matched the reference's
        self.assertEqual(len(cmp["trials"]), 2)
        self.assertEqual(self.child(r), (0, None))
        r, _ = self.run_job(GOOD)
        self.assertEqual(self.child(r), (1, None))

        r, _ = self.run_job(_in_forward('torch.set_float32_matmul_precision("medium")'))
        self.assertTrue(r["ok"], r)
        index, why = self.child(r)
        self.assertEqual(index, 2)
        self.assertIn("float32_matmul_precision", why)

        r, _ = self.run_job(GOOD)  # a fresh child, whose settings are the defaults again
        self.assertEqual(self.child(r), (0, None))
        r, _ = self.run_job(GOOD.replace("class ModelNew", "torch.nn.functional.gelu = torch.relu\n\n\nclass ModelNew"))
        self.assertIn("rebound torch.nn.functional.gelu", self.child(r)[1])
        r, _ = self.run_job(GOOD)
        self.assertEqual(self.child(r), (0, None))

    def test_a_crash_or_a_hung_forward_costs_only_its_child(self):
        r, _ = self.run_job(GOOD)
        self.assertEqual(self.child(r), (0, None))
        r, _ = self.run_job("import os\n" + _in_forward("os._exit(7)"))
        self.assertFalse(r["ok"])
        self.assertTrue(r.get("crashed"), r)
        self.assertIn("exited with code 7", r["reason"])
        r, _ = self.run_job(GOOD)
        self.assertEqual(self.child(r), (0, None))

        # A forward that never returns is killed at its own limit, long before the job's timeout.
        t0 = time.monotonic()
        r, _ = self.run_job(_in_forward("while True: pass"), forward_limit_s=1.0, timeout_s=60)
        self.assertEqual(r["kind"], "timeout", r)
        self.assertIn("a forward call did not return within 1 s", r["reason"])
        self.assertLess(time.monotonic() - t0, 20)
        r, _ = self.run_job(GOOD, forward_limit_s=10.0)
        self.assertTrue(r["ok"], r)
        self.assertEqual(self.child(r), (0, None))


if __name__ == "__main__":
    unittest.main()
