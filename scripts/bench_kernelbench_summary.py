"""Summary of a `kernelzero bench --model reference` run (scripts/bench_kernelbench.sh):
statuses, per-task speedups against eager (the candidate is the reference: 1.0 is right), the
slowest jobs, and the device memory nvidia-smi saw.

Usage: python3 bench_kernelbench_summary.py VERDICTS.jsonl [SMI.csv] [WALL_S]"""
import json
import math
import sys
from collections import Counter


def gib(b):
    return f"{b / 2**30:.1f} GiB" if isinstance(b, (int, float)) else "?"


def main():
    verdicts = [json.loads(line) for line in open(sys.argv[1]) if line.strip()]
    smi = sys.argv[2] if len(sys.argv) > 2 else None
    wall = sys.argv[3] if len(sys.argv) > 3 else "?"
    by_status = Counter(v["status"] for v in verdicts)
    print(f"{len(verdicts)} verdicts in {wall} s: " + ", ".join(f"{k} {n}" for k, n in by_status.most_common()))
    for v in verdicts:
        if v["status"] != "correct":
            print(f"  {v['id']}: {v['status']}: {v.get('reason', '')[:300]}")
    sp = [(v["speedup_eager"], v["id"]) for v in verdicts if v.get("correct") and v.get("speedup_eager")]
    if sp:
        geo = math.exp(sum(math.log(s) for s, _ in sp) / len(sp))
        out = [f"{i} {s:.3f}" for s, i in sorted(sp) if not 0.9 <= s <= 1.1]
        print(f"speedup vs eager: geomean {geo:.4f}, min {min(sp)[0]:.3f} ({min(sp)[1]}), "
              f"max {max(sp)[0]:.3f} ({max(sp)[1]}); outside 0.9-1.1: {len(out)}"
              + (": " + ", ".join(out) if out else ""))
    slow = sorted(verdicts, key=lambda v: -v.get("total_s", 0))[:5]
    print("slowest jobs: " + ", ".join(f"{v['id']} {v.get('total_s', 0):.1f} s" for v in slow))
    alone = [v for v in verdicts if (v.get("memory") or {}).get("first_run")]
    print(f"run again alone after a memory failure: {len(alone)}")
    for v in alone:
        m = v["memory"]
        first = m["first_run"]
        print(f"  {v['id']}: beside {gib(first.get('beside'))}, need {m.get('need')}, first run: "
              f"{(first.get('reason') or '')[:240]!r} {first.get('memory')}")
    for v in verdicts:  # what the candidate's timing saw where its speed is off
        s = v.get("speedup_eager")
        if s and not 0.9 <= s <= 1.1:
            m = v.get("memory") or {}
            print(f"  off {v['id']}: {s:.3f}: eager {v.get('ref_eager_ms')} ms, candidate {v.get('runtime_ms')}, "
                  f"alone {m.get('alone')}, cap {gib(m.get('candidate_cap'))}, beside {gib(m.get('beside'))}")
    iters = [v["runtime_ms"]["n"] for v in verdicts if v.get("runtime_ms")]
    if iters:
        print(f"timed iterations per candidate: median {sorted(iters)[len(iters) // 2]}, "
              f"min {min(iters)}, max {max(iters)}")
    if smi:
        used = []
        for line in open(smi):
            parts = [p.strip() for p in line.split(",")]
            if len(parts) >= 3 and parts[1].isdigit():
                used.append((int(parts[1]), int(parts[2])))
        if used:
            peak = max(u for u, _ in used)
            print(f"device memory (nvidia-smi, every 200 ms): peak {peak / 1024:.1f} GiB "
                  f"of {used[0][1] / 1024:.1f} GiB")


if __name__ == "__main__":
    main()
