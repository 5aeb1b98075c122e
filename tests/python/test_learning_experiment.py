"""scripts/learning_experiment.sh's arm and seen stages resume a result only over the models it was
made over: every arm's over the same SFT Coder, arm D's over the same SFT Proposer too (their
fingerprints in RESULT.base), the seen stage of an arm's run over its Coder; and its proposer stage
samples the SFT Proposer's modules. The binary is a stand-in, in a copy of the script under a
temporary checkout. And scripts/learning/unpack.sh, which unpacks the committed archives for it and
the session."""
import json
import shutil
import subprocess
import tarfile
import tempfile
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


class Checkout(unittest.TestCase):
    """A copy of the script and what it reads under a temporary checkout, with both SFT models in place
    and a stand-in binary (BIN: one that does nothing unless a test class says otherwise)."""
    BIN = "#!/bin/sh\nexit 0\n"

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name) / "checkout"
        (self.root / "scripts" / "learning").mkdir(parents=True)
        shutil.copy(SCRIPTS / "learning_experiment.sh", self.root / "scripts")
        for name in ("arm.toml", "proposals.py"):
            shutil.copy(SCRIPTS / "learning" / name, self.root / "scripts" / "learning")
        self.bin = Path(self.tmp.name) / "kernelzero"
        self.bin.write_text(self.BIN)
        self.bin.chmod(0o755)
        self.dir = self.root / "runs" / "learning"
        for model, weights in (("sft", "coder"), ("proposer_sft", "proposer")):
            (self.dir / model / "model").mkdir(parents=True)
            (self.dir / model / "model" / "model.safetensors").write_text(weights)
        (self.dir / "proposer_sft" / "draws").write_text("0\n")  # on the corpus's pairs alone
        (self.dir / "pool.sqlite").write_text("")

    def tearDown(self):
        self.tmp.cleanup()

    def stage(self, *args, env=None):
        return subprocess.run(["bash", "scripts/learning_experiment.sh", *args], cwd=self.root,
                              capture_output=True, text=True, timeout=60,
                              env={"PATH": "/usr/bin:/bin", "KZ_BIN": str(self.bin), **(env or {})})

    def calls(self):
        """The stand-in's arguments, one list a call (a stand-in that records them)."""
        path = Path(str(self.bin) + ".calls")
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


