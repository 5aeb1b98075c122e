import json, os, subprocess, sys, concurrent.futures as cf
here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))  # tests/verify
env = dict(os.environ, DEV="cuda", PYTHONPATH=os.path.join(here, "stub"), PYTHONUNBUFFERED="1")
jobs = []
for d in ("adversarial", "bad_input"):
    for c in json.load(open(os.path.join(root, d, "manifest.json")))["cases"]:
        base = os.path.join(root, d)
        t = os.path.join(base, c["task"]); k = os.path.join(base, c["candidate"])
        to = 20 if c["name"].startswith("hang") else 240
        jobs.append((d + ":" + c["name"], t, k, {}, to))
        if any(s in c["name"] for s in ("stale", "partial")):
            jobs.append((d + ":" + c["name"] + " [NAIVE_FREE]", t, k, {"NAIVE_FREE": "1"}, to))
def run(job):
    name, t, k, extra, to = job
    try:
        p = subprocess.run([sys.executable, os.path.join(here, "run_case.py"), t, k, "7"], env=dict(env, **extra),
                           capture_output=True, text=True, timeout=to, cwd="/tmp")
        out = (p.stdout + p.stderr).strip().splitlines()
        keep = [l for l in out if l.startswith(("call", "IMPORT", "CTOR", "NON", "META"))] or out[-3:]
        return name, f"rc={p.returncode}", keep
    except subprocess.TimeoutExpired:
        return name, "TIMEOUT", []
with cf.ThreadPoolExecutor(8) as ex:
    res = list(ex.map(run, jobs))
with open(os.path.join(os.environ.get("OUT", "/tmp"), "dev_results.txt"), "w") as fh:
    for name, rc, lines in res:
        fh.write(f"== {name} {rc}\n")
        for l in lines: fh.write("   " + l[:400] + "\n")
print("done", len(res))
