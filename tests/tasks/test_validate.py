"""Task validation (python/kernelzero/worker/validate.py): a good module passes every check; a planted
bad module fails exactly the check that names its fault."""
from __future__ import annotations

import json
import sys
import unittest
from unittest import mock
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
import torch  # noqa: E402
from kernelzero.worker.validate import validate_task, warm_up  # noqa: E402

CATALOG = {a["name"]: a for a in json.loads((Path(__file__).resolve().parents[2] / "tasks" / "api_catalog.json").read_text())["apis"]}

GOOD = '''
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, c_in, c_out):
        super().__init__()
        self.conv = nn.Conv2d(c_in, c_out, kernel_size=3, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


def get_inputs():
    return [torch.randn(2, 4, 8, 8)]


def get_init_inputs():
    return [4, 6]
'''


def variant(forward_body, extra=""):
    return f'''
import torch
import torch.nn as nn
{extra}

class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(16))

    def forward(self, x):
{forward_body}


def get_inputs():
    return [torch.randn(8, 16)]


def get_init_inputs():
    return []
'''


def check(source, apis=("relu",), **kw):
    return validate_task({"source": source, "apis": [CATALOG[a] for a in apis], "device": "cpu", **kw})


class ValidationCase(unittest.TestCase):
    def assert_only_fails(self, result, name):
        failed = sorted(k for k, v in result["checks"].items() if v == "fail")
        self.assertEqual(failed, [name], result["reasons"])
        self.assertTrue(result["reasons"][name])


