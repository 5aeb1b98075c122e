"""Outputs from the candidate child to the reference worker, without a copy to disk or to the host.

The reference worker listens on a Unix socket of its own per job; the candidate child connects,
presents the job's token, and sends each output it must have compared (trial i, ablation, timing
set m, re-check) as soon as it exists. A message describes the output's structure and, per tensor,
its shape, strides, dtype and device; a CUDA tensor travels as a CUDA IPC handle of the allocation
holding it (the reference maps it, compares on the GPU and unmaps it), a CPU tensor as the bytes of
its storage. The reference answers every description with {"bytes": bool, "all": bool}: whether to
send the bytes it announced (a mismatched or absurdly large output is refused on its metadata alone,
before anything is copied), and "all" when a CUDA allocation could not be mapped here, so that every
tensor travels as bytes instead (slower, never wrong). Then it answers {"go": bool}: false once the
job is decided (a failed comparison), and the child stops. It never sends anything else back: the
child learns nothing of the reference's outputs or of the comparison's figures.

Frames are protocol.py's (4-byte big-endian length + JSON). The child holds its output, unchanged and
alive, until the answer arrives, so the mapping stays valid while it is read."""
from __future__ import annotations

import base64
import ctypes
import json
import os
import socket
import struct

import torch

from . import protocol

MAX_MESSAGE = 8 << 20  # the JSON part of one output's description


class ChannelError(RuntimeError):
    """The other side broke the channel's protocol or went away."""


def _send_frame(sock, msg):
    data = json.dumps(msg, allow_nan=False).encode()
    sock.sendall(struct.pack(">I", len(data)) + data)


def _recv_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("peer closed the channel")
        got += k
    return buf


def _recv_frame(sock, limit=MAX_MESSAGE):
    (n,) = struct.unpack(">I", bytes(_recv_exact(sock, 4)))
    if n > limit:
        raise ChannelError(f"a frame of {n} bytes exceeds the {limit}-byte limit")
    msg = json.loads(bytes(_recv_exact(sock, n)).decode("utf-8"))
    if not isinstance(msg, dict):
        raise ChannelError("a frame is not a JSON object")
    return msg


# ---------------------------------------------------------------------------------------------
# CUDA IPC through the driver API: the allocation holding a tensor is exported by its handle and
# mapped by the reference. (torch's own tensor sharing keeps a sent block alive until the receiver
# decrements a counter in a shared-memory file the sender names: the trusted side would open a file
# named by the untrusted one.)

class _IpcHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * 64)]


_driver = None


def _cuda():
    global _driver
    if _driver is None:
        from kernelzero import cuda as kzc
        lib = kzc._cuda_lib()
        lib.cuMemGetAddressRange_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_size_t),
                                                ctypes.c_uint64]
        lib.cuIpcGetMemHandle.argtypes = [ctypes.POINTER(_IpcHandle), ctypes.c_uint64]
        lib.cuIpcOpenMemHandle_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), _IpcHandle, ctypes.c_uint]
        lib.cuIpcCloseMemHandle.argtypes = [ctypes.c_uint64]
        _driver = (lib, kzc._cu_check)
    return _driver


def _allocation_of(ptr):
    lib, check = _cuda()
    base, size = ctypes.c_uint64(), ctypes.c_size_t()
    check(lib.cuMemGetAddressRange_v2(ctypes.byref(base), ctypes.byref(size), ctypes.c_uint64(ptr)),
          "cuMemGetAddressRange")
    return base.value, size.value


def export_cuda(t):
    """{"handle", "offset"} of the allocation holding tensor `t`'s storage (offset of the storage's
    first byte in it). Raises when the memory cannot be exported (stream-ordered pools, say)."""
    lib, check = _cuda()
    ptr = t.untyped_storage().data_ptr()
    base, size = _allocation_of(ptr)
    h = _IpcHandle()
    check(lib.cuIpcGetMemHandle(ctypes.byref(h), ctypes.c_uint64(base)), "cuIpcGetMemHandle")
    # Every byte of the handle (a c_char array field reads only up to its first NUL).
    return {"handle": base64.b64encode(ctypes.string_at(ctypes.addressof(h), 64)).decode(), "offset": ptr - base,
            "allocation_bytes": size}