class SameModels(Checkout):
    def arm(self, *args):
        return self.stage("arm", *args)

    def base(self, run):
        return (self.dir / f"{run}.base").read_text().split()

    def test_arm_d_resumes_over_the_same_coder_and_proposer_only(self):
        first = self.arm("D", "1")
        self.assertEqual(first.returncode, 0, first.stdout + first.stderr)
        coder, proposer = self.base("arm-D-seed1")
        self.assertRegex(coder, r"^[0-9a-f]{16}$")
        self.assertNotEqual(coder, proposer)
        self.assertEqual(self.arm("D", "1").returncode, 0)

        # B and C load no Proposer: the Coder's fingerprint alone, the one arm D's starts with.
        self.assertEqual(self.arm("C", "1").returncode, 0)
        self.assertEqual(self.base("arm-C-seed1"), [coder])

        # Another Proposer (rebuilt on another kind of GPU): D is refused, C still resumes.
        (self.dir / "proposer_sft" / "model" / "model.safetensors").write_text("another proposer")
        refused = self.arm("D", "1")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("made over another SFT Coder and Proposer", refused.stderr)
        self.assertIn(f"fingerprint {coder} {proposer}, now {coder} ", refused.stderr)
        self.assertEqual(self.arm("C", "1").returncode, 0)

        # Another Coder: both refused.
        (self.dir / "sft" / "model" / "model.safetensors").write_text("another coder")
        for arm in ("C", "D"):
            self.assertEqual(self.arm(arm, "1").returncode, 2, arm)

    def test_seen_stage_of_arm_d_checks_the_coder_alone(self):
        self.assertEqual(self.arm("D", "1").returncode, 0)
        coder, _ = self.base("arm-D-seed1")
        (self.dir / "arm-D-seed1" / "checkpoints" / "iter-000014" / "coder" / "adapter").mkdir(parents=True)
        (self.dir / "corpus" / "train_tasks").mkdir(parents=True)
        (self.dir / "corpus" / "train_tasks" / "task_00000.py").write_text("")

        # The seen stage loads the Coder and its adapter, never the Proposer, which may be absent.
        shutil.rmtree(self.dir / "proposer_sft")
        seen = self.stage("seen", "arm-D-seed1")
        self.assertEqual(seen.returncode, 0, seen.stdout + seen.stderr)
        self.assertEqual(self.base("arm-D-seed1/seen-iter-000014"), [coder])

        (self.dir / "sft" / "model" / "model.safetensors").write_text("another coder")
        refused = self.stage("seen", "arm-D-seed1")
        self.assertEqual(refused.returncode, 2)
        self.assertIn(f"made over another SFT Coder (fingerprint {coder}, now ", refused.stderr)

    def test_the_proposers_temperature_is_arm_ds(self):
        made = self.arm("D", "1", "temp=0.7", "ptemp=0.5")
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        toml = (self.dir / "arm-D-seed1-temp0.7-ptemp0.5.toml").read_text()
        self.assertIn("\ntemperature = 0.5\nlevels = [1, 2]\n", toml)  # [propose]
        self.assertIn("\ntemperature = 0.7\nreplay = 16\n", toml)  # [coder_phase]
        self.assertNotIn("@", toml)
        self.assertEqual(self.arm("D", "1").returncode, 0)
        self.assertIn("\ntemperature = 1.0\nlevels = [1, 2]\n", (self.dir / "arm-D-seed1.toml").read_text())

        refused = self.arm("C", "1", "ptemp=0.5")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("ptemp is the Proposer's sampling temperature: arm D only", refused.stderr)
        for bad in ("ptemp=0", "ptemp=warm"):
            refused = self.arm("D", "1", bad)
            self.assertEqual(refused.returncode, 2, bad)
            self.assertIn(f"{bad} is not a number above 0", refused.stderr)

    def test_arm_ds_run_is_named_for_its_proposers_drawn_pairs(self):
        (self.dir / "proposer_sft" / "draws").write_text("6000\n")
        made = self.arm("D", "1", "temp=0.7")
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        self.assertTrue((self.dir / "arm-D-seed1-temp0.7-pdraws6000.toml").exists())
        self.assertFalse((self.dir / "arm-D-seed1-temp0.7.toml").exists())
        # Given, it is checked and names the run where it stands: the table's command makes the same run.
        self.assertEqual(self.arm("D", "1", "temp=0.7", "pdraws=6000").returncode, 0)
        self.assertEqual(sorted(p.name for p in self.dir.glob("arm-D-*.toml")), ["arm-D-seed1-temp0.7-pdraws6000.toml"])
        for given in ("pdraws=0", "pdraws=600", "pdraws=many"):
            refused = self.arm("D", "1", given)
            self.assertEqual(refused.returncode, 2, given)
            self.assertIn(f"{given}: the SFT Proposer was trained on 6000 drawn pairs", refused.stderr)
        refused = self.arm("C", "1", "pdraws=6000")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("pdraws is the drawn pairs of arm D's Proposer: arm D only", refused.stderr)
        # A Proposer that does not say (made before the proposer stage recorded its draws).
        (self.dir / "proposer_sft" / "draws").unlink()
        refused = self.arm("D", "1")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("does not say how many drawn pairs it was trained on", refused.stderr)

    def test_arm_d_needs_the_proposer(self):
        shutil.rmtree(self.dir / "proposer_sft")
        refused = self.arm("D", "1")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("arm D needs the SFT Proposer", refused.stderr)
        self.assertFalse((self.dir / "arm-D-seed1.base").exists())


# A stand-in for `kernelzero propose`: it records its arguments and stores, in the --store it is given,
# a valid module of one operator and a module of two that the validator turned down, cut inside a
# character as a completion that ran out of tokens is, as the command does; every other command does
# nothing.
RECORD = """#!/usr/bin/env python3
import json, sys
with open(sys.argv[0] + ".calls", "a") as f:
    f.write(json.dumps(sys.argv[1:]) + "\\n")
"""


