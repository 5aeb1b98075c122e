"""`kernelzero teach` end to end: every candidate the teacher writes for a valid task is judged
correct by the verifier, for every operator it supports and for sampled draws of both levels; the
fused quality launches fewer kernels where it fuses; the draws depend on the seed alone. Then
`kernelzero corpus` on the sampled run, and `kernelzero proposer-pairs` on that corpus."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

BINARY = os.environ.get("KZ_BINARY", "build/kernelzero")
DEVICE = os.environ.get("KZ_TEACH_DEVICE", "cpu")
SIZES = "typical" if DEVICE.startswith("cuda") else "small"


def teach(out, *args):
    cmd = [BINARY, "teach", "--out", str(out), "--device", DEVICE, "--sizes", SIZES, "--no-progress", "--json", *args]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=1500)
    if run.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {run.returncode}:\n{run.stdout}\n{run.stderr}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def lines(path):
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]


class Teach(unittest.TestCase):
    def assert_all_correct(self, out):
        verdicts = {v["id"]: v for v in lines(out / "verdicts.jsonl")}
        jobs = lines(out / "jobs.jsonl")
        self.assertTrue(jobs)
        wrong = [(j["id"], verdicts.get(j["id"], {}).get("status"), verdicts.get(j["id"], {}).get("reason", "")[:200])
                 for j in jobs if verdicts.get(j["id"], {}).get("status") != "correct"]
        self.assertEqual(wrong, [], "teacher candidates the verifier did not pass")

    def test_every_supported_operator(self):
        with tempfile.TemporaryDirectory() as d:
            out = Path(d)
            summary = teach(out, "--each-api")
            self.assert_all_correct(out)
            level = summary["levels"]["1"]
            # Every catalog API the teacher supports is one draw; all but a view (flatten) have arithmetic.
            self.assertGreaterEqual(level["valid"], 90)
            for quality in ("naive", "fused"):
                self.assertEqual(level[quality]["correct"], level["valid"], quality)

    def test_a_killed_run_keeps_its_validations(self):
        """validation.jsonl gains each module's record as it is validated: a run killed mid-validation
        keeps those, and a re-run into the directory takes them as they are and validates the rest."""
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp)
            args = ["--count", "40", "--seed", "5", "--no-verify", "--validation-workers", "1"]
            proc = subprocess.Popen([BINARY, "teach", "--out", str(out), "--device", DEVICE, "--sizes", SIZES,
                                     "--no-progress", *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            records = out / "validation.jsonl"
            deadline = time.monotonic() + 600
            while proc.poll() is None and time.monotonic() < deadline:
                if records.exists() and records.read_text().count("\n") >= 2:
                    break
                time.sleep(0.05)
            proc.kill()
            proc.wait()
            self.assertFalse((out / "draws.jsonl").exists(), "validation ended before the kill: nothing was tested")
            kept = lines(records)
            self.assertGreaterEqual(len(kept), 2)
            teach(out, *args)
            final = {r["key"]: r for r in lines(records)}
            self.assertGreater(len(final), len(kept))
            for r in kept:
                self.assertEqual(final[r["key"]], r, "a record of the killed run was validated again")

    def test_sampled_draws_and_fusion(self):
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "a"
            summary = teach(out, "--count", "60", "--seed", "3")
            self.assert_all_correct(out)
            draws = lines(out / "draws.jsonl")
            self.assertEqual(len(draws), 60)
            self.assertEqual({draw["level"] for draw in draws}, {1, 2})
            written = [draw for draw in draws if "unsupported" not in draw and draw["valid"]]
            self.assertTrue(any(draw["level"] == 2 for draw in written), "no level-2 draw written")
            for draw in written:
                self.assertLessEqual(draw["kernels"]["fused"], draw["kernels"]["naive"], draw["name"])
            self.assertTrue(any(draw["kernels"]["fused"] < draw["kernels"]["naive"] for draw in written),
                            "nothing fused")
            for level in summary["levels"].values():
                self.assertEqual(level["fused"]["correct"], level["valid"])
            self.check_corpus(out, Path(tmp) / "corpus", written)
            self.check_proposer_pairs(Path(tmp) / "corpus")
            # The same seed draws the same tasks and writes the same candidates.
            again = Path(tmp) / "b"
            teach(again, "--count", "60", "--seed", "3", "--no-verify")
            self.assertEqual((out / "draws.jsonl").read_text(), (again / "draws.jsonl").read_text())
            for draw in written:
                for sub in ("tasks", "naive", "fused"):
                    f = f"{sub}/{draw['name']}.py"
                    self.assertEqual((out / f).read_text(), (again / f).read_text(), f)
            self.check_one_quality_per_task(Path(tmp) / "share", written)
            # A re-run into the same directory takes each module's validity from validation.jsonl
            # instead of validating it again: a planted verdict there is what it reports.
            cache = lines(again / "validation.jsonl")
            self.assertEqual(len(cache), sum("unsupported" not in d for d in draws))
            (again / "validation.jsonl").write_text(
                "".join(json.dumps({**c, "valid": False, "reason": "planted"}) + "\n" for c in cache))
            teach(again, "--count", "60", "--seed", "3", "--no-verify")
            rerun = [d for d in lines(again / "draws.jsonl") if "unsupported" not in d]
            self.assertTrue(rerun and all(d["invalid_reason"] == "planted" for d in rerun))
            # A re-run verifies again only the jobs whose verdict judged something else than the job is
            # now (here: a digest changed as if the teacher had written another candidate), in place.
            verdicts = lines(out / "verdicts.jsonl")
            self.assertTrue(all(len(v["job_digest"]) == 64 for v in verdicts))
            stale = verdicts[0]["id"]
            (out / "verdicts.jsonl").write_text("".join(
                json.dumps({**v, "job_digest": "0" * 64} if v["id"] == stale else v) + "\n" for v in verdicts))
            teach(out, "--count", "60", "--seed", "3")
            again_verdicts = lines(out / "verdicts.jsonl")
            self.assertEqual(sorted(v["id"] for v in again_verdicts), sorted(v["id"] for v in verdicts))
            self.assertEqual([v for v in again_verdicts if v["id"] != stale], [v for v in verdicts if v["id"] != stale])
            redone = next(v for v in again_verdicts if v["id"] == stale)
            self.assertEqual(redone["job_digest"], verdicts[0]["job_digest"])
            self.assertEqual(redone["status"], "correct")

    def check_one_quality_per_task(self, out, written):
        """--fused-share: the same draws, one candidate each (the fused one for about that share), the
        same text as a run of both qualities writes; one job per task."""
        summary = teach(out, "--count", "60", "--seed", "3", "--no-verify", "--fused-share", "0.25")
        draws = {d["name"]: d for d in lines(out / "draws.jsonl") if "unsupported" not in d and d["valid"]}
        self.assertEqual(sorted(draws), sorted(d["name"] for d in written))
        chosen = {name: next(iter(d["kernels"])) for name, d in draws.items()}
        self.assertTrue(all(len(d["kernels"]) == 1 for d in draws.values()), draws)
        fused = sum(q == "fused" for q in chosen.values())
        self.assertTrue(0 < fused < len(chosen) / 2, chosen)
        jobs = lines(out / "jobs.jsonl")
        self.assertEqual(sorted(j["id"] for j in jobs), sorted(f"{q}/{name}" for name, q in chosen.items()))
        both = out.parent / "a"
        for name, q in chosen.items():
            self.assertEqual((out / q / f"{name}.py").read_text(), (both / q / f"{name}.py").read_text())
            other = "naive" if q == "fused" else "fused"
            self.assertFalse((out / other / f"{name}.py").exists())
        self.assertEqual(sum(level.get("fused", {}).get("written", 0) for level in summary["levels"].values()), fused)
        self.assertEqual(sum(level.get("naive", {}).get("written", 0) for level in summary["levels"].values()),
                         len(chosen) - fused)
        clash = subprocess.run([BINARY, "teach", "--out", str(out), "--fused-share", "0.25", "--quality", "naive"],
                               capture_output=True, text=True, timeout=60)
        self.assertEqual(clash.returncode, 2, clash.stderr)
        self.assertIn("--quality", clash.stderr)

    def check_corpus(self, teach_dir, out, written):
        """kernelzero corpus: pairs in the SFT format whose answers are the verified candidates, and a
        held-out set that shares no API set with them."""
        run = subprocess.run([BINARY, "corpus", "--from", str(teach_dir), "--out", str(out), "--heldout", "0.3",
                              "--fused", "0.5"], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        summary = json.loads((out / "corpus.json").read_text())
        pairs = lines(out / "train.jsonl")
        heldout = sorted(p.stem for p in (out / "heldout").glob("*.py"))
        self.assertEqual(len(pairs), summary["train_pairs"])
        self.assertEqual(len(heldout), summary["heldout_tasks"])
        self.assertTrue(pairs and heldout)
        by_name = {d["name"]: d for d in written}
        heldout_sets = {",".join(sorted(set(by_name[n]["apis"]))) for n in heldout}
        self.assertEqual(heldout_sets, set(summary["heldout_api_sets"]))
        for p in pairs:
            self.assertNotIn(",".join(sorted(set(p["apis"]))), heldout_sets, p["task"])
            self.assertEqual([m["role"] for m in p["prompt"]], ["system", "user"])
            self.assertIn((teach_dir / "tasks" / f"{p['task']}.py").read_text(), p["prompt"][1]["content"])
            candidate = (teach_dir / p["quality"] / f"{p['task']}.py").read_text()
            self.assertEqual(p["completion"], "```python\n" + candidate + "```")
        self.assertEqual({p["quality"] for p in pairs}, {"naive", "fused"})
        # The held-out tasks' pairs (the SFT's held-out loss): one a held-out task, as the training ones.
        held_pairs = lines(out / "heldout.jsonl")
        self.assertEqual(sorted(p["task"] for p in held_pairs), heldout)
        self.assertEqual(len(held_pairs), summary["heldout_pairs"])
        for p in held_pairs:
            self.assertIn((out / "heldout" / f"{p['task']}.py").read_text(), p["prompt"][1]["content"])
            candidate = (teach_dir / p["quality"] / f"{p['task']}.py").read_text()
            self.assertEqual(p["completion"], "```python\n" + candidate + "```")
        self.assertEqual(len(pairs) + len(heldout) + sum(summary["dropped"].values()), summary["verified_tasks"])
        taught = {a for p in pairs for a in p["apis"]}
        unseen = {}
        for n in heldout:
            for a in set(by_name[n]["apis"]) - taught:
                unseen[a] = unseen.get(a, 0) + 1
        self.assertEqual(summary["unseen_operators"], unseen)
        # Held out at level 2 only, all of it: every level-2 task is held out and every level-1 task
        # trained on, but for repeats and near duplicates.
        level2 = out.parent / (out.name + "-level2")
        run = subprocess.run([BINARY, "corpus", "--from", str(teach_dir), "--out", str(level2), "--heldout", "1",
                              "--heldout-levels", "2"], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        held = [m["level"] for m in lines(level2 / "heldout" / "manifest.jsonl")]
        trained = [m["level"] for m in lines(level2 / "train_tasks" / "manifest.jsonl")]
        dropped = json.loads((level2 / "corpus.json").read_text())["dropped"]
        self.assertEqual(set(held), {2})
        self.assertEqual(set(trained), {1})
        self.assertEqual(len(held) + len(trained) + sum(dropped.values()), len(written))
        # Held out among the short API sets only (here: one operator), the longer ones all trained on.
        short = out.parent / (out.name + "-short")
        run = subprocess.run([BINARY, "corpus", "--from", str(teach_dir), "--out", str(short), "--heldout", "1",
                              "--heldout-max-apis", "1"], capture_output=True, text=True, timeout=300)
        self.assertEqual(run.returncode, 0, run.stderr)
        held = lines(short / "heldout" / "manifest.jsonl")
        trained = lines(short / "train_tasks" / "manifest.jsonl")
        self.assertTrue(held and all(len(set(m["apis"])) == 1 for m in held), held)
        self.assertTrue(trained and all(len(set(m["apis"])) > 1 for m in trained), trained)
        bad = subprocess.run([BINARY, "corpus", "--from", str(out), "--out", str(out / "x")], capture_output=True,
                             text=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("not the output of kernelzero teach", bad.stderr)

    def check_proposer_pairs(self, corpus):
        """kernelzero proposer-pairs: the symbolic generator's modules as Proposer pairs in proposer.jsonl's
        format, never of a held-out API set, the same for the same seed; modules that run."""
        def draw(out, *args, corpus=corpus):
            run = subprocess.run([BINARY, "proposer-pairs", "--corpus", str(corpus), "--out", str(out), "--sizes",
                                  "small", "--json", *args], capture_output=True, text=True, timeout=300)
            self.assertEqual(run.returncode, 0, run.stderr)
            return json.loads(run.stdout)

        out = corpus.parent / "drawn.jsonl"
        summary = draw(out, "--n", "40", "--level", "2", "--max-apis", "3", "--seed", "7")
        pairs = lines(out)
        self.assertEqual((len(pairs), summary["pairs"]), (40, 40))
        heldout = set((corpus / "heldout" / "api_sets.txt").read_text().split())
        system = lines(corpus / "proposer.jsonl")[0]["prompt"][0]
        sizes = {}
        for p in pairs:
            distinct = sorted(set(p["apis"]))
            sizes[len(distinct)] = sizes.get(len(distinct), 0) + 1
            self.assertNotIn(",".join(distinct), heldout, p["task"])
            self.assertEqual(p["prompt"][0], system)
            for api in p["apis"]:
                self.assertIn(f"- {api} (", p["prompt"][1]["content"])
            self.assertTrue(p["completion"].startswith("```python\n") and p["completion"].endswith("```"))
        self.assertEqual(set(sizes), {2, 3})
        self.assertEqual(summary["by_apis"], {str(k): v for k, v in sizes.items()})
        self.assertEqual(len({p["completion"] for p in pairs}), 40, "a module written twice")
        # The generator's modules, not validated: they run (forward on get_inputs) but for a few.
        import torch
        ran = 0
        for p in pairs:
            scope = {}
            exec(compile(p["completion"][len("```python\n"):-len("```")], p["task"], "exec"), scope)
            try:
                with torch.no_grad():
                    scope["Model"](*scope["get_init_inputs"]())(*scope["get_inputs"]())
                ran += 1
            except Exception:  # noqa: BLE001 - counted: the share that runs is the check
                pass
        self.assertGreaterEqual(ran, 36, f"{ran} of 40 modules run")
        # The same seed writes the same pairs; another seed others.
        again = corpus.parent / "drawn-again.jsonl"
        draw(again, "--n", "40", "--level", "2", "--max-apis", "3", "--seed", "7")
        self.assertEqual(again.read_text(), out.read_text())
        draw(again, "--n", "40", "--level", "2", "--max-apis", "3", "--seed", "8")
        self.assertNotEqual(again.read_text(), out.read_text())
        # A pair of one operator has the prompt the corpus's pair of that operator has.
        draw(again, "--n", "30", "--level", "1", "--seed", "7")
        corpus_prompts = {tuple(p["apis"]): p["prompt"] for p in lines(corpus / "proposer.jsonl")}
        shared = [p for p in lines(again) if tuple(p["apis"]) in corpus_prompts]
        self.assertTrue(shared, "no operator in both")
        for p in shared:
            self.assertEqual(p["prompt"], corpus_prompts[tuple(p["apis"])])
        # Held-out sets are drawn again: with the sets of the first draw held out, none of them comes.
        fenced = corpus.parent / "corpus-fenced"
        shutil.copytree(corpus, fenced)
        drawn = {",".join(sorted(set(p["apis"]))) for p in pairs}
        (fenced / "heldout" / "api_sets.txt").write_text("\n".join(sorted(drawn | heldout)) + "\n")
        summary = draw(again, "--n", "40", "--level", "2", "--max-apis", "3", "--seed", "7", corpus=fenced)
        self.assertGreater(summary["redrawn"]["held_out"], 0)
        self.assertFalse(drawn & {",".join(sorted(set(p["apis"]))) for p in lines(again)})
        # Not a corpus: refused, naming why.
        bad = subprocess.run([BINARY, "proposer-pairs", "--corpus", str(corpus / "heldout"), "--out", str(again),
                              "--n", "3"], capture_output=True, text=True, timeout=60)
        self.assertEqual(bad.returncode, 2)
        self.assertIn("not the output of kernelzero corpus", bad.stderr)


if __name__ == "__main__":
    unittest.main()
