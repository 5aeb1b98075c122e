"""Unit tests of the worker's Python pieces (run by ctest: python -m unittest discover tests/python)."""
import contextlib
import fcntl
import gc
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import weakref
from unittest import mock

import torch
import triton
import triton.language as tl

from kernelzero import cuda as kzc
from kernelzero.worker import device_lock, harness, protocol, static_checks, transfer


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


class ChunkedCompare(unittest.TestCase):
    """Comparisons run in chunks (bounded scratch on multi-GiB outputs) and must say what a whole-tensor
    comparison says, on every layout."""

    def check_same(self, r, o):
        whole = harness.compare(r, o)
        with mock.patch.object(harness, "COMPARE_CHUNK", 7):
            chunked = harness.compare(r, o)
        self.assertEqual(whole["ok"], chunked["ok"], (whole, chunked))
        self.assertEqual(whole.get("reason"), chunked.get("reason"))
        if whole["max_abs_err"] is not None:
            self.assertAlmostEqual(whole["max_abs_err"], chunked["max_abs_err"])
        return chunked

    def test_layouts(self):
        r = torch.randn(9, 13, 5)
        self.assertTrue(self.check_same(r, r + 1e-4)["ok"])
        self.assertTrue(self.check_same(r.transpose(0, 2), r.transpose(0, 2).contiguous())["ok"])
        self.assertTrue(self.check_same(r[:, ::2], r[:, ::2].clone())["ok"])
        e = torch.randn(1, 13).expand(40, 13)
        self.assertTrue(self.check_same(e, e.contiguous())["ok"])
        bad = r.clone()
        bad[8, 12, 4] += 1.0
        res = self.check_same(r, bad)
        self.assertIn("1 of 585 elements", res["reason"])
        nan = r.clone()
        nan[4, 0, 0] = float("nan")
        self.assertIn("NaN/Inf", self.check_same(r, nan)["reason"])
        soft = torch.softmax(torch.rand(8, 4096), dim=-1)
        self.assertIn("relative L2", self.check_same(soft, torch.zeros_like(soft))["reason"])
        ints = torch.arange(100).reshape(10, 10)
        other = ints.clone()
        other[3, 3] = -1
        self.assertIn("1 of 100 elements differ", self.check_same(ints, other)["reason"])

    def test_inputs_compared_bit_for_bit(self):
        x = torch.randn(64)
        self.assertIsNone(harness.first_changed([x.clone(), 3], [x, 3]))
        y = x.clone()
        y[5] = -y[5]
        self.assertEqual(harness.first_changed([x], [y]), 0)
        n = torch.full((4,), float("nan"))
        self.assertIsNone(harness.first_changed([n.clone()], [n]))  # NaN equals itself bit for bit
        self.assertEqual(harness.first_changed([torch.zeros(3, dtype=torch.bfloat16)],
                                               [torch.ones(3, dtype=torch.bfloat16)]), 0)


