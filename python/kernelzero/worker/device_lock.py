"""The device lock: a reader/writer lock over one device, shared by every process of a verifier on
it (a file lock: the processes are unrelated). Timed iterations hold it exclusively; every other
piece of GPU work (a forward, a comparison, making inputs, freeing memory) holds it shared, so that
nothing of the verifier's runs on the device while something is timed."""
from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time

import torch


class DeviceBusy(RuntimeError):
    """The device lock could not be had exclusively in time (another process's forward held it): the
    job is the verifier's to retry, not the candidate's to answer for."""


# How long a timer waits for the device before giving the readers back and reporting DeviceBusy: a
# hung forward elsewhere holds the lock shared until it is killed, and a waiting timer blocks every
# new reader meanwhile.
EXCLUSIVE_WAIT_S = 20.0


# Seconds this process has waited for the device lock, by kind, and held it exclusively (the device
# time its timed iterations took from every other job); a job's child reports them.
waits = {"shared_s": 0.0, "exclusive_s": 0.0}
held = {"exclusive_s": 0.0}


@contextlib.contextmanager
def hold(path, exclusive=True, wait_s=EXCLUSIVE_WAIT_S):
    """A device-wide reader/writer lock shared by every process of a verifier on one device: timed
    iterations take it exclusively (nothing else of ours runs on the device while they are timed),
    every other piece of GPU work (a forward, a comparison, making inputs) takes it shared. A writer
    waiting for it holds a turnstile that new readers pass through, so a stream of readers cannot
    starve timing; a writer that waits longer than `wait_s` lets the readers go and raises DeviceBusy.
    Never held while waiting on another process: the processes of a job wait on each other.

    Re-entrant in a thread: inside a hold of this thread's, a shared hold (or any hold inside an
    exclusive one) is the outer hold. Taking it again would queue behind a waiting writer who waits
    for the outer hold: a deadlock until the writer gives up. Asking for exclusive inside shared is an
    error (an upgrade could deadlock the same way)."""
    if not path:
        yield
        return
    outer = _holds()
    if outer:
        if exclusive and not outer[-1][2]:
            raise RuntimeError("device_lock.hold: exclusive asked for inside a shared hold")
        yield
        return
    turnstile = os.open(path + ".turnstile", os.O_RDWR | os.O_CREAT, 0o666)
    lock = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    t0 = time.perf_counter()
    try:
        if exclusive:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            deadline = time.monotonic() + wait_s
            pause = 0.0001
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise DeviceBusy(f"the device stayed busy for {wait_s:.0f} s (another job's forward)")
                    time.sleep(pause)
                    # Every reader queued behind the turnstile waits as long as this poll: short.
                    pause = min(2 * pause, 0.001)
        else:
            _take_shared(lock, turnstile)
        t_in = time.perf_counter()
        waits["exclusive_s" if exclusive else "shared_s"] += t_in - t0
        holds = _holds()
        holds.append((lock, turnstile, exclusive))
        try:
            yield
        finally:
            holds.pop()
            if exclusive:
                held["exclusive_s"] += time.perf_counter() - t_in
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        fcntl.flock(turnstile, fcntl.LOCK_UN)
        os.close(lock)
        os.close(turnstile)


def _take_shared(lock, turnstile):
    fcntl.flock(turnstile, fcntl.LOCK_EX)
    fcntl.flock(lock, fcntl.LOCK_SH)
    fcntl.flock(turnstile, fcntl.LOCK_UN)


_thread_holds = threading.local()


def _holds():
    """This thread's open holds of the device lock, innermost last: (lock fd, turnstile fd, exclusive)."""
    if not hasattr(_thread_holds, "stack"):
        _thread_holds.stack = []
    return _thread_holds.stack


@contextlib.contextmanager
def released(device):
    """Inside shared holds of the device lock, lets them go for host-only work that may take long (a
    Triton kernel's JIT compile, seconds of CPU in the middle of a forward) and takes them back after:
    a timer elsewhere need not wait for it. The device is synchronised first, so that none of this
    thread's work is still running once a timer may start. Under an exclusive hold (timed
    iterations are not interrupted) or with none, it does nothing."""
    holds = list(_holds())
    if not holds or any(exclusive for _, _, exclusive in holds):
        yield
        return
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)
    for lock, _, _ in holds:
        fcntl.flock(lock, fcntl.LOCK_UN)
    try:
        yield
    finally:
        t0 = time.perf_counter()
        for lock, turnstile, _ in holds:
            _take_shared(lock, turnstile)
        waits["shared_s"] += time.perf_counter() - t0
