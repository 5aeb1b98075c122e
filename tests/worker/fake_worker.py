"""A misbehaving stand-in for kernelzero.worker, to test the controller's supervision.

Speaks the real framing; each request's "op" says how to misbehave."""
import json
import os
import struct
import sys
import time

args = sys.argv[1:]
mode = os.environ.get("FAKE_START", "ok")
if mode == "never_ready":
    time.sleep(3600)
if mode == "exit":
    sys.exit(7)


def send(msg):
    data = json.dumps(msg).encode()
    sys.stdout.buffer.write(struct.pack(">I", len(data)) + data)
    sys.stdout.buffer.flush()


def recv():
    h = sys.stdin.buffer.read(4)
    if len(h) < 4:
        sys.exit(0)
    (n,) = struct.unpack(">I", h)
    return json.loads(sys.stdin.buffer.read(n))


send({"event": "ready", "pid": os.getpid(), "args": args})
while True:
    req = recv()
    op = req.get("op")
    if op == "echo":
        send({"id": req["id"], "ok": True, "echo": req.get("value"), "pid": os.getpid()})
    elif op == "fail":
        send({"id": req["id"], "ok": False, "error": "asked to fail"})
    elif op == "hang":
        time.sleep(3600)
    elif op == "crash":
        print("about to crash", file=sys.stderr, flush=True)
        os._exit(9)
    elif op == "garbage":
        sys.stdout.buffer.write(b"\x00\x00\x00\x05hello")
        sys.stdout.buffer.flush()
    elif op == "huge":
        sys.stdout.buffer.write(struct.pack(">I", 0xFFFFFFF0))
        sys.stdout.buffer.flush()
    elif op == "wrong_id":
        send({"id": -1, "ok": True})
    elif op == "print_to_stdout_then_echo":
        sys.stdout.write("stray text\n")
        sys.stdout.flush()
