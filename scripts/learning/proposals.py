"""The SFT Proposer's modules as `kernelzero propose` stored them (the `proposals` stage of
scripts/learning_experiment.sh): one JSON line per module the Proposer wrote, in the order it wrote
them, with its API set, level, whether it passed validation and, where not, the check that turned it
down. The store is a copy of the training pool, so its corpus tasks are left out; the lines are what
the stage brings back (a store is never packed with the results).

Usage: python3 proposals.py STORE OUT_JSONL"""
import json
import sqlite3
import sys


def main(store, out):
    db = sqlite3.connect(store)
    # A module cut inside a character (its sampling hit max_new_tokens) is stored as the bytes it had.
    db.text_factory = lambda raw: raw.decode("utf-8", "replace")
    try:
        rows = db.execute("SELECT apis, level, valid, reason, source FROM tasks "
                          "WHERE origin = 'proposer' ORDER BY id").fetchall()
    finally:
        db.close()
    with open(out, "w") as f:
        for apis, level, valid, reason, source in rows:
            f.write(json.dumps({"apis": json.loads(apis), "level": level, "valid": bool(valid),
                                "reason": reason, "source": source}) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