class Deadline(Checkout):
    """An arm's trainer is told the session's deadline (KZ_LEARN_DEADLINE, learning_session.sh)."""
    BIN = RECORD

    def test_the_trainer_gets_the_deadline_where_one_is_set(self):
        for env, given in (({"KZ_LEARN_DEADLINE": "1765130000"}, ["--deadline", "1765130000"]), ({}, [])):
            made = self.stage("arm", "C", "1", env=env)
            self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
            train = [c for c in self.calls() if c[0] == "train"][-1]
            self.assertEqual(train[train.index("--out") + 2:], given)


class ArmA(Checkout):
    """The sft stage benches arm A over its Coder in every call, resumed: bench itself checks the run
    against arm-A/run.json and loads the Coder only for a completion it lacks (tests/cli BenchTiny*)."""
    BIN = RECORD

    def test_arm_a_is_resumed_by_bench_and_refused_over_another_coder(self):
        for calls in (1, 2):
            made = self.stage("sft")
            self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
            benches = [c for c in self.calls() if c[0] == "bench"]
            self.assertEqual(len(benches), calls)
            self.assertEqual(benches[-1][benches[-1].index("--out") + 1], str(self.dir / "arm-A"))
            self.assertIn("--resume", benches[-1])
            # Finished (metrics.json is bench's last write): benched again all the same.
            (self.dir / "arm-A").mkdir(exist_ok=True)
            (self.dir / "arm-A" / "metrics.json").write_text("{}")
        # Over another Coder it is refused before bench runs.
        (self.dir / "sft" / "model" / "model.safetensors").write_text("another coder")
        refused = self.stage("sft")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("arm-A was made over another SFT Coder", refused.stderr)
        self.assertEqual(len([c for c in self.calls() if c[0] == "bench"]), 2)


PROPOSE = """#!/usr/bin/env python3
import json, sqlite3, sys
args = sys.argv[1:]
if args[:1] != ["propose"]:
    sys.exit(0)
with open(sys.argv[0] + ".calls", "a") as f:
    f.write(json.dumps(args) + "\\n")
db = sqlite3.connect(args[args.index("--store") + 1])
db.execute("CREATE TABLE IF NOT EXISTS tasks (id INTEGER PRIMARY KEY, source TEXT, apis TEXT, level INTEGER, "
           "origin TEXT, valid INTEGER, reason TEXT)")
db.execute("INSERT INTO tasks (source, apis, level, origin, valid, reason) VALUES "
           "('taught', '[\\"relu\\"]', 1, 'corpus', 1, ''), ('m1', '[\\"relu\\"]', 1, 'proposer', 1, ''), "
           "(CAST(X'6d32e282' AS TEXT), '[\\"relu\\", \\"tanh\\"]', 2, 'proposer', 0, 'runs: eager forward failed')")
db.commit()
print(json.dumps({"proposed": 2, "valid": 1, "failed_checks": {"runs": 1}}))
"""


