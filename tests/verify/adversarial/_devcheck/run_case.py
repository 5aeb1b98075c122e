"""Throwaway runner: python run_case.py TASK CANDIDATE [calls] [--atol X]"""
import sys, importlib.util, traceback, os
import torch

def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

task_path, cand_path = sys.argv[1], sys.argv[2]
calls = int(sys.argv[3]) if len(sys.argv) > 3 else 3
dev = os.environ.get("DEV", "cpu")
task = load(task_path, "task_mod")
try:
    cand = load(cand_path, "cand_mod")
except BaseException as e:
    print("IMPORT_ERROR", type(e).__name__, str(e)[:300]); sys.exit(0)
init = task.get_init_inputs()
torch.manual_seed(0); ref_model = task.Model(*init).to(dev)
torch.manual_seed(0)
try:
    new_model = cand.ModelNew(*init).to(dev)
except BaseException as e:
    print("CTOR_ERROR", type(e).__name__, str(e)[:300]); sys.exit(0)
sd = ref_model.state_dict(); nsd = new_model.state_dict()
new_model.load_state_dict({k: v for k, v in sd.items() if k in nsd and nsd[k].shape == v.shape}, strict=False)
for t in range(calls):
    torch.manual_seed(100 + t)
    inputs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in task.get_inputs()]
    saved = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    try:
        ref = ref_model(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    except BaseException as e:
        print(f"call {t}: REF_ERROR {type(e).__name__}: {str(e)[:200]}"); continue
    if os.environ.get("NAIVE_FREE"):
        ref_cpu = ref.cpu(); del ref  # naive harness: reference output freed before the candidate runs
        if dev == "cuda": torch.cuda.synchronize()
    try:
        out = new_model(*inputs)
        if os.environ.get("NAIVE_FREE"):
            ref = ref_cpu.to(dev)
    except BaseException as e:
        print(f"call {t}: FORWARD_ERROR {type(e).__name__}: {str(e)[:300]}"); continue
    unchanged = all((not isinstance(a, torch.Tensor)) or torch.equal(a, b) for a, b in zip(inputs, saved))
    if not isinstance(out, torch.Tensor) or type(out) is not torch.Tensor:
        print(f"call {t}: NON_TENSOR/SUBCLASS out type={type(out).__name__} inputs_unchanged={unchanged}")
        if not isinstance(out, torch.Tensor): continue
    meta_ok = out.shape == ref.shape and out.dtype == ref.dtype and out.device == ref.device
    if not meta_ok:
        print(f"call {t}: META_MISMATCH shape={tuple(out.shape)} vs {tuple(ref.shape)} dtype={out.dtype} dev={out.device} inputs_unchanged={unchanged}")
        continue
    o = torch.Tensor.as_subclass(out, torch.Tensor)
    close = torch.allclose(o, ref, atol=1e-2, rtol=1e-2)
    err = (o - ref).abs().max().item()
    nan = torch.isnan(o).any().item()
    print(f"call {t}: allclose(1e-2)={close} maxerr={err:.3g} nan={nan} inputs_unchanged={unchanged}")
