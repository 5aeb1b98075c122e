"""Compile side: static checks and ahead-of-time builds on CPU, apart from GPU execution.

NVRTC sources are compiled to cubins in the shared build cache (kernelzero.cuda finds them by the
same content hash); load_inline extensions are built in a fresh interpreter (each build would
otherwise clash with the names of earlier ones) into a directory keyed by the hash of the build's
arguments, which the candidate child reuses through TORCH_EXTENSIONS_DIR."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time

from . import static_checks


def inline_dir(cache_root, builds, arch_list):
    """One extensions directory per candidate (all its load_inline builds), keyed by their arguments."""
    h = hashlib.sha256(json.dumps([builds, arch_list], sort_keys=True).encode()).hexdigest()[:24]
    return os.path.join(cache_root, "inline", h)


def build_inline(kwargs, ext_dir, arch_list, timeout_s):
    os.makedirs(ext_dir, exist_ok=True)
    done = os.path.join(ext_dir, f"{kwargs['name']}.built")
    if os.path.exists(done):
        return {"ok": True, "cached": True, "dir": ext_dir, "log": ""}
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=ext_dir, TORCH_CUDA_ARCH_LIST=arch_list)
    code = ("import json,sys\nfrom torch.utils.cpp_extension import load_inline\n"
            "kw=json.loads(sys.stdin.read())\nkw['verbose']=False\nload_inline(**kw)\n")
    try:
        p = subprocess.run([sys.executable, "-c", code], input=json.dumps(kwargs), env=env, capture_output=True,
                           text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"ok": False, "dir": ext_dir, "log": f"load_inline build exceeded {timeout_s} s"}
    if p.returncode != 0:
        return {"ok": False, "dir": ext_dir, "log": (p.stderr or p.stdout)[-6000:]}
    with open(done, "w") as f:
        f.write("ok\n")
    return {"ok": True, "cached": False, "dir": ext_dir, "log": ""}


def compile_candidate(req):
    """Returns static check results plus, for CUDA candidates, the outcome of the ahead-of-time build."""
    t0 = time.perf_counter()
    rep = static_checks.check_source(req["source"], req["backend"])
    res = rep.to_json()
    res.update({"ok": True, "compile_error": None, "compile_log": "", "cache_hits": 0, "builds": 0,
                "extensions_dir": None})
    if req["backend"] != "cuda" or any(v == "fail" for v in rep.checks.values()) or not req.get("arch"):
        res["compile_s"] = time.perf_counter() - t0
        return res
    cache_root = req["cache_dir"]
    os.environ["KZ_BUILD_CACHE"] = cache_root
    from kernelzero import cuda as kzc
    for item in rep.nvrtc_sources:
        try:
            _, hit = kzc.compile_to_cubin(item["source"], req["arch"], item["options"])
            res["cache_hits" if hit else "builds"] += 1
        except kzc.CompileError as e:
            res["compile_error"] = str(e)
            break
    if res["compile_error"] is None:
        arch_list = req.get("torch_arch_list") or ""
        if rep.inline_builds:
            res["extensions_dir"] = inline_dir(cache_root, rep.inline_builds, arch_list)
        for kw in rep.inline_builds:
            out = build_inline(kw, res["extensions_dir"], arch_list, float(req["timeout_s"]))
            if not out["ok"]:
                res["compile_error"] = "load_inline build failed:\n" + out["log"]
                break
            res["cache_hits" if out.get("cached") else "builds"] += 1
    res["compile_s"] = time.perf_counter() - t0
    return res