class Proposals(Checkout):
    """The proposer stage ends with the SFT Proposer's modules at temperatures 1 and 0.7, drawn from the
    teacher's families and validated against a copy of the training pool; each lands in
    proposals-tT/ with the command's summary and the Proposer's modules alone."""
    BIN = PROPOSE

    def stage(self, *args, env=None):
        # The checkout's Proposer, trained on the corpus's pairs alone: the stage finds it made.
        return super().stage(*args, env={"KZ_LEARN_PROPOSER_DRAWS": "0", **(env or {})})

    def test_the_proposer_stage_samples_at_1_and_0_7(self):
        made = self.stage("proposer")
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        self.assertIn("SFT Proposer at temperature 0.7: 1 of 2 modules valid, turned down by check: {\"runs\": 1}",
                      made.stdout)
        calls = self.calls()
        self.assertEqual([c[c.index("--temperature") + 1] for c in calls], ["1", "0.7"])
        for c in calls:
            self.assertEqual(c[c.index("--catalog") + 1], str(self.dir / "corpus" / "catalog.json"))
            self.assertEqual(c[c.index("--n") + 1], "64")
            self.assertEqual(c[c.index("--model") + 1], str(self.dir / "proposer_sft" / "model"))
        for t in ("1", "0.7"):
            out = self.dir / f"proposals-t{t}"
            self.assertEqual(sorted(p.name for p in out.iterdir()), ["proposals.jsonl", "summary.json"])
            modules = [json.loads(line) for line in (out / "proposals.jsonl").read_text().splitlines()]
            self.assertEqual([(m["apis"], m["valid"], m["reason"], m["source"]) for m in modules],
                             [(["relu"], True, "", "m1"),
                              (["relu", "tanh"], False, "runs: eager forward failed", "m2\ufffd")])
            # The pool the store was copied from is left as it was.
            self.assertEqual((self.dir / "pool.sqlite").read_text(), "")

        # Done once: a second call samples nothing; the stage alone samples at the temperature it is given.
        self.assertEqual(self.stage("proposer").returncode, 0)
        self.assertEqual(len(self.calls()), 2)
        self.assertEqual(self.stage("proposals", "0.5").returncode, 0)
        self.assertEqual(self.calls()[-1][self.calls()[-1].index("--temperature") + 1], "0.5")
        refused = self.stage("proposals", "warm")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("the temperature is not a number", refused.stderr)

    def test_a_failed_sample_leaves_the_proposer_to_arm_d(self):
        self.bin.write_text("#!/bin/sh\n[ \"$1\" = propose ] && exit 3\nexit 0\n")
        made = self.stage("proposer")
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        self.assertIn("proposals at temperature 1 failed (exit 3)", made.stderr)
        self.assertIn("proposals at temperature 0.7 failed (exit 3)", made.stderr)
        self.assertFalse((self.dir / "proposals-t1").exists())


# A stand-in for `kernelzero proposer-pairs` and `sft`: it records its arguments; proposer-pairs writes
# two pairs to its --out, sft a model under its --out; every other command does nothing.
PAIRS = """#!/usr/bin/env python3
import json, os, sys
args = sys.argv[1:]
with open(sys.argv[0] + ".calls", "a") as f:
    f.write(json.dumps(args) + "\\n")
if args[0] == "proposer-pairs":
    with open(args[args.index("--out") + 1], "w") as f:
        f.write('{"task": "drawn_00000"}\\n{"task": "drawn_00001"}\\n')
elif args[0] == "sft":
    model = os.path.join(args[args.index("--out") + 1], "model")
    os.makedirs(model)
    with open(os.path.join(model, "model.safetensors"), "w") as f:
        f.write("proposer")
"""


