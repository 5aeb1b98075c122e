"""Summary of scripts/bench_data_parallel.sh's runs: DIR/{one,weak,strong}/metrics.jsonl (and tasks.sqlite
for per-module validation times). Usage: python3 scripts/bench_data_parallel_summary.py DIR"""
import json
import os
import sqlite3
import statistics
import sys


def validations(work, name):
    """Per iteration: (modules the workers validated, of them compiled, slowest validation s, slowest compile s)."""
    p = os.path.join(work, name, "tasks.sqlite")
    out = {}
    if not os.path.exists(p):
        return out
    for (v,) in sqlite3.connect(p).execute("SELECT validation FROM tasks"):
        info = json.loads(v).get("info", {})
        if "validate_s" not in info:
            continue  # turned down by the store's checks alone
        it = int(info.get("submission", "/iter-0").rsplit("-", 1)[1])
        n, c, vmax, cmax = out.get(it, (0, 0, 0.0, 0.0))
        cs = info.get("compile_s")
        out[it] = (n + 1, c + (cs is not None), max(vmax, info["validate_s"]), max(cmax, cs or 0.0))
    return out


def load(work, name):
    p = os.path.join(work, name, "metrics.jsonl")
    return [json.loads(line) for line in open(p)] if os.path.exists(p) else None


def iteration_line(name, m, vals):
    st, p = m["stage_s"], m.get("propose", {})
    secs = sum(st.get(k, 0) for k in ("propose", "refresh_pool", "coder"))
    parts = " ".join(f"{k} {p[k]:.1f}s" for k in ("sample_s", "validate_s", "probe_s", "update_s") if k in p)
    if "symbolic_rounds" in p:
        parts += (f"; {p['valid_from_proposer']} valid proposals, symbolic {p['symbolic']} of "
                  f"{p['symbolic_tried']} valid in {p['symbolic_rounds']} round(s)")
    if m["iteration"] in vals:
        n, c, vmax, cmax = vals[m["iteration"]]
        parts += (f"; stored modules validated {n}, compiled {c}, slowest validation {vmax:.1f}s, "
                  f"slowest compile {cmax:.1f}s")
    print(f"[dp-bench] {name} iter {m['iteration']}: world {m['world_size']}, {m['samples']} samples in {secs:.1f} s "
          f"= {m['samples_per_s']:.2f} samples/s (propose {st.get('propose', 0):.1f}s [{parts}], "
          f"coder {st.get('coder', 0):.1f}s)")
    return secs


def main():
    work = sys.argv[1]
    base = None
    for name in ["one", "weak", "strong"]:
        ms = load(work, name)
        if ms is None:
            continue
        later_n = later_s = 0
        rates = []
        vals = validations(work, name)
        for m in ms:
            secs = iteration_line(name, m, vals)
            if m["iteration"] >= 2:
                later_n += m["samples"]
                later_s += secs
                rates.append(m["samples_per_s"])
        total = later_n / later_s
        if name == "one":
            base = total
        ratio = f", {total / base:.2f}x one GPU" if base else ""
        print(f"[dp-bench] {name}: {later_n} samples in {later_s:.1f} s over iterations 2..{ms[-1]['iteration']} = "
              f"{total:.2f} samples/s (per iteration: median {statistics.median(rates):.2f}, "
              f"range {min(rates):.2f}-{max(rates):.2f}){ratio}")


if __name__ == "__main__":
    main()
