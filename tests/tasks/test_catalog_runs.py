"""Every API of tasks/api_catalog.json runs in PyTorch: for each shape rule ("kind") a small concrete
instance is built from the template and module, and its forward must produce finite values."""
from __future__ import annotations

import json
import re
import unittest
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: F401 - used by the templates

CATALOG = Path(__file__).resolve().parents[2] / "tasks" / "api_catalog.json"

# kind -> (shapes of the operands by rank, extra substitutions)
def operands(api):
    kind, r = api["kind"], api["rank"][0]
    spatial = {3: [32], 4: [16, 16], 5: [8, 8, 8]}
    if kind in ("conv", "conv_depthwise", "conv_grouped", "conv_asym", "conv_transpose", "conv_transpose_grouped",
                "pool", "adaptive_pool", "global_pool", "norm_channel"):
        return [[2, 8] + spatial.get(r, [])], {"c_in": 8, "c_out": 12, "channels": 8, "groups": 4}
    if kind in ("matmul", "square_matmul"):
        return ([[2, 3, 16, 16], [2, 3, 16, 16]] if r == 4 else [[16, 16], [16, 16]]), {}
    if kind == "matmul_ta":
        return [[24, 16], [24, 8]], {}
    if kind == "matmul_tb":
        return [[16, 24], [8, 24]], {}
    if kind == "bmm":
        return [[4, 16, 24], [4, 24, 8]], {}
    if kind == "tensor3_matmul":
        return [[4, 16, 24], [24, 8]], {}
    if kind == "matvec":
        return [[16, 24], [24, 1]], {}
    if kind == "diag_matmul":
        return [[16], [16, 24]], {}
    if kind == "outer":
        return [[16], [24]], {}
    if kind in ("linear", "bilinear"):
        return [[4, 32]] * api["arity"], {"in_features": 32, "out_features": 48}
    if kind == "attention":
        return [[2, 4, 16, 8]] * 3, {"scale": 8 ** -0.5}
    if kind == "mha":
        return [[2, 16, 32]], {"embed": 32, "heads": 4}
    if kind == "loss_class":
        return [[8, 10]], {}
    shape = [4, 6, 8, 10, 12][: max(r, 2 if kind in ("reduce_dim", "reduce_keepdim", "transpose", "flatten") else r)]
    if kind == "flatten":
        shape = [4, 6, 8]
    return [shape] * api["arity"], {"last": shape[-1], "bias_shape": shape[-1]}


def instantiate(api):
    shapes, subs = operands(api)
    for k, v in (api.get("params") or {}).items():
        if isinstance(v, list):
            subs.setdefault(k, v[0])
    subs.setdefault("dim", -1)
    subs.setdefault("k", 4)
    names = ["x", "y", "z"] if "{q}" not in api["template"] else ["q", "k", "v"]
    if api["kind"] == "diag_matmul":
        names = ["d", "x"]
    args = {n: f"a{i}" for i, n in enumerate(names[: len(shapes)])}
    if api["kind"] == "loss_class":
        args["target"] = "t"
    fill = lambda s: re.sub(r"\{(\w+)\}", lambda m: str({**subs, **args, "m": "m", "p": "p"}.get(m.group(1), m.group(0))), s)  # noqa: E731
    init = f"self.m = {fill(api['module'])}" if api.get("module") and "{m}" in api["template"] else \
           (f"self.p = {fill(api['module'])}" if api.get("module") else "pass")
    params = ", ".join(args[n] for n in names[: len(shapes)]) + (", t" if api["kind"] == "loss_class" else "")
    src = (f"class M(nn.Module):\n    def __init__(self):\n        super().__init__()\n        {init}\n"
           f"    def forward(self, {params}):\n        return {fill(api['template'])}\n")
    g = {"torch": torch, "nn": nn, "F": F}
    exec(src, g)  # noqa: S102 - the catalog is the repository's own data
    torch.manual_seed(0)
    inputs = [torch.randn(s) for s in shapes]
    if api["domain"] == "positive":
        inputs = [x.abs() + 0.1 for x in inputs]
    if api["kind"] == "loss_class":
        inputs.append(torch.randint(0, shapes[0][1], (shapes[0][0],)))
    return g["M"]().eval(), inputs, src


class CatalogRuns(unittest.TestCase):
    def test_every_api_runs(self):
        apis = json.loads(CATALOG.read_text())["apis"]
        self.assertGreaterEqual(len(apis), 120)
        failures = []
        for api in apis:
            try:
                m, inputs, src = instantiate(api)
                with torch.no_grad():
                    out = m(*inputs)
                if api["output"] == "scalar":
                    assert out.dim() == 0, f"scalar output expected, got shape {tuple(out.shape)}"
                if out.is_floating_point():
                    assert torch.isfinite(out).all(), "non-finite output"
            except Exception as e:  # noqa: BLE001 - collect every failure with its API
                failures.append(f"{api['name']}: {type(e).__name__}: {e}")
        self.assertEqual(failures, [])


if __name__ == "__main__":
    unittest.main()