class _Mapped:
    """A handle opened in this process; close() unmaps it (after every tensor on it is gone)."""

    def __init__(self, handle_b64, declared_bytes):
        raw = base64.b64decode(handle_b64.encode(), validate=True)
        if len(raw) != 64:
            raise ChannelError("a CUDA IPC handle is not 64 bytes")
        lib, check = _cuda()
        h = _IpcHandle()
        ctypes.memmove(ctypes.addressof(h), raw, 64)
        ptr = ctypes.c_uint64()
        check(lib.cuIpcOpenMemHandle_v2(ctypes.byref(ptr), h, 1), "cuIpcOpenMemHandle")  # lazy peer access
        self.ptr = ptr.value
        try:
            self.size = _allocation_of(self.ptr)[1]  # the mapping's own extent, whatever the child says
        except Exception:  # noqa: BLE001 - a driver that does not report it: the child's figure
            self.size = int(declared_bytes)

    def close(self):
        if self.ptr:
            lib, check = _cuda()
            ptr, self.ptr = self.ptr, 0
            check(lib.cuIpcCloseMemHandle(ctypes.c_uint64(ptr)), "cuIpcCloseMemHandle")


class _DeviceBytes:
    """Zero-copy view of device memory for torch.as_tensor (the CUDA array interface)."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False),
                                         "version": 2, "strides": None}


# ---------------------------------------------------------------------------------------------
# Descriptions of outputs.

def _dtype(name):
    dt = getattr(torch, name.replace("torch.", ""), None) if isinstance(name, str) else None
    if not isinstance(dt, torch.dtype):
        raise ChannelError(f"unknown dtype {name!r}")
    return dt


def describe(out):
    """(description, tensors): the output's structure with every leaf described (CUDA tensors
    exported), and its tensors in the order their bytes would travel, each with whether they must
    (CPU tensors, CUDA memory that cannot be exported) or only when the reference asks for all."""
    tensors = []
    return _describe_leaf(out, tensors), tensors


# The recursions below are module functions, not closures: a closure that calls itself is a
# reference cycle, and whatever it holds (here the output's tensors, multi-GiB device memory) would
# stay allocated until Python's cyclic collector happened to run.
def _describe_leaf(o, tensors):
    if isinstance(o, (list, tuple)):
        return {"kind": type(o).__name__, "items": [_describe_leaf(x, tensors) for x in o]}
    if isinstance(o, torch.Tensor):
        kind = "tensor" if type(o) in (torch.Tensor, torch.nn.Parameter) else f"tensor subclass {type(o).__name__}"
        d = {"kind": kind, "shape": list(o.shape), "stride": list(o.stride()), "dtype": str(o.dtype),
             "device": o.device.type}
        if kind != "tensor" or o.device.type == "meta":
            return d
        d["storage_bytes"] = o.untyped_storage().nbytes()
        d["offset"] = o.storage_offset()
        must = True
        if o.device.type == "cuda":
            try:
                d["ipc"] = export_cuda(o)
                must = False
            except Exception:  # noqa: BLE001 - memory that cannot be exported travels as bytes
                pass
        tensors.append((o, must))
        return d
    if isinstance(o, (bool, int, float)) or o is None:
        return {"kind": type(o).__name__, "value": o if not isinstance(o, float) else protocol.finite(o)}
    return {"kind": type(o).__name__}


def _storage_host_bytes(t):
    """The bytes of `t`'s whole storage, on the host."""
    st = t.untyped_storage()
    raw = torch.empty(0, dtype=torch.uint8, device=t.device).set_(st, 0, (st.nbytes(),), (1,))
    return raw.cpu().numpy().tobytes() if st.nbytes() else b""


def meta_of_description(d):
    """The harness's meta_of() of the described output."""
    if d.get("kind") in ("list", "tuple"):
        return {"kind": d["kind"], "items": [meta_of_description(x) for x in d.get("items", [])]}
    if d.get("kind") == "tensor":
        return {"kind": "tensor", "shape": d.get("shape"), "dtype": d.get("dtype"), "device": d.get("device")}
    return {"kind": d.get("kind")}