class ProposerPairs(Checkout):
    """The Proposer's SFT trains on the corpus's pairs and the symbolic generator's, drawn once."""
    BIN = PAIRS

    def setUp(self):
        super().setUp()
        shutil.rmtree(self.dir / "proposer_sft")
        (self.dir / "corpus").mkdir()
        (self.dir / "corpus" / "proposer.jsonl").write_text('{"task": "task_00000"}\n')

    def made(self, command):
        return [c for c in self.calls() if c[0] == command]

    def test_the_generators_pairs_follow_the_corpuss(self):
        # Pairs of another Proposer's draws, left behind when its directory was moved away: drawn again.
        (self.dir / "proposer_pairs.jsonl").write_text('{"task": "drawn_for_another"}\n')
        made = self.stage("proposer")
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        [draw] = self.made("proposer-pairs")
        self.assertEqual([draw[draw.index(o) + 1] for o in ("--corpus", "--n", "--level", "--max-apis", "--seed")],
                         [str(self.dir / "corpus"), "6000", "2", "3", "1"])
        [sft] = self.made("sft")
        self.assertEqual(sft[sft.index("--config") + 1], "scripts/learning/proposer_sft.toml")
        data = Path(sft[sft.index("--data") + 1])
        self.assertEqual([json.loads(line)["task"] for line in data.read_text().splitlines()],
                         ["task_00000", "drawn_00000", "drawn_00001"])
        # Trained: a second call draws and trains nothing.
        self.assertEqual(self.stage("proposer").returncode, 0)
        self.assertEqual((len(self.made("proposer-pairs")), len(self.made("sft"))), (1, 1))

    def test_none_drawn_trains_on_the_corpuss_pairs(self):
        made = self.stage("proposer", env={"KZ_LEARN_PROPOSER_DRAWS": "0"})
        self.assertEqual(made.returncode, 0, made.stdout + made.stderr)
        self.assertEqual(self.made("proposer-pairs"), [])
        [sft] = self.made("sft")
        self.assertEqual(sft[sft.index("--data") + 1], str(self.dir / "corpus" / "proposer.jsonl"))
        self.assertEqual((self.dir / "proposer_sft" / "draws").read_text(), "0\n")

    def test_the_draws_are_the_proposers_and_a_resume_keeps_them(self):
        # An SFT interrupted before its model (the stand-in's sft stops as SIGINT's does): its draws stay.
        self.bin.write_text(PAIRS.replace('elif args[0] == "sft":', 'elif args[0] == "sft":\n    sys.exit(130)\nelif False:'))
        self.assertEqual(self.stage("proposer").returncode, 130)
        self.assertEqual((self.dir / "proposer_sft" / "draws").read_text(), "6000\n")
        refused = self.stage("proposer", env={"KZ_LEARN_PROPOSER_DRAWS": "0"})
        self.assertEqual(refused.returncode, 2)
        self.assertIn("was trained on 6000 drawn pairs, not KZ_LEARN_PROPOSER_DRAWS=0: move it away", refused.stderr)
        self.assertEqual(len(self.made("sft")), 1)
        refused = self.stage("proposer", env={"KZ_LEARN_PROPOSER_DRAWS": "six"})
        self.assertEqual(refused.returncode, 2)
        self.assertIn("KZ_LEARN_PROPOSER_DRAWS=six is not a whole number", refused.stderr)
        # A Proposer directory that does not say what it was trained on is not resumed over.
        (self.dir / "proposer_sft" / "draws").unlink()
        refused = self.stage("proposer")
        self.assertEqual(refused.returncode, 2)
        self.assertIn("does not say how many drawn pairs it was trained on", refused.stderr)

    def test_a_failed_draw_stops_the_stage_before_the_sft(self):
        self.bin.write_text("#!/bin/sh\n[ \"$1\" = proposer-pairs ] && exit 2\nexit 0\n")
        made = self.stage("proposer")
        self.assertEqual(made.returncode, 2)
        self.assertFalse((self.dir / "proposer_pairs.jsonl").exists())


class Unpack(unittest.TestCase):
    def test_tar_or_pythons_tarfile_and_a_missing_archive_named(self):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            (tmp / "corpus").mkdir()
            (tmp / "corpus" / "train.jsonl").write_text("{}\n")
            with tarfile.open(tmp / "corpus.tar.xz", "w:xz") as t:
                t.add(tmp / "corpus", arcname="corpus")
            # With tar, and with a PATH whose tar fails: Python's tarfile instead.
            fake = tmp / "bin"
            fake.mkdir()
            (fake / "tar").write_text("#!/bin/sh\nexit 2\n")
            (fake / "tar").chmod(0o755)
            for name, path in (("with-tar", "/usr/bin:/bin"), ("without", f"{fake}:/usr/bin:/bin")):
                out = tmp / name
                out.mkdir()
                run = subprocess.run(["bash", str(SCRIPTS / "learning" / "unpack.sh"), str(tmp / "corpus.tar.xz"),
                                      str(out)], capture_output=True, text=True, timeout=60, env={"PATH": path})
                self.assertEqual(run.returncode, 0, run.stderr)
                self.assertEqual((out / "corpus" / "train.jsonl").read_text(), "{}\n", name)
            missing = subprocess.run(["bash", str(SCRIPTS / "learning" / "unpack.sh"), str(tmp / "none.tar.xz"),
                                      str(tmp)], capture_output=True, text=True, timeout=60)
            self.assertEqual(missing.returncode, 2)
            self.assertIn("none.tar.xz: no such archive", missing.stderr)


if __name__ == "__main__":
    unittest.main()
