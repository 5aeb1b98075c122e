"""Unit tests of the worker's Python pieces (run by ctest: python -m unittest discover tests/python)."""
import os
import tempfile
import unittest

import torch

from kernelzero import cuda as kzc
from kernelzero.worker import harness, protocol, static_checks


class ParameterKinds(unittest.TestCase):
    def test_reads_extern_c_signatures(self):
        src = r'''
        // extern "C" __global__ void commented_out(int x) {}
        extern "C" __global__ void __launch_bounds__(256) k1(const float* __restrict__ x, float *y,
                                                              float scale, long long n, unsigned m) {}
        extern "C" __global__ void k2(__half* h, double d, int i) {}
        '''
        kinds = kzc.parameter_kinds(src)
        self.assertEqual(kinds["k1"], ["pointer", "pointer", "float", "int", "int"])
        self.assertEqual(kinds["k2"], ["pointer", "float", "int"])
        self.assertNotIn("commented_out", kinds)


class Nvrtc(unittest.TestCase):
    def setUp(self):
        self.cache = tempfile.mkdtemp()
        os.environ["KZ_BUILD_CACHE"] = self.cache

    def test_compiles_once_then_hits_the_cache(self):
        src = 'extern "C" __global__ void f(float* x, long long n) { if (threadIdx.x < n) x[threadIdx.x] = 1; }'
        cubin, hit = kzc.compile_to_cubin(src, "sm_90")
        self.assertFalse(hit)
        self.assertGreater(len(cubin), 100)
        again, hit = kzc.compile_to_cubin(src, "sm_90")
        self.assertTrue(hit)
        self.assertEqual(cubin, again)
        self.assertFalse([f for f in os.listdir(os.path.join(self.cache, "nvrtc")) if f.endswith(".tmp")])

    def test_compile_error_carries_the_log(self):
        with self.assertRaises(kzc.CompileError) as cm:
            kzc.compile_to_cubin('extern "C" __global__ void f(float* x) { x[0] = undefined_name; }', "sm_90")
        self.assertIn("undefined_name", str(cm.exception))


def checks_of(src, backend="triton"):
    rep = static_checks.check_source(src, backend)
    return {k for k, v in rep.checks.items() if v == "fail"}


TRITON_OK = '''
import torch
import torch.nn as nn
import triton
import triton.language as tl
try:
    import numpy
except ImportError:
    numpy = None

@triton.jit
def k(x, y, n, B: tl.constexpr):
    o = tl.program_id(0) * B + tl.arange(0, B)
    tl.store(y + o, tl.load(x + o, mask=o < n), mask=o < n)

class ModelNew(nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        k[(triton.cdiv(x.numel(), 128),)](x, y, x.numel(), B=128)
        return y
'''


class StaticChecks(unittest.TestCase):
    def test_clean_candidate_passes(self):
        self.assertEqual(checks_of(TRITON_OK), set())

    def test_rules_see_through_aliases(self):
        self.assertIn("environment", checks_of(TRITON_OK + "\nfrom os import environ as e\nv = e['HOME']\n"))
        self.assertIn("monkey_patching", checks_of(TRITON_OK + "\ncfg = torch\ncfg.allclose = None\n"))
        self.assertIn("process_control", checks_of(TRITON_OK + "\nimport os as o\no.system('true')\n"))
        self.assertIn("introspection", checks_of(TRITON_OK + "\nimport sys\nm = sys.modules\n"))
        self.assertIn("exception_handling", checks_of(TRITON_OK.replace(
            "        return y", "        try:\n            return y\n        except Exception:\n            return x")))

    def test_syntax_error_and_missing_model_new(self):
        self.assertEqual(checks_of("def broken(:\n"), {"syntax"})
        self.assertIn("defines_model_new", checks_of(TRITON_OK.replace("ModelNew", "Other")))

    def test_cuda_backend_needs_cuda_kernels(self):
        self.assertIn("custom_kernel", checks_of(TRITON_OK, backend="cuda"))


class Compare(unittest.TestCase):
    def test_close_passes(self):
        r = torch.randn(100)
        self.assertTrue(harness.compare(r, r + 1e-4)["ok"])

    def test_zeros_fail_against_a_tiny_reference(self):
        r = torch.softmax(torch.rand(8, 4096), dim=-1)  # every value ~2.4e-4, far below atol
        res = harness.compare(r, torch.zeros_like(r))
        self.assertFalse(res["ok"])
        self.assertIn("relative L2", res["reason"])

    def test_nan_where_finite_fails_and_meta_is_checked(self):
        r = torch.randn(10)
        o = r.clone()
        o[3] = float("nan")
        self.assertFalse(harness.compare(r, o)["ok"])
        self.assertFalse(harness.compare(r, r.double())["meta"])
        self.assertFalse(harness.compare(r, (r,))["ok"])
        self.assertFalse(harness.compare(r, r[:5])["ok"])


class Protocol(unittest.TestCase):
    def test_round_trip_and_limit(self):
        r, w = os.pipe()
        protocol.write_frame(w, {"op": "ping", "x": [1, 2, 3]})
        self.assertEqual(protocol.read_frame(r), {"op": "ping", "x": [1, 2, 3]})
        os.write(w, (protocol.MAX_FRAME + 1).to_bytes(4, "big"))
        with self.assertRaises(protocol.ProtocolError):
            protocol.read_frame(r)


if __name__ == "__main__":
    unittest.main()
