"""scripts/learning/table.py, the learning experiment's summary (docs/LEARNING.md), on a run directory
written here: its rows, its task-by-task comparison with arm A, the held-out tasks correct by the
operator transitions the corpus teaches, and its pairing of C and B; and scripts/learning/seen.py's
first line where a completion leaves the taught one."""
import importlib.util
import json
import sqlite3
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts" / "learning"
SCRIPT = SCRIPTS / "table.py"


def load_script(name):
    """scripts/learning/<name>.py as a module."""
    spec = importlib.util.spec_from_file_location(f"learning_{name}", SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def verdicts(correct, fast=()):
    """Ten held-out tasks: those in `correct` passed, those in `fast` also beat eager."""
    return [{"id": f"heldout/task_{i:05d}#0", "correct": i in correct, "status": "correct" if i in correct else "incorrect",
             "speedup_eager": (1.5 if i in fast else 0.8) if i in correct else None,
             "checks": {"syntax": "pass"}} for i in range(10)]


def overall(correct, fast):
    return {"tasks": 10, "pass_at_k": {"pass@1": correct / 10}, "fast_p_eager": {"1": fast / 10},
            "fast_p_compile": {"1": 0.0}, "geomean_speedup_eager": 1.0}


def write_arm_a(d, correct, fast=()):
    """Arm A under run directory d: its metrics and its verdicts on the ten held-out tasks."""
    (d / "arm-A").mkdir(parents=True)
    (d / "arm-A" / "metrics.json").write_text(json.dumps({"overall": overall(len(correct), len(fast))}))
    write_jsonl(d / "arm-A" / "verdicts.jsonl", verdicts(correct, fast=fast))


def iteration(it, correct, evaluated=None):
    m = {"iteration": it, "verified": 128, "tokens_sampled": 1000, "stage_s": {"coder": 10.0},
         "coder": {"steps": [{"correct": correct, "pass_rate": correct / 128, "kl": 1e-3}]}}
    if evaluated is not None:
        m["eval"] = overall(*evaluated)
    return m


class LearningTable(unittest.TestCase):
    def test_exact_mcnemar(self):
        t = load_script("table")
        self.assertEqual(t.mcnemar(0, 0), 1.0)
        self.assertAlmostEqual(t.mcnemar(6, 0), 2 / 64)  # the doc's "6 gained, none lost is p = 0.03"
        self.assertAlmostEqual(t.mcnemar(1, 5), 2 * 7 / 64)
        self.assertEqual(t.mcnemar(3, 3), 1.0)

    def test_verdicts_by_status_count_kernels_launched_but_never_defined(self):
        t = load_script("table")
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            self.assertIsNone(t.failure_counts("arm A", d))
            write_jsonl(d / "verdicts.jsonl", [
                {"status": "correct", "correct": True},
                {"status": "runtime_error", "reason": "forward raised: NameError: name 'relu_kernel' is not defined"},
                {"status": "runtime_error", "reason": "forward raised: NameError: name 'a1' is not defined"},
                {"status": "runtime_error", "reason": "forward raised: ValueError: too many values to unpack"},
                {"status": "runtime_error", "reason": "constructing ModelNew failed: TypeError: ModelNew.__init__() "
                                                      "missing 1 required positional argument: 'dim'"},
                {"status": "incorrect", "reason": "NameError: name 'x_kernel' is not defined"},
                {"status": "incorrect"}])
            self.assertEqual(t.failure_counts("arm A", d),
                             "arm A: runtime_error 4 (1 launch a kernel never defined, 1 fail constructing ModelNew), "
                             "incorrect 2, correct 1")

    def test_completions_against_their_module(self):
        t = load_script("table")
        module = ("import torch.nn as nn\n\n\nclass Model(nn.Module):\n    def __init__(self, c_in, c_out):\n"
                  "        super().__init__()\n        self.m0 = nn.Conv2d(c_in, c_out, kernel_size=3, groups=4)\n\n"
                  "    def forward(self, a0):\n        v1 = self.m0(a0)\n        v2 = torch.relu(v1)\n"
                  "        v3 = torch.tanh(v2)\n        return v3\n")

        def answer(kernels, launches, conv="nn.Conv2d(c_in, c_out, kernel_size=3, groups=4)", signature="self, c_in, c_out",
                   comments=None):
            heads = comments or [""] * len(kernels)
            defs = "".join(f"{h}@triton.jit\ndef {k}(x_ptr):\n    pass\n\n\n" for h, k in zip(heads, kernels))
            calls = "".join(f"        {k}[(1,)](x)\n" for k in launches)
            return (f"import torch.nn as nn\n\n\n{defs}class ModelNew(nn.Module):\n"
                    f"    def __init__({signature}):\n        super().__init__()\n        self.m0 = {conv}\n\n"
                    f"    def forward(self, a0):\n{calls}        return a0\n")

        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            heldout = d / "corpus" / "heldout"
            write_jsonl(heldout / "manifest.jsonl", [{"file": "task_00000.py", "apis": ["conv2d", "relu", "tanh"]},
                                                     {"file": "task_00001.py", "apis": ["bmm", "softmax"]}])
            (heldout / "task_00000.py").write_text(module)
            (heldout / "task_00001.py").write_text(module.replace("self.m0 = nn.Conv2d(c_in, c_out, kernel_size=3, "
                                                                  "groups=4)", "pass"))
            tasks = t.held_out_tasks(d)
            self.assertIsNone(t.module_followed("arm A", d / "arm-A", tasks))
            candidates = [
                # Every operator's kernel (two fused), launched as defined, the constructor as the module's,
                # the module's lines above them (one spaced otherwise).
                ("task_00000", 0, answer(["conv2d_kernel", "relu_tanh_kernel"], ["conv2d_kernel", "relu_tanh_kernel"],
                                         comments=["# v1 = self.m0(a0)\n",
                                                   "# v2 = torch.relu(v1)\n# v3 = torch.tanh( v2 )\n"])),
                # A training task's constructor, and a launch of a kernel never defined; the lines out of
                # order.
                ("task_00000", 1, answer(["conv2d_kernel", "relu_kernel"], ["conv2d_kernel", "tanh_kernel"],
                                         conv="nn.Conv2d(48, 48, kernel_size=3, groups=48)",
                                         comments=["# v2 = torch.relu(v1)\n", "# v1 = self.m0(a0)\n"])),
                # Every kernel and launch, the module's line, but a constructor without its arguments.
                # Every kernel and launch, but a constructor without its arguments, and a line the module
                # does not have.
                ("task_00000", 2, answer(["conv2d_kernel", "relu_kernel", "tanh_kernel"],
                                         ["conv2d_kernel", "relu_kernel", "tanh_kernel"], signature="self",
                                         comments=["# v1 = self.m0(a0)\n", "# v2 = torch.relu(v1)\n",
                                                   "# v3 = torch.sigmoid(v2)\n"])),
                # baddbmm is not bmm; softmax's kernel a repeat's name; no constructor to copy.
                ("task_00001", 0, answer(["baddbmm_kernel", "softmax_kernel_2"], ["softmax_kernel_2"]))]
            write_jsonl(d / "arm-A" / "jobs.jsonl", [{"id": f"heldout/{task}#{s}", "candidate": source}
                                                     for task, s, source in candidates])
            # The fifth completion gave bench no file (a format error): it has no job.
            write_jsonl(d / "arm-A" / "completions.jsonl", [{"task": f"heldout/{task}", "sample": s} for task, s in
                                                            [("task_00000", 0), ("task_00000", 1), ("task_00000", 2),
                                                             ("task_00001", 0), ("task_00001", 1)]])
            self.assertEqual(t.module_followed("arm A", d / "arm-A", tasks),
                             "arm A: module lines above the kernels 1/5; operator 1 3/5, 2 4/5, 3 2/3; "
                             "launch only kernels they define 3/5; "
                             "constructor as the module's 1/3")

    def test_arms_against_a_task_by_task_and_c_against_b_on_the_same_draws(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            write_arm_a(d, {0, 1}, fast={0})
            # C ends with tasks 0, 2, 3, 4 (fast: 2, 3): pass +3 -1, fast_1 +2 -1 against A.
            write_jsonl(d / "arm-C-seed1" / "metrics.jsonl",
                        [iteration(1, 30), iteration(2, 41, evaluated=(4, 2)), iteration(3, 50)])
            write_jsonl(d / "arm-C-seed1" / "eval" / "iter-000002" / "verdicts.jsonl",
                        verdicts({0, 2, 3, 4}, fast={2, 3}))
            write_jsonl(d / "arm-B-seed1" / "metrics.jsonl", [iteration(1, 30), iteration(2, 40, evaluated=(2, 1))])
            write_jsonl(d / "arm-B-seed1" / "eval" / "iter-000002" / "verdicts.jsonl", verdicts({0, 1}, fast={0}))
            # C writes A's completion of task 0 and its own of tasks 1 and 2; the same text for another
            # task or sample is not A's. B kept no completions.
            write_jsonl(d / "arm-A" / "completions.jsonl",
                        [{"task": f"heldout/task_{i:05d}", "sample": 0, "completion": f"a{i}"} for i in range(3)])
            write_jsonl(d / "arm-C-seed1" / "eval" / "iter-000002" / "completions.jsonl",
                        [{"task": "heldout/task_00000", "sample": 0, "completion": "a0"},
                         {"task": "heldout/task_00001", "sample": 0, "completion": "a0"},
                         {"task": "heldout/task_00002", "sample": 1, "completion": "a2"}])
            # The corpus teaches a->b and b->c: tasks 0-3 take a->b (every), 4-6 a->b->d (some), 7-9 c->a (none).
            write_jsonl(d / "corpus" / "train.jsonl", [{"apis": ["a", "b", "c"]}, {"apis": ["d"]}])
            write_jsonl(d / "corpus" / "heldout" / "manifest.jsonl",
                        [{"file": f"task_{i:05d}.py",
                          "apis": ["a", "b"] if i < 4 else ["a", "b", "d"] if i < 7 else ["c", "a"]}
                         for i in range(10)])
            out = subprocess.run([sys.executable, str(SCRIPT), str(d)], capture_output=True, text=True, check=True)
        lines = out.stdout.splitlines()
        self.assertIn("| C | 1 | 0.200 [0.06, 0.51] | 0.400 [0.17, 0.69] |", out.stdout)
        self.assertIn("<!-- arm-C-seed1 held-out completions not valid Python (arm A: 0) by iteration: 2: 0; "
                      "written as arm A's by iteration: 2: 1/3; ", out.stdout)
        self.assertIn("<!-- arm-B-seed1 held-out completions not valid Python (arm A: 0) by iteration: 2: 0; "
                      "written as arm A's by iteration: 2: ?; ", out.stdout)
        self.assertIn("arm-C-seed1 at iteration 2 against A, task by task: pass +3 -1 (exact McNemar p = 0.62); "
                      "fast_1 +2 -1 (exact McNemar p = 1.00).", lines)
        self.assertIn("arm-B-seed1 at iteration 2 against A, task by task: pass +0 -0 (exact McNemar p = 1.00); "
                      "fast_1 +0 -0 (exact McNemar p = 1.00).", lines)
        self.assertIn("Held-out tasks correct, by how many of their operator transitions the training pairs "
                      "teach (every, some, none): arm A: every 2/4, some 0/3, none 0/3; arm-B-seed1 at iteration "
                      "2: every 2/4, some 0/3, none 0/3; arm-C-seed1 at iteration 2: every 3/4, some 1/3, "
                      "none 0/3.", lines)
        self.assertIn("Held-out verdicts by status: arm A: incorrect 8, correct 2; arm-B-seed1 at iteration 2: "
                      "incorrect 8, correct 2; arm-C-seed1 at iteration 2: incorrect 6, correct 4.", lines)
        # Iterations both ran (1-2), not C's third.
        self.assertIn("Seed 1, C against B on the same draws (iterations 1-2): correct samples 71 against 70 "
                      "(C - B = +1); C ahead in 1 iterations, behind in 0, equal in 1.", lines)


    def test_a_variant_is_its_own_arm_and_its_checkpoint_on_the_seen_tasks_is_paired_with_a(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            write_arm_a(d, {0, 1}, fast={0})
            seen = [{"id": f"seen-tasks/task_{i:05d}#0", "correct": i < 3, "speedup_eager": 1.2 if i < 3 else None}
                    for i in range(4)]
            write_jsonl(d / "arm-A-seen" / "verdicts.jsonl", seen)
            spike = iteration(2, 40, evaluated=(1, 0))
            spike["coder"]["steps"][0].update(kl=0.45, kl_max=120.0)
            for name, its in (("arm-C-seed1-lr3e-4", [iteration(1, 30), spike, iteration(3, 50, evaluated=(1, 0))]),
                              ("arm-B-seed1-lr3e-4", [iteration(1, 31), iteration(3, 20, evaluated=(2, 1))])):
                run = d / name
                write_jsonl(run / "metrics.jsonl", its)
                (run / "run.json").write_text(json.dumps({"config": {"coder_phase": {"kl_beta": 0.04}}}))
                write_jsonl(run / "eval" / "iter-000003" / "verdicts.jsonl", verdicts({0}))
            # The variant's C on the seen tasks at its last checkpoint: task 0 lost, task 3 gained.
            run_seen = d / "arm-C-seed1-lr3e-4" / "seen-iter-000003"
            write_jsonl(run_seen / "verdicts.jsonl",
                        [dict(v, correct=v["id"].startswith(("seen-tasks/task_00001", "seen-tasks/task_00002",
                                                             "seen-tasks/task_00003"))) for v in seen])
            (run_seen / "metrics.json").write_text(json.dumps({"overall": {"tasks": 4, "pass_at_k": {"pass@1": 0.75},
                                                                           "fast_p_eager": {"1": 0.5}}}))
            # A tasks=seen arm is evaluated on the held-out tasks at its end only: before that, its row
            # shows its training and spending.
            write_jsonl(d / "arm-C-seed1-tasksseen" / "metrics.jsonl", [iteration(1, 64), iteration(2, 96)])
            # Not an arm's run: ignored.
            (d / "arm-C-seedling").mkdir()
            out = subprocess.run([sys.executable, str(SCRIPT), str(d)], capture_output=True, text=True, check=True)
        lines = out.stdout.splitlines()
        self.assertIn("| C lr3e-4 | 1 | 0.200 [0.06, 0.51] | 0.100 [0.02, 0.40] |", out.stdout)
        self.assertIn("| B lr3e-4 | 1 |", out.stdout)
        self.assertNotIn("| C | 1 |", out.stdout)
        self.assertIn("| C tasksseen | 1 | 0.200 [0.06, 0.51] | - | 0.100 [0.02, 0.40] | - | - | - | 0.625 -> 0.625 | "
                      "2 | 256 | 2000 | 20 s | `arm C 1 tasks=seen` |", lines)
        # Each row names the stage that made it, its options as the run's name orders them.
        self.assertTrue(any(line.startswith("| A | - |") and line.endswith(" | `sft` |") for line in lines))
        self.assertTrue(any(line.startswith("| C lr3e-4 | 1 |") and line.endswith(" | `arm C 1 lr=3e-4` |")
                            for line in lines), out.stdout)
        self.assertTrue(any(line.startswith("<!-- arm-C-seed1-lr3e-4 held-out completions") and
                            line.endswith("last step: 1.00e-03, largest: 4.50e-01 at iteration 2 (its largest token: 1.20e+02) -->") for line in lines),
                        out.stdout)
        self.assertIn("arm-C-seed1-lr3e-4 at iteration 3 on 4 seen tasks (greedy): pass@1 0.750, fast_1 0.500; "
                      "against A, task by task: pass +1 -1 (exact McNemar p = 1.00); fast_1 +0 -1 "
                      "(exact McNemar p = 1.00).", lines)
        self.assertIn("Seed 1, C lr3e-4 against B lr3e-4 on the same draws (iterations 1-3): correct samples 80 "
                      "against 51 (C lr3e-4 - B lr3e-4 = +29); C lr3e-4 ahead in 1 iterations, behind in 1, equal "
                      "in 0.", lines)
        self.assertIn("Arm C lr3e-4 over 1 seed(s) at iteration 3: pass@1 mean 0.100 (range 0.100-0.100), fast_1 mean 0.000 "
                      "(range 0.000-0.000).", lines)

    def test_variants_against_c_and_the_control_the_speed_only_share_and_per_task_learning(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            write_arm_a(d, {0, 1}, fast={0})
            for name, its in (("arm-C-seed1", [iteration(1, 30), iteration(2, 40, evaluated=(1, 0))]),
                              ("arm-C-seed1-advdr_grpo", [iteration(1, 30), iteration(2, 45, evaluated=(2, 0))]),
                              ("arm-C-seed1-lr0", [iteration(1, 30), iteration(2, 38, evaluated=(2, 1))]),
                              ("arm-C-seed1-tasksseen", [iteration(i, 60, evaluated=(2, 0) if i == 4 else None)
                                                         for i in range(1, 5)])):
                for m in its:
                    m["coder"]["steps"][0].update(groups=16, zero_signal_groups=4, speed_only_groups=3,
                                                  speed_only_share=0.4 if "adv" not in name else 0.01)
                    if "adv" in name:
                        m["coder"]["steps"][0].update(logprob_gap=0.002 * m["iteration"],
                                                      logprob_gap_max=0.5 * m["iteration"])
                        # Iteration 2's step KL is the largest; its peak token was moved by the step's first update.
                        m["coder"]["steps"][0].update(kl=1e-3 * m["iteration"], kl_max=1e5, updates=4, kl_max_at={
                            "token": 25, "text": ":", "update": 1, "logp": -16.2, "old_logp": -0.41,
                            "ref_logp": -0.3, "sampler_logp": -0.40})
                        # Iteration 2's largest update is clipped; the mean of its updates is not what is read.
                        m["coder"]["steps"][0].update(grad_norm=(0.004, 0.9)[m["iteration"] - 1],
                                                      grad_norm_max=(0.006, 2400.0)[m["iteration"] - 1],
                                                      grad_scale=(0.005, 0.3)[m["iteration"] - 1])
                run = d / name
                write_jsonl(run / "metrics.jsonl", its)
                last = its[-1]["iteration"]
                write_jsonl(run / "eval" / f"iter-{last:06d}" / "verdicts.jsonl", verdicts({0}))
                (run / "run.json").write_text(json.dumps({"config": {"coder": {"max_grad_norm": 1.0},
                                                                     "coder_phase": {"kl_beta": 0.04,
                                                                                     "temperature": 1.0}}}))
            # The tasks=seen arm's pool copy: an attempt per sample, coder@iter-K for iteration K + 1. Tasks
            # 1-5 drawn in iterations 1 and 3 (halves 1-2 and 3-4): 1 and 2 rise, 3 falls, 4 and 5 stay;
            # task 6 only in the first half; another policy's attempts (probe@...) are not the Coder's.
            db = sqlite3.connect(str(d / "arm-C-seed1-tasksseen.tasks.sqlite"))
            # A failed sample is a runtime error or a format error by turns.
            db.execute("CREATE TABLE attempts (id INTEGER PRIMARY KEY, task_id INTEGER, model_version TEXT, "
                       "status TEXT, correct INTEGER)")
            early = {1: 2, 2: 0, 3: 8, 4: 8, 5: 0, 6: 4}
            late = {1: 6, 2: 1, 3: 5, 4: 8, 5: 0}
            for version, counts in (("coder@iter-0", early), ("coder@iter-2", late)):
                for task, k in counts.items():
                    db.executemany("INSERT INTO attempts (task_id, model_version, status, correct) VALUES (?, ?, ?, ?)",
                                   [(task, version, "correct" if i < k else ("runtime_error", "format_error")[i % 2 == 0],
                                     int(i < k)) for i in range(8)])
            db.execute("INSERT INTO attempts (task_id, model_version, status, correct) "
                       "VALUES (1, 'probe@iter-2', 'format_error', 0)")
            # Task 6's draw in a fifth iteration, interrupted before its metrics: not counted.
            db.execute("INSERT INTO attempts (task_id, model_version, status, correct) "
                       "VALUES (6, 'coder@iter-4', 'correct', 1)")
            db.commit()
            db.close()
            out = subprocess.run([sys.executable, str(SCRIPT), str(d)], capture_output=True, text=True, check=True)
        lines = out.stdout.splitlines()
        self.assertIn("Seed 1, C advdr_grpo against C on the same draws (iterations 1-2): correct samples 75 against "
                      "70 (C advdr_grpo - C = +5); C advdr_grpo ahead in 1 iterations, behind in 0, equal in 1.", lines)
        # Every arm on the pool against the control (lr=0), which is not itself a variant against C.
        self.assertIn("Seed 1, C against C lr0 on the same draws (iterations 1-2): correct samples 70 against 68 "
                      "(C - C lr0 = +2); C ahead in 1 iterations, behind in 0, equal in 1.", lines)
        self.assertIn("Seed 1, C advdr_grpo against C lr0 on the same draws (iterations 1-2): correct samples 75 "
                      "against 68 (C advdr_grpo - C lr0 = +7); C advdr_grpo ahead in 1 iterations, behind in 0, "
                      "equal in 1.", lines)
        self.assertFalse(any(line.startswith("Seed 1, C lr0 against") for line in lines), out.stdout)
        # Not against C or the control: the tasks=seen arm draws from another pool.
        self.assertFalse(any(line.startswith("Seed 1, C tasksseen against C") for line in lines), out.stdout)
        self.assertTrue(any(line.startswith("<!-- arm-C-seed1 held-out completions") and line.endswith(
            "; groups ordered by speed alone (every sample correct): 3.0 of 12.0 with signal a step, 0.40 of the "
            "advantages' weight -->") for line in lines), out.stdout)
        self.assertTrue(any(line.startswith("<!-- arm-C-seed1-advdr_grpo held-out completions") and line.endswith(
            "0.01 of the advantages' weight; sampler-trainer log-prob gap: mean 3.0e-03, largest 1.0e+00; a step's "
            "gradient norm before clipping (its largest update's): median 2.4e+03, over the clip (1) at iterations: "
            "2 (2.4e+03); AdamW's gradient scale after the last step 3.0e-01 -->") for line in lines), out.stdout)
        self.assertTrue(any(line.startswith("<!-- arm-C-seed1-advdr_grpo held-out completions") and (
            "KL to the SFT Coder, last step: 2.00e-03, largest: 2.00e-03 at iteration 2 (its largest token: 1.00e+05, "
            "\":\" scored in update 2 of 4: log-prob -16.2 there, -0.4 at the step's start (-0.4 for the sampler), "
            "-0.3 under the reference);") in line for line in lines), out.stdout)
        self.assertIn("arm-C-seed1-tasksseen, per task on its training draws (temperature 1): of 6 tasks drawn, 1 in "
                      "one iteration only; 5 drawn in both halves of its 4 iterations (1-2, 3-4); their mean pass rate 0.450 -> 0.500; up in 2, down in 1, "
                      "level in 2 (exact sign test p = 1.00).", lines)
        # Iteration 1 drew 48 samples, iteration 3 40; the probe's and the interrupted iteration's are not the arm's.
        self.assertIn("arm-C-seed1-tasksseen, training samples correct/runtime errors/format errors by iteration: "
                      "22/13/13 of 48, 20/11/9 of 40.", lines)
        self.assertFalse(any(line.startswith("arm-C-seed1,") for line in lines), out.stdout)  # no pool copy
        self.assertIn("arm-C-seed1-tasksseen, training pass rate by iteration (16 of its seen tasks each time): "
                      "0.47, 0.47, 0.47, 0.47.", lines)
        self.assertFalse(any("advdr_grpo, training pass rate" in line for line in lines), out.stdout)

    def test_the_sft_proposers_modules_by_operators_and_check(self):
        t = load_script("table")
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            self.assertEqual(t.proposer_samples(d), [])
            modules = {"1": [(["relu"], True, ""), (["relu"], False, "novel: token similarity 0.93 to stored task 4"),
                             (["conv2d", "relu"], False, "runs: eager forward failed: TypeError"),
                             (["conv2d", "relu", "tanh"], False, "format: syntax error"),
                             (["conv2d", "tanh"], False, "runs: eager forward failed: RuntimeError")],
                       "0.7": [(["relu"], True, ""), (["conv2d", "relu"], True, "")]}
            for temperature, rows in modules.items():
                (d / f"proposals-t{temperature}").mkdir()
                (d / f"proposals-t{temperature}" / "proposals.jsonl").write_text("".join(
                    json.dumps({"apis": apis, "level": 1 + (len(apis) > 1), "valid": ok, "reason": why,
                                "source": "..."}) + "\n" for apis, ok, why in rows))
            self.assertEqual(t.proposer_samples(d), [
                "SFT Proposer at temperature 0.7: 2 of 2 modules valid; by operators in the API set, "
                "valid/stored: 1 1/1, 2 1/1.",
                "SFT Proposer at temperature 1: 1 of 5 modules valid; by operators in the API set, "
                "valid/stored: 1 1/2, 2 0/2, 3 0/1; turned down by check: 2 runs, 1 format, 1 novel."])
            # The command wrote a sixth module, a training task's text, which the store did not keep:
            # its summary counts it, and its checks.
            (d / "proposals-t1" / "summary.json").write_text(json.dumps(
                {"proposed": 6, "valid": 1, "failed_checks": {"runs": 2, "format": 1, "novel": 2}}))
            self.assertEqual(t.proposer_samples(d)[1],
                             "SFT Proposer at temperature 1: 1 of 6 modules valid (1 the text of a stored task); "
                             "by operators in the API set, valid/stored: 1 1/2, 2 0/2, 3 0/1; "
                             "turned down by check: 2 novel, 2 runs, 1 format.")

    def test_a_rows_stage_restores_each_options_equals_sign(self):
        t = load_script("table")
        self.assertEqual(t.stage_command("C tasksseen16-advdr_grpo-temp0.7-klk3_clamped", "2"),
                         "`arm C 2 tasks=seen16 adv=dr_grpo temp=0.7 kl=k3_clamped`")
        self.assertEqual(t.stage_command("D advdr_grpo-temp0.7-klk3+-beta0.2-lr3e-4", "1"),
                         "`arm D 1 adv=dr_grpo temp=0.7 kl=k3+ beta=0.2 lr=3e-4`")
        # The Proposer's temperature ends with "temp": its own option, after a value with a "-" too.
        self.assertEqual(t.stage_command("D advdr_grpo-temp0.7-lr3e-4-ptemp0.7", "1"),
                         "`arm D 1 adv=dr_grpo temp=0.7 lr=3e-4 ptemp=0.7`")
        self.assertEqual(t.stage_command("D ptemp0.5-temp0.7", "2"), "`arm D 2 ptemp=0.5 temp=0.7`")
        self.assertEqual(t.stage_command("D advdr_grpo-temp0.7-lr3e-4-pdraws6000", "1"),
                         "`arm D 1 adv=dr_grpo temp=0.7 lr=3e-4 pdraws=6000`")
        self.assertEqual(t.stage_command("B", "3"), "`arm B 3`")

    def test_a_variant_is_paired_with_the_variant_it_extends_on_the_same_draws(self):
        t = load_script("table")
        self.assertEqual(t.parent_variant("C advdr_grpo-temp0.7"), "C advdr_grpo")
        self.assertEqual(t.parent_variant("C lr3e-4-temp0.7"), "C lr3e-4")  # a value with a "-"
        self.assertEqual(t.parent_variant("C temp0.7-lr3e-4"), "C temp0.7")
        self.assertEqual(t.parent_variant("C tasksseen16-advdr_grpo-temp0.7-klk3_clamped"),
                         "C tasksseen16-advdr_grpo-temp0.7")
        self.assertEqual(t.parent_variant("C advdr_grpo-temp0.7-klk3+-beta0.2"), "C advdr_grpo-temp0.7-klk3+")
        # One option over C is paired with C; a last option of tasks= changes the draws; B and C itself.
        for arm in ("C advdr_grpo", "C advdr_grpo-tasksseen16", "B advdr_grpo-temp0.7", "C"):
            self.assertIsNone(t.parent_variant(arm), arm)

    def test_the_seed_spread_is_at_the_last_iteration_every_seed_was_evaluated_at(self):
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            write_arm_a(d, {0, 1})
            # Seed 1 evaluated at 2 and 4; seeds 2 and 10 cut before 4. At 2: seed 1 passes tasks 0-2, seed
            # 2 tasks 1-4 (+2 -1 against seed 1), seed 10 none (+0 -3); numerical order puts 10 last.
            for seed, at_2, at_4 in ((1, {0, 1, 2}, {0, 1, 2, 3, 4, 5}), (2, {1, 2, 3, 4}, None), (10, set(), None)):
                run = d / f"arm-C-seed{seed}-lr3e-4"
                its = [iteration(1, 30), iteration(2, 40, evaluated=(len(at_2), 0)), iteration(3, 40)]
                write_jsonl(run / "eval" / "iter-000002" / "verdicts.jsonl", verdicts(at_2))
                if at_4 is not None:
                    its.append(iteration(4, 50, evaluated=(len(at_4), 1)))
                    write_jsonl(run / "eval" / "iter-000004" / "verdicts.jsonl", verdicts(at_4, fast={0}))
                write_jsonl(run / "metrics.jsonl", its)
            write_jsonl(d / "arm-C-seed1" / "metrics.jsonl", [iteration(1, 30), iteration(2, 40, evaluated=(2, 1))])
            write_jsonl(d / "arm-C-seed1" / "eval" / "iter-000002" / "verdicts.jsonl", verdicts({0, 1}, fast={1}))
            out = subprocess.run([sys.executable, str(SCRIPT), str(d)], capture_output=True, text=True, check=True)
        lines = out.stdout.splitlines()
        self.assertIn("Arm C lr3e-4 over 3 seed(s) at iteration 2: pass@1 mean 0.233 (range 0.000-0.400), fast_1 "
                      "mean 0.000 (range 0.000-0.000).", lines)
        self.assertIn("Arm C lr3e-4 seed 2 against seed 1 at iteration 2, task by task: pass +2 -1 (exact McNemar "
                      "p = 1.00); fast_1 +0 -0 (exact McNemar p = 1.00).", lines)
        self.assertEqual(lines[-1], "Arm C lr3e-4 seed 10 against seed 1 at iteration 2, task by task: pass +0 -3 "
                                    "(exact McNemar p = 0.25); fast_1 +0 -0 (exact McNemar p = 1.00).")
        # One seed: its last evaluation, and no line against itself.
        self.assertIn("Arm C over 1 seed(s) at iteration 2: pass@1 mean 0.200 (range 0.200-0.200), fast_1 mean 0.100 "
                      "(range 0.100-0.100).", lines)
        self.assertFalse(any(line.startswith("Arm C seed") for line in lines))

    def test_a_seen_n_arms_curve_is_on_its_fixed_tasks(self):
        t = load_script("table")
        its = [iteration(1, 30), iteration(2, 40)]
        config = {"coder_phase": {"tasks_per_step": 16}}
        self.assertEqual(t.seen_curve(Path("arm-C-seed1-tasksseen16-advdr_grpo-temp0.7"), its, config),
                         "arm-C-seed1-tasksseen16-advdr_grpo-temp0.7, training pass rate by iteration (its 16 tasks "
                         "each time): 0.23, 0.31.")
        self.assertEqual(t.seen_curve(Path("arm-C-seed1-tasksseen20"), its, config),
                         "arm-C-seed1-tasksseen20, training pass rate by iteration (16 of its 20 tasks each time): "
                         "0.23, 0.31.")
        self.assertIsNone(t.seen_curve(Path("arm-C-seed1-advdr_grpo"), its, config))
        self.assertIsNone(t.seen_curve(Path("arm-C-seed1-tasksseenish"), its, config))

    def test_training_failures_of_iterations_of_equal_size(self):
        t = load_script("table")
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            db = sqlite3.connect(str(d / "arm-C-seed1-tasksseen16.tasks.sqlite"))
            db.execute("CREATE TABLE attempts (id INTEGER PRIMARY KEY, task_id INTEGER, model_version TEXT, "
                       "status TEXT, correct INTEGER)")
            for version, statuses in (("coder@iter-1", ["correct"] * 5 + ["format_error"] * 3),
                                      ("coder@iter-0", ["correct"] * 2 + ["runtime_error"] * 4 + ["rejected"] * 2)):
                db.executemany("INSERT INTO attempts (task_id, model_version, status, correct) VALUES (1, ?, ?, ?)",
                               [(version, st, int(st == "correct")) for st in statuses])
            db.commit()
            db.close()
            run = Path("arm-C-seed1-tasksseen16")
            self.assertEqual(t.training_failures(d, run, [iteration(1, 2), iteration(2, 5)]),
                             "arm-C-seed1-tasksseen16, training samples correct/runtime errors/format errors by "
                             "iteration of 8 each time: 2/4/0, 5/0/3.")
            self.assertIsNone(t.training_failures(d, Path("arm-C-seed2"), [iteration(1, 2)]))  # no pool copy

    def test_an_arms_propose_stage_what_it_gave_the_coder(self):
        t = load_script("table")
        its = []
        # Iteration 1: 16 proposals, 3 valid (2 new), the symbolic generator's 1, 1 of the 3 measured in
        # the band; iteration 2: none valid, 2 symbolic, both in the band, the Proposer updated.
        for it, (valid, new, symbolic, band, updated, zero) in enumerate(
                ((3, 2, 1, 1, False, 9), (0, 0, 2, 2, True, 6)), start=1):
            m = iteration(it, 40)
            m["propose"] = {"proposals": 16, "parsed": 12, "valid": valid, "valid_from_proposer": new,
                            "symbolic": symbolic, "modules_measured": new + symbolic, "in_band": band,
                            "updated": updated}
            m["pool"] = {"from_band": band, "replayed": 16, "size": band + 16}
            m["coder"]["steps"][0].update({"groups": 16, "zero_signal_groups": zero})
            its.append(m)
        self.assertEqual(t.proposals(Path("arm-D-seed1"), its),
                         "arm-D-seed1, propose over 2 iterations: the Proposer wrote 32 modules, 3 valid (2 new ones "
                         "measured), the symbolic generator added 3; of the 5 measured, 3 in the band; the Proposer "
                         "updated in 1 of them; the Coder's pool 1.5 band modules and 16.0 replayed tasks an "
                         "iteration; groups without signal 7.5 of 16.0 a step.")
        self.assertIsNone(t.proposals(Path("arm-C-seed1"), [iteration(1, 40)]))  # no propose stage

    def test_an_arms_probed_modules_by_operators(self):
        t = load_script("table")
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            db = sqlite3.connect(str(d / "arm-D-seed1.tasks.sqlite"))
            db.execute("CREATE TABLE tasks (id INTEGER PRIMARY KEY, apis TEXT, origin TEXT)")
            db.execute("CREATE TABLE attempts (id INTEGER PRIMARY KEY, task_id INTEGER, model_version TEXT, "
                       "status TEXT, correct INTEGER)")
            # A corpus task (replayed, not counted), two single-operator modules (solved; in the band), a
            # composition of two (in the band) and one of three (never passed), the fill-in's among them.
            db.executemany("INSERT INTO tasks (id, apis, origin) VALUES (?, ?, ?)",
                           [(1, '["relu", "tanh"]', "corpus"), (2, '["relu"]', "proposer"), (3, '["silu"]', "proposer"),
                            (4, '["bmm", "softmax"]', "proposer"), (5, '["conv1d", "cumsum", "mish"]', "symbolic")])
            probes = {2: [1, 1, 1, 1], 3: [1, 0, 1, 1], 4: [0, 1, 0, 0], 5: [0, 0, 0, 0]}
            for task, oks in probes.items():
                db.executemany("INSERT INTO attempts (task_id, model_version, status, correct) VALUES (?, 'probe', "
                               "'correct', ?)", [(task, ok) for ok in oks])
            # The Coder's samples: on task 4 in iterations 1 and 2, on task 3 in 1, on the corpus's in
            # 1; iteration 3 was cut before its metrics and is not counted.
            for task, version, oks in ((4, "coder@iter-0", [1, 0]), (4, "coder@iter-1", [1, 1]),
                                       (3, "coder@iter-0", [1, 1]), (1, "coder@iter-0", [0, 0]),
                                       (4, "coder@iter-2", [1, 1])):
                db.executemany("INSERT INTO attempts (task_id, model_version, status, correct) VALUES (?, ?, "
                               "'correct', ?)", [(task, version, ok) for ok in oks])
            db.commit()
            db.close()
            its = [iteration(1, 40), iteration(2, 40)]
            for m in its:
                m["propose"] = {"proposals": 16}
            self.assertEqual(t.probed_modules(d, Path("arm-D-seed1"), its),
                             "arm-D-seed1, the modules its probes measured by operators in the API set, probes "
                             "all/some/none correct: 1 1/1/0, 2 0/1/0, 3 0/0/1; the Coder's training samples on "
                             "them by operators, correct/all: 1 2/2, 2 3/4.")
            self.assertIsNone(t.probed_modules(d, Path("arm-D-seed2"), its))  # no pool copy
            self.assertIsNone(t.probed_modules(d, Path("arm-D-seed1"), [iteration(1, 40)]))  # no propose stage

    def test_a_seen_n_arm_on_the_seen_tasks_it_trained_on_and_the_others(self):
        t = load_script("table")
        with tempfile.TemporaryDirectory() as tmp:
            run = Path(tmp) / "arm-C-seed1-tasksseen4-advdr_grpo"
            seen = run / "seen-iter-000016"
            seen.mkdir(parents=True)
            (seen / "metrics.json").write_text(json.dumps({"overall": overall(5, 0)}))
            # It trained on tasks 0-3: gains 0 and 1 there, loses 8 among the other six.
            write_jsonl(seen / "verdicts.jsonl", verdicts({0, 1, 2, 3, 9}))
            write_jsonl(Path(tmp) / "arm-A-seen" / "verdicts.jsonl", verdicts({2, 3, 8, 9}))
            a_seen = t.outcomes(Path(tmp) / "arm-A-seen")
            line = t.seen_against_a(run, a_seen)
        self.assertEqual(line, "arm-C-seed1-tasksseen4-advdr_grpo at iteration 16 on 10 seen tasks (greedy): pass@1 "
                         "0.500, fast_1 0.000; against A, task by task: pass +2 -1 (exact McNemar p = 1.00); fast_1 "
                         "+0 -0 (exact McNemar p = 1.00); on the 4 it trained on, task by task: pass +2 -0 (exact "
                         "McNemar p = 0.50); fast_1 +0 -0 (exact McNemar p = 1.00); on the other 6, task by task: pass "
                         "+0 -1 (exact McNemar p = 1.00); fast_1 +0 -0 (exact McNemar p = 1.00).")

    def test_arm_a_against_another_runs_arm_a(self):
        with tempfile.TemporaryDirectory() as tmp:
            d, base = Path(tmp) / "run", Path(tmp) / "base"
            write_arm_a(d, {0, 1, 2}, fast={0})
            run = [sys.executable, str(SCRIPT), str(d), str(base)]
            missing = subprocess.run(run, capture_output=True, text=True)
            self.assertNotEqual(missing.returncode, 0)
            self.assertIn("the baseline has no arm A", missing.stderr)
            # The baseline passed tasks 0 and 3: this A gains 1 and 2, loses 3; fast_1 gains 0.
            write_jsonl(base / "arm-A" / "verdicts.jsonl", verdicts({0, 3}))
            out = subprocess.run(run, capture_output=True, text=True, check=True)
        self.assertIn(f"Arm A against {base}'s arm A, task by task: pass +2 -1 (exact McNemar p = 1.00); "
                      f"fast_1 +1 -0 (exact McNemar p = 1.00).", out.stdout.splitlines())
        # A baseline that evaluated other tasks too: only those both have are paired.
        t = load_script("table")
        start = {f"task_{i}": (i in {0, 3}, False) for i in range(12)}
        end = {f"task_{i}": (i in {1, 11}, False) for i in range(1, 10)}
        self.assertEqual(t.against("A against base", end, start),
                         "A against base on the 9 tasks both evaluated (of 9 and 12), task by task: pass +1 -1 "
                         "(exact McNemar p = 1.00); fast_1 +0 -0 (exact McNemar p = 1.00).")


class LearningSeen(unittest.TestCase):
    def test_first_difference_and_what_it_decides(self):
        s = load_script("seen")
        want = ["class ModelNew(nn.Module):", "    def __init__(self, c_in, c_out, dim):",
                "        self.m0 = nn.Conv2d(c_in, c_out, kernel_size=3)", "        self.dim = dim"]
        self.assertIsNone(s.first_difference(want, list(want)))
        self.assertEqual(s.first_difference(want, want[:1] + ["    def __init__(self):"] + want[2:]),
                         (1, want[1], "    def __init__(self):"))
        self.assertEqual(s.first_difference(want, want[:3]), (3, want[3], "<end>"))
        self.assertEqual(s.kind(want[1]), "a constructor argument")
        self.assertEqual(s.kind(want[2]), "a constructor argument")
        self.assertEqual(s.kind(want[3]), "a constructor argument")
        self.assertEqual(s.kind("def relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):"),
                         "a kernel's name or parameters")
        self.assertEqual(s.kind("        relu_kernel[(triton.cdiv(n, 1024),)](x, out, n, BLOCK=1024)"),
                         "a kernel launch")
        self.assertEqual(s.kind("    def forward(self, a0, a1):"), "forward's inputs")
        self.assertEqual(s.kind("        outer, R, inner = x.shape[:self.dim].numel(), x.shape[self.dim], 1"),
                         "a kernel body or glue line")
        for line in ("# v2 = torch.softmax(v1, dim=self.dim)", "        # v2 = torch.softmax(v1, dim=self.dim)"):
            self.assertEqual(s.kind(line), "a module line named in a comment")



if __name__ == "__main__":
    unittest.main()
