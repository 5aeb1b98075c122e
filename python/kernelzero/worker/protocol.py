"""Framed JSON over pipes: each frame is a 4-byte big-endian length, then that many bytes of UTF-8 JSON.

The worker keeps private duplicates of the pipes it was started with and points fds 0/1 elsewhere, so
that nothing a task or candidate prints can corrupt the protocol stream."""
from __future__ import annotations

import json
import os
import select
import struct
import time

MAX_FRAME = 64 << 20


class ProtocolError(RuntimeError):
    pass


def _read_exact(fd: int, n: int) -> bytes:
    chunks = []
    while n:
        b = os.read(fd, min(n, 1 << 20))
        if not b:
            raise EOFError("peer closed the pipe")
        chunks.append(b)
        n -= len(b)
    return b"".join(chunks)


def _body_length(header: bytes) -> int:
    (n,) = struct.unpack(">I", header)
    if n > MAX_FRAME:
        raise ProtocolError(f"frame of {n} bytes exceeds the {MAX_FRAME}-byte limit")
    return n


def _decode(body: bytes) -> dict:
    try:
        msg = json.loads(body.decode("utf-8"))
    except ValueError as e:
        raise ProtocolError(f"frame is not JSON: {e}") from e
    if not isinstance(msg, dict):
        raise ProtocolError("frame is not a JSON object")
    return msg


def read_frame(fd: int) -> dict:
    return _decode(_read_exact(fd, _body_length(_read_exact(fd, 4))))


def write_frame(fd: int, msg: dict, allow_nan: bool = False) -> None:
    """Writes one frame. `allow_nan`: NaN and Infinity as JSON extensions (between our own processes,
    never to the C++ side, whose reader refuses them)."""
    data = json.dumps(msg, allow_nan=allow_nan, default=str).encode("utf-8")
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"reply of {len(data)} bytes exceeds the frame limit")
    buf = struct.pack(">I", len(data)) + data
    while buf:
        n = os.write(fd, buf)
        buf = buf[n:]


class FrameReader:
    """Reads frames from a pipe, each by a deadline (time.monotonic()): a partial frame waits in a
    buffer for the rest."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buf = bytearray()

    def read(self, deadline: float):
        """The next frame; None once the writer has closed the pipe; TimeoutError past the deadline;
        ProtocolError for a frame over the limit or not a JSON object."""
        while True:
            if len(self.buf) >= 4:
                n = _body_length(bytes(self.buf[:4]))
                if len(self.buf) >= 4 + n:
                    body = bytes(self.buf[4:4 + n])
                    del self.buf[:4 + n]
                    return _decode(body)
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no frame by the deadline")
            ready, _, _ = select.select([self.fd], [], [], min(left, 1.0))
            if ready:
                b = os.read(self.fd, 1 << 16)
                if not b:
                    return None
                self.buf += b


def take_over_stdio() -> tuple[int, int]:
    """Returns (in_fd, out_fd) for the protocol; fd 0 becomes /dev/null and fd 1 a copy of fd 2."""
    proto_in = os.dup(0)
    proto_out = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return proto_in, proto_out


def finite(x):
    """JSON has no NaN/Inf: map them to None (callers report them as such)."""
    if isinstance(x, float) and (x != x or x in (float("inf"), float("-inf"))):
        return None
    return x
