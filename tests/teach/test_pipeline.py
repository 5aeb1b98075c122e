"""The learning pipeline on tiny sizes, each stage feeding the next as a run would: the teacher's
verified kernels -> the SFT corpus and its held-out tasks -> a trainer run whose warm start is SFT on
that corpus, one CA-GRPO iteration, and its evaluation on the held-out tasks. The models are random
(init:tiny): the test checks what each stage hands on, not learning."""
from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BINARY = os.environ.get("KZ_BINARY", str(ROOT / "build" / "kernelzero"))


def run(*args, timeout=1200):
    r = subprocess.run([BINARY, *args], capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise AssertionError(f"kernelzero {' '.join(args)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r.stdout


def lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class Pipeline(unittest.TestCase):
    def test_teacher_corpus_sft_rl_evaluation(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            # One candidate per task, as scripts/learning_experiment.sh runs it.
            run("teach", "--out", str(tmp / "teach"), "--count", "16", "--seed", "5", "--sizes", "small",
                "--fused-share", "0.25", "--device", "cpu", "--workers", "2", "--no-progress")
            run("corpus", "--from", str(tmp / "teach"), "--out", str(tmp / "corpus"), "--heldout", "0.3")
            corpus = json.loads((tmp / "corpus" / "corpus.json").read_text())
            self.assertGreater(corpus["train_pairs"], 0)
            self.assertGreater(corpus["heldout_tasks"], 0)
            # The Proposer's pairs and the Coder's pool cover the same training tasks.
            proposer = lines(tmp / "corpus" / "proposer.jsonl")
            self.assertEqual(len(proposer), corpus["train_pairs"])
            self.assertEqual({p["task"] for p in proposer},
                             {p.stem for p in (tmp / "corpus" / "train_tasks").glob("*.py")})
            self.assertTrue(all(p["completion"].startswith("```python\n") and "class Model" in p["completion"]
                                for p in proposer))

            # The training tasks as the Coder's pool, with their API sets (the corpus's manifest), each
            # stored with the validation teach recorded for it rather than validated again.
            validations = str(tmp / "teach" / "validation.jsonl")
            missing = subprocess.run([BINARY, "tasks", "import", "--store", str(tmp / "x.sqlite"),
                                      str(tmp / "corpus" / "train_tasks"), "--validations", str(tmp / "none.jsonl")],
                                     capture_output=True, text=True, timeout=60)
            self.assertEqual(missing.returncode, 2, missing.stderr)
            self.assertIn("none.jsonl", missing.stderr)
            imported = run("tasks", "import", "--store", str(tmp / "pool.sqlite"), str(tmp / "corpus" / "train_tasks"),
                           "--origin", "corpus", "--device", "cpu", "--workers", "2", "--validations", validations)
            n = corpus["train_pairs"]
            self.assertIn(f"imported {n} files ({n} valid; {n} validations taken from {validations})", imported)
            manifest = {m["file"][:-3]: m["apis"] for m in lines(tmp / "corpus" / "train_tasks" / "manifest.jsonl")}
            pool = [json.loads(t) for t in run("tasks", "list", "--store", str(tmp / "pool.sqlite"), "--json",
                                              "--limit", "100000").splitlines()]
            self.assertEqual(sorted(t["apis"] for t in pool), sorted(manifest.values()))
            self.assertTrue(all(t["valid"] for t in pool), [t for t in pool if not t["valid"]])
            families = {a["name"] for a in json.loads((tmp / "corpus" / "catalog.json").read_text())["apis"]}
            heldout_sets = set((tmp / "corpus" / "heldout" / "api_sets.txt").read_text().split())
            self.assertEqual(len(heldout_sets), len(corpus["heldout_api_sets"]))

            # tiny-cpu, one iteration, the Coder first fine-tuned on the corpus, evaluated on its held-out set;
            # the pool above, API sets drawn from the teacher's families and never from a held-out set.
            config = run("train", "--preset", "tiny-cpu", "--print-config")
            config = config.replace('"data/qwen2.5-tokenizer"', json.dumps(str(ROOT / "data" / "qwen2.5-tokenizer")))
            config = re.sub(r"(?m)^iterations = \d+$", "iterations = 1\nwarm_start = true\n"
                            f"task_store = {json.dumps(str(tmp / 'pool.sqlite'))}\n"
                            f"catalog = {json.dumps(str(tmp / 'corpus' / 'catalog.json'))}", config)
            config = config.replace("[propose]\n", "[propose]\nexclude_sets = "
                                    + json.dumps(str(tmp / "corpus" / "heldout" / "api_sets.txt")) + "\n", 1)
            config = re.sub(r'(?m)^tasks = \["examples/known_good/tasks"\]$',
                            "tasks = [" + json.dumps(str(tmp / "corpus" / "heldout")) + "]", config)
            config = re.sub(r"(?ms)^\[sft\].*?(?=^\[|\Z)", "", config)
            config += (f'\n[sft]\ndata = {json.dumps(str(tmp / "corpus" / "train.jsonl"))}\n'
                       f'eval_data = {json.dumps(str(tmp / "corpus" / "heldout.jsonl"))}\nbatch_size = 2\nmax_tokens = 8192\n')
            (tmp / "run.toml").write_text(config)
            run("train", "--config", str(tmp / "run.toml"), "--out", str(tmp / "run"))

            metrics = lines(tmp / "run" / "metrics.jsonl")
            self.assertEqual(len(metrics), 1)
            m = metrics[0]
            self.assertEqual(m["warm_start"]["pairs"], corpus["train_pairs"], m["warm_start"])
            self.assertGreater(m["warm_start"]["steps"], 0)
            # The held-out tasks' teacher pairs, never trained on, measured after the SFT's epoch.
            self.assertEqual(len(lines(tmp / "corpus" / "heldout.jsonl")), corpus["heldout_pairs"])
            self.assertEqual(len(m["warm_start"]["held_out_loss"]), 1, m["warm_start"])
            self.assertGreater(m["warm_start"]["held_out_loss"][0], 0)
            self.assertTrue(m["coder"]["steps"], "no CA-GRPO step")
            self.assertEqual(m["eval"]["tasks"], corpus["heldout_tasks"])
            verdicts = lines(next((tmp / "run" / "eval").iterdir()) / "verdicts.jsonl")
            self.assertEqual(len(verdicts), corpus["heldout_tasks"])
            self.assertTrue(all(v["status"] != "infra_error" for v in verdicts), verdicts)
            proposed = [json.loads(t) for t in run("tasks", "list", "--store", str(tmp / "pool.sqlite"), "--json",
                                                   "--limit", "100000").splitlines()]
            proposed = [t for t in proposed if t["origin"] != "corpus"]
            self.assertTrue(proposed, "the run proposed nothing")
            for t in proposed:
                self.assertTrue(set(t["apis"]) <= families, t)
                self.assertNotIn(",".join(sorted(set(t["apis"]))), heldout_sets, t)


if __name__ == "__main__":
    unittest.main()