class Received:
    """A described output made into tensors on the reference side; close() releases every mapping."""

    def __init__(self):
        self.maps = {}
        self.payloads = []

    def map_all(self, d):
        """Opens every CUDA allocation the description names; False when one cannot be mapped here."""
        try:
            for leaf in tensor_leaves(d):
                ipc = leaf.get("ipc")
                if ipc and ipc["handle"] not in self.maps:
                    self.maps[ipc["handle"]] = _Mapped(ipc["handle"], ipc.get("allocation_bytes", 0))
            return True
        except Exception:  # noqa: BLE001 - the bytes travel instead
            self.close()
            return False

    def receive(self, d, sock, as_bytes=False):
        """Reads every byte the child announced for this description (all of it before anything is
        built, so that a tensor that cannot be made leaves nothing unread on the channel)."""
        self.payloads = []
        for leaf in tensor_leaves(d):
            if as_bytes or not leaf.get("ipc"):
                n = int(leaf["storage_bytes"])
                self.payloads.append(_recv_exact(sock, n) if n else bytearray())

    def build(self, d, device, as_bytes=False):
        """The output, its tensors mapped (map_all first) or made from the bytes receive() read (every
        one when `as_bytes`), in describe()'s order."""
        return self._build_leaf(d, device, as_bytes, iter(self.payloads))

    def _build_leaf(self, d, device, as_bytes, payloads):
        if d["kind"] in ("list", "tuple"):
            items = [self._build_leaf(x, device, as_bytes, payloads) for x in d["items"]]
            return items if d["kind"] == "list" else tuple(items)
        if d["kind"] != "tensor":
            return d.get("value")
        dtype = _dtype(d["dtype"])
        shape, stride, offset = [int(x) for x in d["shape"]], [int(x) for x in d["stride"]], int(d.get("offset", 0))
        nbytes = int(d["storage_bytes"])
        if d.get("ipc") and not as_bytes:
            m = self.maps[d["ipc"]["handle"]]
            start = int(d["ipc"]["offset"])
            if start < 0 or nbytes < 0 or start + nbytes > m.size:
                raise ChannelError("a tensor's storage lies outside the allocation it names")
            raw = torch.as_tensor(_DeviceBytes(m.ptr + start, nbytes)) if nbytes else \
                torch.empty(0, dtype=torch.uint8, device=device)
            return raw.view(dtype).as_strided(shape, stride, offset)
        buf = next(payloads)
        raw = torch.frombuffer(buf, dtype=torch.uint8) if nbytes else torch.empty(0, dtype=torch.uint8)
        return raw.view(dtype).as_strided(shape, stride, offset).to(device)

    def close(self):
        maps, self.maps = self.maps, {}
        for m in maps.values():
            m.close()


def tensor_leaves(d):
    """The descriptions of a described output's tensors that have a storage, in describe()'s order."""
    if d.get("kind") in ("list", "tuple"):
        for x in d.get("items", []):
            yield from tensor_leaves(x)
    elif d.get("kind") == "tensor" and "storage_bytes" in d:
        yield d


# ---------------------------------------------------------------------------------------------
# The two ends.

class Sender:
    """The candidate child's end: send(slot, index, output) -> whether to go on."""

    def __init__(self, path, token):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self.sock.connect(path)
            _send_frame(self.sock, {"token": token})
        except OSError as e:
            raise ChannelError(f"cannot reach the reference worker at {path}: {e}") from e

    def send(self, slot, index, out):
        desc, tensors = describe(out)
        try:
            _send_frame(self.sock, {"slot": slot, "index": index, "out": desc})
            ask = _recv_frame(self.sock)
            if ask.get("bytes"):
                for t, must in tensors:
                    if must or ask.get("all"):
                        self.sock.sendall(_storage_host_bytes(t))
            reply = _recv_frame(self.sock)
        except (OSError, EOFError, ValueError) as e:
            raise ChannelError(f"the reference worker went away: {e}") from e
        return bool(reply.get("go"))

    def close(self):
        try:
            _send_frame(self.sock, {"end": True})
        except OSError:
            pass
        self.sock.close()


def listen(path):
    """A listening socket at `path` that only this user can reach."""
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    os.chmod(path, 0o600)
    s.listen(1)
    return s


def recv_message(sock):
    return _recv_frame(sock)


def reply(sock, go):
    _send_frame(sock, {"go": bool(go)})


def accept_bytes(sock, accepted, everything=False):
    """Tells the child whether to send the bytes its description announced, and whether to send every
    tensor's bytes (a CUDA allocation could not be mapped here)."""
    _send_frame(sock, {"bytes": bool(accepted), "all": bool(accepted and everything)})