class Validation(ValidationCase):

    def test_good_module_passes(self):
        r = check(GOOD, apis=("conv2d", "relu"))
        self.assertEqual({k: v for k, v in r["checks"].items() if v != "pass"}, {"compile": "skip"}, r["reasons"])

    def test_format(self):
        r = check(GOOD.replace("def get_inputs", "def make_inputs"), apis=("relu",))
        self.assertEqual(r["checks"]["format"], "fail")
        self.assertIn("get_inputs", r["reasons"]["format"])
        r = check("def broken(:\n")
        self.assertEqual(r["checks"]["format"], "fail")
        r = check(variant("        return torch.relu(x)").replace("return [torch.randn(8, 16)]", "return [torch.randn(8, 16), 3]"))
        self.assertEqual(r["checks"]["format"], "fail")

    def test_runs(self):
        self.assert_only_fails(check(variant("        return torch.relu(x @ torch.ones(3, 3))")), "runs")

    def test_deterministic(self):
        r = check(variant("        CALLS[0] += 1\n        return torch.relu(x) * CALLS[0]", extra="CALLS = [0]"))
        self.assert_only_fails(r, "deterministic")

    def test_no_randomness(self):
        r = check(variant("        return torch.relu(x + torch.rand_like(x))"))
        self.assertEqual(r["checks"]["no_randomness"], "fail")
        self.assertIn("rand_like", r["reasons"]["no_randomness"])

    def test_forward_changing_its_inputs_sees_fresh_ones_every_run(self):
        # The no_randomness run reuses the inputs made for the first run: a copy of them, so a forward
        # that changes its inputs in place does not see the first run's leftovers there.
        r = check(variant("        x.add_(1.0)\n        return torch.relu(x)"))
        self.assertEqual({k: v for k, v in r["checks"].items() if v == "fail"}, {}, r["reasons"])

    def test_non_degenerate(self):
        self.assert_only_fails(check(variant("        return torch.relu(x) * 1e-14")), "non_degenerate")
        # Small but not degenerate: a softmax over many columns (zeros would fail the norm check).
        r = check(variant("        return torch.softmax(torch.relu(x).repeat(1, 256), dim=1)"), apis=("relu", "softmax"))
        self.assertEqual(r["checks"]["non_degenerate"], "pass", r["reasons"])
        r = check(variant("        return torch.relu(torch.ones_like(x))"))
        self.assertEqual(r["checks"]["non_degenerate"], "fail")
        self.assert_only_fails(check(variant("        return torch.relu(x) / 0.0")), "non_degenerate")

    def test_compile_only_after_every_other_check_passed(self):
        # torch.compile is the slowest check: a module already invalid is not compiled.
        r = check(variant("        return torch.relu(x) * 1e-14"), compile=True)
        self.assertEqual(r["checks"]["non_degenerate"], "fail")
        self.assertEqual(r["checks"]["compile"], "skip", r["reasons"])

    def test_input_dependent(self):
        self.assert_only_fails(check(variant("        return torch.relu(self.w) + 0.0 * x.sum()")), "input_dependent")
        # Saturated: a softmax over 16 columns of nearly equal values is 1/16 to within 0.1%; the
        # output changes with the inputs, but not beyond the verifier's tolerance.
        r = check(variant("        return torch.softmax(x * 1e-3, dim=1) + torch.relu(self.w) * 1e-4"))
        self.assertEqual(r["checks"]["input_dependent"], "fail", r["reasons"])
        self.assertIn("verifier's comparison", r["reasons"]["input_dependent"])

    def test_well_conditioned(self):
        # The sign of a sum that cancels about 1e8 against itself: float32 rounds the small part away
        # (0, sign 0) where float64 keeps it (sign +-1), so the module misses its own float64 result,
        # and a kernel that sums in another order could miss the reference.
        body = ("        big = x[:, :1] * 1e8\n"
                "        s = (big + torch.relu(x).sum(dim=1, keepdim=True) - 4.0) - big\n"
                "        return x + torch.sign(s)")
        r = check(variant(body))
        self.assert_only_fails(r, "well_conditioned")
        self.assertIn("float64", r["reasons"]["well_conditioned"])
        self.assertEqual(check(variant("        return torch.relu(x).sum(dim=1)"))["checks"]["well_conditioned"],
                         "pass")
        # A forward that makes a float32 tensor itself (the zero bias the symbolic generator gives
        # baddbmm) runs in float64 too: addmm refuses a float32 bias beside float64 operands, which
        # would skip the check for such modules.
        cancel, bias = body.rsplit("\n", 1)[0], "torch.zeros(1, device=x.device)"
        r = check(variant(cancel + f"\n        return torch.addmm({bias}, x + torch.sign(s), x.t())"))
        self.assert_only_fails(r, "well_conditioned")
        r = check(variant(f"        return torch.addmm({bias}, x, x.t())"))
        self.assertEqual(r["checks"]["well_conditioned"], "pass", r["info"].get("well_conditioned_skipped"))
        self.assertEqual(torch.get_default_dtype(), torch.float32)

    def test_uses_api_set(self):
        r = check(variant("        return torch.relu(x)"), apis=("relu", "softmax", "conv2d"))
        self.assert_only_fails(r, "uses_api_set")
        self.assertIn("softmax", r["reasons"]["uses_api_set"])
        self.assertIn("conv2d", r["reasons"]["uses_api_set"])
        # Method form and aliases count: x.sum(), F.gelu.
        src = variant("        return F.gelu(x).sum(dim=1)", extra="import torch.nn.functional as F")
        self.assertEqual(check(src, apis=("gelu", "sum"))["checks"]["uses_api_set"], "pass")

    def test_runtime_and_memory_bands(self):
        self.assert_only_fails(check(variant("        return torch.relu(x)"), max_runtime_ms=1e-9), "runtime_band")
        # Within the band as declared (576 bytes of parameter and input), over it after the first
        # forward (a 0.5 MiB output): turned down there, the other runs not made.
        r = check(variant("        return torch.relu(x).repeat(1000, 1)"), max_memory_mb=0.1)
        self.assert_only_fails(r, "memory_band")
        self.assertEqual(r["checks"]["runs"], "pass")
        self.assertEqual(r["checks"]["deterministic"], "skip")
        self.assertEqual(r["checks"]["runtime_band"], "skip")
        self.assertGreater(r["info"]["memory_mb"], 0.1)

    def test_memory_band_before_building_the_module(self):
        # 4 MiB of declared weight over a 1 MiB band: turned down from the meta device's count, the
        # module never built or run.
        big = variant("        return torch.relu(x) * self.w[0, :16]").replace("torch.randn(16)", "torch.randn(1024, 1024)")
        self.assertEqual(check(big)["checks"]["memory_band"], "pass")
        r = check(big, max_memory_mb=1.0)
        self.assert_only_fails(r, "memory_band")
        self.assertIn("parameters, buffers and inputs", r["reasons"]["memory_band"])
        self.assertEqual(r["checks"]["runs"], "skip")
        self.assertAlmostEqual(r["info"]["memory_mb"], (1024 * 1024 + 8 * 16) * 4 / 2**20)
        # A module that cannot be built on the meta device (its __init__ reads a value) is measured
        # by its real run instead: its inputs alone (2 KiB) are within the band, its weight, inputs
        # and output (~6 KiB) are not.
        reads = GOOD.replace("super().__init__()", "super().__init__()\n        self.k = int(torch.ones(1).item())")
        r = check(reads, apis=("conv2d", "relu"), max_memory_mb=0.004)
        self.assert_only_fails(r, "memory_band")
        self.assertEqual(r["checks"]["runs"], "pass")
        self.assertEqual(check(reads, apis=("conv2d", "relu"))["checks"]["memory_band"], "pass")

    def test_inputs_over_the_band_are_turned_down_when_the_model_cannot_be_built(self):
        # A Proposer's module: an __init__ naming what it never defined, and get_inputs asking for
        # 4 TiB. Its inputs are counted on the meta device all the same; made on the CPU they would
        # fill the host's memory (or, refused there, fail format instead).
        broken = variant("        return torch.relu(x)").replace("torch.randn(16)", "torch.randn(undefined_len)")
        huge = broken.replace("torch.randn(8, 16)", "torch.randn(1024, 1024, 1024, 1024)")
        r = check(huge)
        self.assert_only_fails(r, "memory_band")
        self.assertIn("the task's inputs take", r["reasons"]["memory_band"])
        self.assertEqual(r["info"]["memory_mb"], 4 * 2**20)
        self.assertEqual(r["checks"]["runs"], "skip")
        # Within the band the real run finds the fault, as before.
        self.assert_only_fails(check(broken), "runs")

    def test_compile_time_is_reported_and_warm_up_compiles(self):
        r = check(GOOD, apis=("conv2d", "relu"), compile=True)
        self.assertEqual(r["checks"]["compile"], "pass", r["reasons"])
        self.assertGreater(r["info"]["compile_s"], 0.0)
        self.assertGreaterEqual(r["info"]["validate_s"], r["info"]["compile_s"])
        w = warm_up({"device": "cpu", "compile": True})
        self.assertTrue(w["ok"])
        self.assertGreater(w["compile_s"], 0.0)
        self.assertIsNone(warm_up({"device": "cpu"})["compile_s"])

    def test_return_memory_empties_the_allocators_cache_after_the_validation(self):
        # The controller gives the validation's share of the device to the verifier's jobs once the
        # reply is in: by then the worker's allocator must hold none of it. Whatever the outcome.
        failing = variant("        return torch.zeros(3)")
        for source, asked in ((GOOD, True), (failing, True), (GOOD, False)):
            with mock.patch.object(torch.cuda, "is_initialized", return_value=True), \
                    mock.patch.object(torch.cuda, "empty_cache") as empty:
                check(source, apis=("conv2d", "relu"), **({"return_memory": True} if asked else {}))
            self.assertEqual(empty.call_count, 1 if asked else 0, (source, asked))


