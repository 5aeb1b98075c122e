"""Task validation (python/kernelzero/worker/validate.py): a good module passes every check; a planted
bad module fails exactly the check that names its fault."""
from __future__ import annotations

import json
import sys
import unittest
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
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


class Validation(unittest.TestCase):
    def assert_only_fails(self, result, name):
        failed = sorted(k for k, v in result["checks"].items() if v == "fail")
        self.assertEqual(failed, [name], result["reasons"])
        self.assertTrue(result["reasons"][name])

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
        r = check(variant("        return torch.relu(x)"), max_memory_mb=1e-6)
        self.assert_only_fails(r, "memory_band")
        # Over the band after the first forward: turned down there, the other runs not made.
        self.assertEqual(r["checks"]["deterministic"], "skip")
        self.assertEqual(r["checks"]["runtime_band"], "skip")
        self.assertGreater(r["info"]["memory_mb"], 0.0)

    def test_compile_time_is_reported_and_warm_up_compiles(self):
        r = check(GOOD, apis=("conv2d", "relu"), compile=True)
        self.assertEqual(r["checks"]["compile"], "pass", r["reasons"])
        self.assertGreater(r["info"]["compile_s"], 0.0)
        self.assertGreaterEqual(r["info"]["validate_s"], r["info"]["compile_s"])
        w = warm_up({"device": "cpu", "compile": True})
        self.assertTrue(w["ok"])
        self.assertGreater(w["compile_s"], 0.0)
        self.assertIsNone(warm_up({"device": "cpu"})["compile_s"])


if __name__ == "__main__":
    unittest.main()
