"""scripts/learning_session.sh's carried build (KZ_LEARN_PACK_BIN): a call packs the binary it built
with the stamp of what it was built from, and a later call runs a carried one only where that stamp is
its own, building again where a source changed or the binary does not run. The build is a stand-in
scripts/gpu_test.sh that counts its calls, in a copy of the scripts under a temporary checkout. And its
stages: those joined by a comma run at once, the next after all of them; the stages are a stand-in
scripts/learning_experiment.sh."""
import shutil
import subprocess
import tarfile
import tempfile
import unittest
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"

# Writes a kernelzero that answers `info` unless the checkout holds a file named "broken".
FAKE_BUILD = """#!/usr/bin/env bash
cd "$(dirname "$0")/.."
mkdir -p "$1"
echo build >> build-calls
printf '#!/bin/sh\\n[ -f broken ] && exit 1\\necho kernelzero\\n' > "$1/kernelzero"
chmod +x "$1/kernelzero"
"""


class SessionCheckout(unittest.TestCase):
    """A temporary checkout with the session's scripts copied in, and stand-ins written beside them."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = Path(self.tmp.name) / "checkout"
        (self.root / "scripts").mkdir(parents=True)
        for name in ("learning_session.sh", "gpu_deps.sh"):
            shutil.copy(SCRIPTS / name, self.root / "scripts" / name)

    def tearDown(self):
        self.tmp.cleanup()


class CarriedBuild(SessionCheckout):
    def setUp(self):
        super().setUp()
        (self.root / "scripts" / "gpu_test.sh").write_text(FAKE_BUILD)
        (self.root / "engine").mkdir()
        (self.root / "engine" / "model.cpp").write_text("int f() { return 1; }\n")
        self.calls = 0

    def session(self):
        """One call with no stages; its session log and whether it built."""
        self.calls += 1
        out = Path(self.tmp.name) / f"out{self.calls}"
        run = subprocess.run(["bash", "scripts/learning_session.sh", "60"], cwd=self.root, capture_output=True,
                             text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "OUT": str(out),
                                                         "KZ_LEARN_DIR": "runs/learning", "KZ_LEARN_PACK_BIN": "1"})
        self.assertEqual(run.returncode, 0, run.stdout + run.stderr)
        return (out / "session.log").read_text(), out / "kernelzero.tgz"

    def builds(self):
        calls = self.root / "build-calls"
        return len(calls.read_text().split()) if calls.exists() else 0

    def carry(self, pack):
        """A fresh machine's build-gpu: only the packed build, as a carry of build-gpu brings it."""
        shutil.rmtree(self.root / "build-gpu")
        (self.root / "build-gpu").mkdir()
        shutil.copy(pack, self.root / "build-gpu" / "kernelzero.tgz")

    def test_a_carried_build_runs_only_where_its_stamp_is_the_calls_own(self):
        log, pack = self.session()
        self.assertIn("built", log)
        self.assertEqual(self.builds(), 1)
        with tarfile.open(pack) as t:
            self.assertEqual(sorted(t.getnames()), ["kernelzero", "kernelzero.stamp"])
            stamp = t.extractfile("kernelzero.stamp").read().decode().strip()
        self.assertRegex(stamp, r"^[0-9a-f]{16}$")

        self.carry(pack)
        log, _ = self.session()
        self.assertIn(f"carried build {stamp} used", log)
        self.assertEqual(self.builds(), 1)
        self.assertFalse((self.root / "build-gpu" / "kernelzero.tgz").exists())

        # A changed source: the carried build is not this call's.
        self.carry(pack)
        (self.root / "engine" / "model.cpp").write_text("int f() { return 2; }\n")
        log, changed = self.session()
        self.assertIn(f"carried build {stamp} is not this call's", log)
        self.assertEqual(self.builds(), 2)
        with tarfile.open(changed) as t:
            self.assertNotEqual(t.extractfile("kernelzero.stamp").read().decode().strip(), stamp)

        # The sources as they were, but a binary that does not run here.
        (self.root / "engine" / "model.cpp").write_text("int f() { return 1; }\n")
        self.carry(pack)
        (self.root / "broken").touch()
        log, _ = self.session()
        self.assertIn(f"carried build {stamp} does not run here", log)
        self.assertEqual(self.builds(), 3)


# Records each stage's arguments as it starts and ends; a stage named in a file fail-NAME exits 3. sft
# ends only once proposer has started: it fails (4) unless the two run at once.
FAKE_EXPERIMENT = """#!/usr/bin/env bash
cd "$(dirname "$0")/.."
echo "start $*" >> stages
[[ -f fail-$1 ]] && { echo "$1 failed"; exit 3; }
if [[ $1 == sft ]]; then
  for _ in $(seq 50); do grep -q "start proposer" stages && break; sleep 0.1; done
  grep -q "start proposer" stages || exit 4
fi
echo "end $*" >> stages
echo "$1 done"
"""


class Stages(SessionCheckout):
    def setUp(self):
        super().setUp()
        (self.root / "scripts" / "learning_experiment.sh").write_text(FAKE_EXPERIMENT)

    def session(self, *stages):
        """One call of the stages; its exit status, its session log and what the stages recorded."""
        out = Path(self.tmp.name) / "out"
        shutil.rmtree(out, ignore_errors=True)
        run = subprocess.run(["bash", "scripts/learning_session.sh", "60", *stages], cwd=self.root,
                             capture_output=True, text=True, timeout=60,
                             env={"PATH": "/usr/bin:/bin", "OUT": str(out), "KZ_LEARN_DIR": "runs/learning",
                                  "KZ_BIN": "/bin/true"})
        stages_file = self.root / "stages"
        recorded = stages_file.read_text().splitlines() if stages_file.exists() else []
        stages_file.unlink(missing_ok=True)
        return run.returncode, (out / "session.log").read_text(), recorded

    def test_stages_joined_by_a_comma_run_at_once_and_the_next_waits_for_both(self):
        rc, log, recorded = self.session("sft,proposer", "arm:C:1:kl=k3+")
        self.assertEqual(rc, 0, log)
        self.assertEqual(recorded.index("start arm C 1 kl=k3+"), 4, recorded)  # after both ended
        self.assertEqual(set(recorded[:4]), {"start sft", "start proposer", "end sft", "end proposer"})
        for line in ("sft: exit 0", "proposer: exit 0", "arm:C:1:kl=k3+: exit 0"):
            self.assertIn(line, log)

        # One stage alone: sft waits for a proposer that never starts.
        rc, log, _ = self.session("sft")
        self.assertEqual(rc, 4, log)

    def test_a_failed_stage_of_a_joined_pair_stops_the_call_after_the_pair(self):
        (self.root / "fail-proposer").touch()
        rc, log, recorded = self.session("sft,proposer", "arm:C:1")
        self.assertEqual(rc, 3, log)
        self.assertIn("sft: exit 0", log)
        self.assertIn("proposer: exit 3", log)
        self.assertNotIn("start arm C 1", recorded)


if __name__ == "__main__":
    unittest.main()