class Timing(unittest.TestCase):
    def test_median_interval(self):
        self.assertIsNone(harness.median_ci_halfwidth([1.0] * 5))
        self.assertEqual(harness.median_ci_halfwidth([1.0] * 10), 0.0)
        vals = list(range(1, 11))  # the interval runs from the 2nd to the 9th value
        self.assertEqual(harness.median_ci_halfwidth(vals), (9 - 2) / 2)

    def test_adaptive_length(self):
        calls = []

        def fn(x):
            calls.append(1)
            return x + 1

        sets = [[torch.zeros(4)], [torch.ones(4)], [torch.full((4,), 2.0)]]
        timing, last = harness.time_callable(fn, sets, "cpu", 100, warmup=1, min_iters=4, budget_ms=1e-9)
        self.assertEqual(timing["host_ms"]["n"], 4)  # the budget is spent at once: the floor decides
        self.assertEqual(len(calls), 1 + 4 + 6)     # warm-up, timed, two untimed calls per set
        self.assertEqual([float(o[0]) for o in last], [1.0, 2.0, 3.0])
        timing, _ = harness.time_callable(fn, sets, "cpu", 6, warmup=0)
        self.assertEqual(timing["host_ms"]["n"], 6)

    def test_kept_outputs_go_to_the_callback_and_stop_ends_the_loop(self):
        kept = []
        sets = [[torch.zeros(2)], [torch.ones(2)], [torch.full((2,), 2.0)]]
        _, last = harness.time_callable(lambda x: x * 2, sets, "cpu", 3, warmup=0,
                                        keep=lambda m, out: kept.append((m, float(out[0]))))
        self.assertEqual(sorted(kept), [(0, 0.0), (1, 2.0), (2, 4.0)])
        self.assertEqual(last, [None, None, None])

        class Stop(Exception):
            pass

        def stop(m, out):
            raise Stop()
        with self.assertRaises(Stop):
            harness.time_callable(lambda x: x, sets, "cpu", 3, warmup=0, keep=stop)

    def test_a_forward_that_caches_at_the_loops_pace_is_compared_on_another_sets_answer(self):
        # adversarial/timing_loop_detect: called again within 5 ms of its last return, it returns
        # that call's output. The kept outputs are sent to the reference (slow: the sleep), so the
        # call after a send is real, and the kept one straight after it would be stale.
        state = {"out": None, "returned": -1.0}

        def fn(x):
            if state["out"] is not None and time.perf_counter() - state["returned"] < 0.005:
                state["returned"] = time.perf_counter()
                return state["out"]
            state["out"] = x * 2
            state["returned"] = time.perf_counter()
            return state["out"]

        def send(m, out):
            kept.append((m, float(out[0])))
            time.sleep(0.02)
        for iters in range(3, 7):  # whatever the loop's length, some set gets another's answer
            kept = []
            sets = [[torch.zeros(2)], [torch.ones(2)], [torch.full((2,), 2.0)]]
            harness.time_callable(fn, sets, "cpu", iters, warmup=1, keep=send)
            self.assertEqual(sorted(m for m, _ in kept), [0, 1, 2])
            wrong = [(m, v) for m, v in kept if v != 2.0 * m]
            self.assertGreaterEqual(len(wrong), 2, kept)

    def test_a_probe_runs_only_on_cuda(self):
        probed = []
        timing, _ = harness.time_callable(lambda x: x, [[torch.zeros(2)]], "cpu", 3, warmup=0,
                                          probe=lambda inputs, cycles: probed.append(cycles) or (1.0, 0.0))
        self.assertEqual(probed, [])
        self.assertNotIn("probe", timing)

    def test_input_sets_kept_or_made_again(self):
        made = []

        def make(seed):
            made.append(seed)
            return [torch.full((1000,), float(seed))]
        kept = harness.InputSets(make, [1, 2, 3], keep_bytes=1 << 20)
        self.assertEqual(made, [1, 2, 3])
        self.assertEqual(float(kept.get(2)[0][0]), 3.0)
        self.assertEqual(made, [1, 2, 3])
        made.clear()
        lazy = harness.InputSets(make, [1, 2, 3], keep_bytes=100)  # 4000 bytes a set: made when needed
        self.assertEqual(made, [1])
        self.assertEqual(float(lazy.get(0)[0][0]), 1.0)
        self.assertEqual(float(lazy.get(1)[0][0]), 2.0)
        self.assertEqual(float(lazy.get(0)[0][0]), 1.0)
        self.assertEqual(made, [1, 2, 1])

    def test_inputs_on_the_meta_device_cost_nothing(self):
        class Task:
            @staticmethod
            def get_inputs():
                return [torch.randn(1 << 20, 1 << 20)]  # 4 TiB: only shapes on the meta device
        (x,) = harness.make_inputs(Task, 1, "meta")
        self.assertEqual(x.device.type, "meta")