OUTER = variant("        return (x.unsqueeze(2) * x.unsqueeze(1)).sum(1)").replace("torch.randn(8, 16)", "torch.randn(8, 1024)")


@unittest.skipUnless(torch.cuda.is_available(), "needs a GPU")
class ValidationOnGpu(ValidationCase):
    """memory_band on a GPU, where the first forward's peak is measured (ctest tasks_validate_gpu)."""

    def test_return_memory_leaves_the_worker_holding_no_cached_blocks(self):
        src = variant("        return torch.relu(x)").replace("torch.randn(8, 16)", "torch.randn(1024, 4096)")
        one_input = 1024 * 4096 * 4
        check(src, apis=("relu",), device="cuda")
        self.assertGreaterEqual(torch.cuda.memory_reserved(), one_input)  # the allocator keeps its blocks
        r = check(src, apis=("relu",), device="cuda", return_memory=True)
        self.assertTrue(all(v != "fail" for v in r["checks"].values()), r["reasons"])
        self.assertLess(torch.cuda.memory_reserved(), one_input)

    def test_forward_over_the_band_is_turned_down_before_the_real_inputs(self):
        # 32 KiB of input as declared, a 32 MiB product in the forward. Within a wide band every check
        # passes, and memory_band records the real run's peak.
        r = check(OUTER, apis=(), device="cuda", max_memory_mb=1024)
        self.assertTrue(all(v != "fail" for v in r["checks"].values()), r["reasons"])
        need = r["info"]["memory_mb"]
        self.assertGreater(need, 32)
        # Just under that need: turned down by the probe (one forward on inputs made on the GPU), which
        # measures what the real run does, so the CPU-seeded inputs are never made.
        r = check(OUTER, apis=(), device="cuda", max_memory_mb=need * 0.95)
        self.assert_only_fails(r, "memory_band")
        self.assertIn("inputs made on the GPU", r["reasons"]["memory_band"])
        self.assertEqual(r["checks"]["runs"], "skip")
        self.assertAlmostEqual(r["info"]["memory_mb"], need, delta=need * 0.02)

    def test_band_holds_one_forward_not_every_check(self):
        # 16 MiB of input, 16 MiB of output: one forward needs ~32 MiB. The checks after it hold four
        # runs' outputs and a second set of inputs at once (over 96 MiB): the validator's memory, which
        # does not count against the task.
        src = variant("        return torch.relu(x)").replace("torch.randn(8, 16)", "torch.randn(1024, 4096)")
        r = check(src, apis=("relu",), device="cuda", max_memory_mb=48)
        self.assertTrue(all(v != "fail" for v in r["checks"].values()), r["reasons"])
        self.assertGreater(r["info"]["memory_mb"], 31)
        self.assertLess(r["info"]["memory_mb"], 48)

    def test_module_the_probe_cannot_run_is_measured_by_its_real_run(self):
        # A tensor kept as a plain attribute stays on the meta device under to_empty: the probe's
        # forward fails, and the real run measures the task.
        src = OUTER.replace("super().__init__()", "super().__init__()\n        self.scale = torch.ones(1024)").replace(
            "return (x.unsqueeze(2)", "return (x.unsqueeze(2) * self.scale.to(x.device)")
        r = check(src, apis=(), device="cuda", max_memory_mb=16)
        self.assert_only_fails(r, "memory_band")
        self.assertNotIn("inputs made on the GPU", r["reasons"]["memory_band"])
        self.assertEqual(r["checks"]["runs"], "pass")


if __name__ == "__main__":
    unittest.main()
