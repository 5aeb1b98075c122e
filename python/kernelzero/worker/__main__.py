"""Entry point: python -m kernelzero.worker --role compile|reference|candidate --device DEV --work-root DIR

Speaks framed JSON on the pipes it was started with (see protocol.py): a `ready` event first, then
one reply per request, each carrying the request's id. Replies are {"id", "ok": true, ...} or
{"id", "ok": false, "error", "task_error"?}."""
from __future__ import annotations

import argparse
import os
import sys
import traceback


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--role", required=True, choices=["compile", "reference", "candidate"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--work-root", required=True)
    args = ap.parse_args()

    from . import protocol
    proto_in, proto_out = protocol.take_over_stdio()
    # Before torch allocates anything (the candidate children inherit it): blocks above 512 MiB are
    # never split for smaller requests. Split, a freed multi-GiB input or output would serve the next
    # poison block or comparison chunk, and every later multi-GiB request would take a new segment.
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:512")
    _die_with_parent()
    from .sandbox import first_to_go_out_of_memory
    first_to_go_out_of_memory()
    if args.device.startswith("cpu") and args.role != "compile":
        os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported anywhere
    os.makedirs(args.work_root, exist_ok=True)

    hello = {"event": "ready", "role": args.role, "pid": os.getpid(), "python": sys.version.split()[0]}
    if args.role == "compile":
        from . import compile as compile_side
        handlers = {"compile": compile_side.compile_candidate}
    else:
        import torch
        try:
            import triton  # noqa: F401 - imported before forking so children share it
        except ImportError:
            pass
        from . import harness
        hello["torch"] = torch.__version__.split("+")[0]
        if args.role == "reference":
            from .reference import Reference
            ref = Reference(args.work_root)
            from .validate import validate_task, warm_up
            handlers = {"open_job": ref.open_job, "close_job": ref.close_job, "baseline": ref.baseline,
                        "footprint": ref.footprint, "validate": validate_task, "warm_up": warm_up,
                        "device_info": lambda req: {"ok": True, "device_name": harness.device_name(req["device"]),
                                                    "torch": torch.__version__.split("+")[0],
                                                    "timing_method": harness.TIMING_METHOD,
                                                    "arch": _arch(torch, req["device"]),
                                                    "memory": _memory(torch, req["device"])}}
        else:
            from .fork_server import ForkServer
            server = ForkServer(args.work_root, args.device, int(os.environ.get("KZ_SPARE_CHILDREN", "1")))
            handlers = {"run": server.run, "warm": server.warm}
    handlers["ping"] = lambda req: {"ok": True}
    protocol.write_frame(proto_out, hello)

    while True:
        try:
            req = protocol.read_frame(proto_in)
        except EOFError:
            return 0
        op = req.get("op")
        rid = req.get("id")
        try:
            fn = handlers.get(op)
            if fn is None:
                reply = {"ok": False, "error": f"unknown op {op!r} for role {args.role}"}
            else:
                reply = fn(req)
        except Exception as e:  # noqa: BLE001 - every failure becomes a reply, the loop goes on
            reply = {"ok": False, "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc()[-3000:]}
            if type(e).__name__ == "TaskError":
                reply["task_error"] = True
        reply["id"] = rid
        protocol.write_frame(proto_out, reply)


def _die_with_parent():
    """A worker busy in a long request would not notice its pipe closing when the controller is killed:
    a watchdog ends it once it is re-parented. (PR_SET_PDEATHSIG would fire when the controller
    *thread* that spawned the worker exits, not the controller.)"""
    import threading
    import time
    parent = os.getppid()

    def watch():
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)
    threading.Thread(target=watch, name="kz-parent-watchdog", daemon=True).start()


def _memory(torch, device):
    """The device's memory as the driver sees it now: {"total", "free"} in bytes (None on the CPU)."""
    if not str(device).startswith("cuda"):
        return None
    free, total = torch.cuda.mem_get_info(torch.device(device))
    return {"total": total, "free": free}


def _arch(torch, device):
    if not str(device).startswith("cuda"):
        return None
    major, minor = torch.cuda.get_device_capability(torch.device(device))
    return {"nvrtc": f"sm_{major}{minor}", "torch_arch_list": f"{major}.{minor}"}


if __name__ == "__main__":
    sys.exit(main())