@triton.jit
def double(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, 2 * tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


@unittest.skipUnless(torch.cuda.is_available(), "needs a CUDA device")
class TimingOnGpu(unittest.TestCase):
    def test_the_probe_has_the_device_to_itself_and_a_spin_that_outlasts_its_enqueue(self):
        path = os.path.join(tempfile.mkdtemp(), "device.lock")
        calls = []

        def probe(inputs, cycles):
            lock = os.open(path, os.O_RDWR)
            try:  # a reader would have to wait: the timed iterations' exclusive hold continues
                with self.assertRaises(BlockingIOError):
                    fcntl.flock(lock, fcntl.LOCK_SH | fcntl.LOCK_NB)
            finally:
                os.close(lock)
            calls.append(cycles)
            # The first call claims an enqueue longer than any spin it could have been given.
            return float(inputs[0].sum()), (1e6 if len(calls) == 1 else 0.0)
        x = torch.ones(1024, device="cuda")
        timing, _ = harness.time_callable(lambda t: t * 2, [[x]], "cuda", 5, warmup=1, lock_path=path,
                                          probe=probe)
        self.assertEqual(timing["event_ms"]["n"], 5)
        self.assertEqual(timing["probe"], 1024.0)
        self.assertEqual(len(calls), 2)
        longest = int(harness.MAX_SPIN_MS * harness._cycles_per_ms(torch.device("cuda")))
        self.assertLess(calls[0], calls[1])
        self.assertEqual(calls[1], longest)

    def test_a_triton_compile_and_first_load_inside_a_forward_let_the_lock_go(self):
        from kernelzero.worker import accounting
        path = os.path.join(tempfile.mkdtemp(), "device.lock")
        seen = []

        @contextlib.contextmanager
        def compile_context():
            with device_lock.released("cuda"):
                fd = os.open(path, os.O_RDWR)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    seen.append("free")
                    fcntl.flock(fd, fcntl.LOCK_UN)
                except BlockingIOError:
                    seen.append("held")
                finally:
                    os.close(fd)
                yield
        recorder = accounting.LaunchRecorder()
        recorder.compile_context = compile_context
        x = torch.arange(1000, device="cuda", dtype=torch.float32)
        y = torch.empty_like(x)
        with device_lock.hold(path, exclusive=False):
            double[(1,)](x, y, 1000, BLOCK=1024)
            double[(1,)](x, y, 1000, BLOCK=1024)  # compiled and loaded already: no release
            fd = os.open(path, os.O_RDWR)
            try:  # held again after the compile
                with self.assertRaises(BlockingIOError):
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            finally:
                os.close(fd)
        self.assertEqual(seen, ["free", "free"])  # the compile, then the first load (launcher build)
        self.assertTrue(torch.equal(y, 2 * x))


class DeviceLock(unittest.TestCase):
    def test_readers_share_writers_exclude_and_queue_ahead(self):
        path = os.path.join(tempfile.mkdtemp(), "device.lock")
        events = []
        with device_lock.hold(path, exclusive=False):
            with device_lock.hold(path, exclusive=False):
                events.append("two readers")
            writer_in = threading.Event()

            def writer():
                with device_lock.hold(path, exclusive=True):
                    events.append("writer")
                    writer_in.set()
                    time.sleep(0.2)

            def late_reader():
                with device_lock.hold(path, exclusive=False):
                    events.append("late reader")
            w = threading.Thread(target=writer)
            w.start()
            time.sleep(0.2)  # the writer now waits for the first reader, holding the turnstile
            r = threading.Thread(target=late_reader)
            r.start()
            time.sleep(0.2)
            self.assertFalse(writer_in.is_set())
            self.assertEqual(events, ["two readers"])  # the late reader queues behind the writer
        w.join()
        r.join()
        self.assertEqual(events, ["two readers", "writer", "late reader"])

    def test_a_reader_lets_the_lock_go_for_host_work_and_takes_it_back(self):
        path = os.path.join(tempfile.mkdtemp(), "device.lock")

        def writer_gets_in():
            try:
                with device_lock.hold(path, exclusive=True, wait_s=0.2):
                    return True
            except device_lock.DeviceBusy:
                return False

        def in_other_thread(fn):
            out = []
            t = threading.Thread(target=lambda: out.append(fn()))
            t.start()
            t.join()
            return out[0]
        with device_lock.released("cpu"):  # no hold: nothing to let go
            self.assertTrue(in_other_thread(writer_gets_in))
        with device_lock.hold(path, exclusive=False):
            with device_lock.hold(path, exclusive=False):  # nested holds go and come back together
                self.assertFalse(in_other_thread(writer_gets_in))
                with device_lock.released("cpu"):
                    self.assertTrue(in_other_thread(writer_gets_in))
                self.assertFalse(in_other_thread(writer_gets_in))
            self.assertFalse(in_other_thread(writer_gets_in))
        self.assertTrue(in_other_thread(writer_gets_in))
        with device_lock.hold(path, exclusive=True):  # timed iterations are never interrupted
            with device_lock.released("cpu"):
                fd = os.open(path, os.O_RDWR)
                try:
                    with self.assertRaises(BlockingIOError):
                        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                finally:
                    os.close(fd)

    def test_a_writer_gives_up_on_a_reader_that_never_leaves(self):
        path = os.path.join(tempfile.mkdtemp(), "device.lock")
        holding, leave = threading.Event(), threading.Event()

        def hung_forward():  # elsewhere: another thread holds its own fds, as another process would
            with device_lock.hold(path, exclusive=False):
                holding.set()
                leave.wait(10)
        reader = threading.Thread(target=hung_forward)
        reader.start()
        try:
            holding.wait(10)
            t0 = time.monotonic()
            with self.assertRaises(device_lock.DeviceBusy):
                with device_lock.hold(path, exclusive=True, wait_s=0.3):
                    pass
            self.assertLess(time.monotonic() - t0, 2.0)
            with device_lock.hold(path, exclusive=False):  # readers are let through again
                pass
        finally:
            leave.set()
            reader.join()

    def test_holds_nest_in_a_thread_without_queueing_behind_a_writer(self):
        path = os.path.join(tempfile.mkdtemp(), "device.lock")
        writer_waiting = threading.Event()

        def writer():
            writer_waiting.set()
            with device_lock.hold(path, exclusive=True, wait_s=5):
                pass
        with device_lock.hold(path, exclusive=False):
            t = threading.Thread(target=writer)
            t.start()
            writer_waiting.wait(5)
            time.sleep(0.05)  # the writer holds the turnstile now, waiting for this reader
            t0 = time.monotonic()
            with device_lock.hold(path, exclusive=False):  # inner: the outer hold, not a new one
                pass
            self.assertLess(time.monotonic() - t0, 1.0)
            with self.assertRaises(RuntimeError):  # no upgrade from shared to exclusive
                with device_lock.hold(path, exclusive=True):
                    pass
        t.join(10)
        self.assertFalse(t.is_alive())
        with device_lock.hold(path, exclusive=True):
            with device_lock.hold(path, exclusive=False):  # inside exclusive: covered
                pass


class Transfer(unittest.TestCase):
    """The channel between the candidate child and the reference, on CPU tensors (their storages'
    bytes travel once the reference accepts the description)."""

    def round_trip(self, out, accept=True):
        a, b = socket.socketpair()
        received = {}

        def child():
            desc, tensors = transfer.describe(out)
            transfer._send_frame(a, {"slot": "trial", "index": 0, "out": desc})
            if transfer._recv_frame(a).get("bytes"):
                for t, _ in tensors:
                    a.sendall(transfer._storage_host_bytes(t))
        t = threading.Thread(target=child)
        t.start()
        msg = transfer.recv_message(b)
        transfer.accept_bytes(b, accept)
        r = transfer.Received()
        if accept:
            r.receive(msg["out"], b)
            received["out"] = r.build(msg["out"], "cpu")
        received["desc"] = msg["out"]
        t.join()
        a.close()
        b.close()
        return received

    def test_layouts_survive(self):
        x = torch.randn(6, 8)
        for out in (x, x.t(), x[1:4, ::2], torch.randn(1, 8).expand(5, 8), (x, 3, None), [x[0], x.to(torch.bfloat16)]):
            got = self.round_trip(out)["out"]
            self.assertTrue(harness.compare(out, got)["ok"], out)
            self.assertEqual(harness.meta_of(out), transfer.meta_of_description(self.round_trip(out)["desc"]))

    def test_refused_descriptions_send_no_bytes(self):
        huge = torch.zeros(()).expand(1 << 20, 1 << 20)  # 4 TiB of view over 4 bytes
        d = self.round_trip(huge, accept=False)["desc"]
        self.assertEqual(d["storage_bytes"], 4)
        self.assertEqual(d["shape"], [1 << 20, 1 << 20])

    def test_subclasses_and_meta_are_described_not_sent(self):
        class Sub(torch.Tensor):
            pass
        d, tensors = transfer.describe(torch.zeros(3).as_subclass(Sub))
        self.assertEqual(d["kind"], "tensor subclass Sub")
        self.assertEqual(tensors, [])
        d, tensors = transfer.describe(torch.empty(3, device="meta"))
        self.assertEqual((d["device"], tensors), ("meta", []))
        mm = harness.meta_mismatch(harness.meta_of(torch.zeros(3)), transfer.meta_of_description(
            transfer.describe(torch.zeros(3).as_subclass(Sub))[0]))
        self.assertIn("tensor subclass Sub", mm)

    def test_outputs_are_freed_when_dropped_not_when_the_collector_runs(self):
        # Multi-GiB outputs held until the cyclic collector ran filled the device: the child held
        # every output it had sent (5 trials of a 6 GiB ReLU) when timing began.
        gc.disable()
        try:
            out = [torch.ones(3), (torch.zeros(2), 1)]
            watched = weakref.ref(out[0])
            desc, tensors = transfer.describe(out)
            del out, tensors
            self.assertIsNone(watched(), "describe() keeps the output alive")
            a, b = socket.socketpair()
            a.sendall(b"\0" * 20)
            r = transfer.Received()
            r.receive(desc, b)
            got = r.build(desc, "cpu")
            watched = weakref.ref(r)
            del r, got
            self.assertIsNone(watched(), "build() keeps the received bytes alive")
            a.close()
            b.close()
        finally:
            gc.enable()

    def test_a_storage_outside_its_allocation_is_refused(self):
        a, b = socket.socketpair()
        desc = {"kind": "tensor", "shape": [4], "stride": [1], "dtype": "torch.float32", "device": "cpu",
                "storage_bytes": 8, "offset": 0}  # 4 floats on 8 bytes
        a.sendall(b"\0" * 8)
        r = transfer.Received()
        r.receive(desc, b)  # every announced byte is read before anything is built
        with self.assertRaises(RuntimeError):
            r.build(desc, "cpu")
        a.close()
        b.close()

    def test_sender_and_listener(self):
        path = os.path.join(tempfile.mkdtemp(), "c.sock")
        listener = transfer.listen(path)
        got = []

        def reference():
            conn, _ = listener.accept()
            self.assertEqual(transfer.recv_message(conn)["token"], "secret")
            while True:
                msg = transfer.recv_message(conn)
                if msg.get("end"):
                    break
                transfer.accept_bytes(conn, True)
                r = transfer.Received()
                r.receive(msg["out"], conn)
                out = r.build(msg["out"], "cpu")
                got.append((msg["slot"], float(out.sum())))
                transfer.reply(conn, msg["slot"] != "timing")
            conn.close()
        t = threading.Thread(target=reference)
        t.start()
        s = transfer.Sender(path, "secret")
        self.assertTrue(s.send("trial", 0, torch.ones(3)))
        self.assertFalse(s.send("timing", 1, torch.ones(2)))
        s.close()
        t.join()
        listener.close()
        self.assertEqual(got, [("trial", 3.0), ("timing", 2.0)])


class Protocol(unittest.TestCase):
    def test_round_trip_and_limit(self):
        r, w = os.pipe()
        protocol.write_frame(w, {"op": "ping", "x": [1, 2, 3]})
        self.assertEqual(protocol.read_frame(r), {"op": "ping", "x": [1, 2, 3]})
        os.write(w, (protocol.MAX_FRAME + 1).to_bytes(4, "big"))
        with self.assertRaises(protocol.ProtocolError):
            protocol.read_frame(r)


class WorkerProcess(unittest.TestCase):
    def test_a_worker_is_first_in_line_for_the_oom_killer(self):
        # What it forks (a candidate child, a validation's module) inherits the score.
        with tempfile.TemporaryDirectory() as work:
            worker = subprocess.Popen([sys.executable, "-m", "kernelzero.worker", "--role", "compile",
                                       "--work-root", work], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
            try:
                ready = protocol.read_frame(worker.stdout.fileno())
                with open(f"/proc/{ready['pid']}/oom_score_adj") as f:
                    self.assertEqual(f.read().strip(), "1000")
            finally:
                worker.stdin.close()
                self.assertEqual(worker.wait(timeout=30), 0)
                worker.stdout.close()


if __name__ == "__main__":
    unittest.main()
