"""The learning experiment's summary table (docs/LEARNING.md) from what scripts/learning_experiment.sh
wrote under its directory: arm A (the SFT Coder's held-out evaluation, arm-A/metrics.json) and each RL
arm's run (arm-X-seedN/metrics.jsonl, or arm-X-seedN-VARIANT for a variant such as lr3e-4: its held-out
evaluations, its sampled tokens and verifications, its stage times, the pass rate of its Coder's
samples on the training pool). pass@1 and fast_1 are shares of the held-out tasks, with 95% Wilson
intervals; below the table, arm A sampled and on seen tasks, each arm's last checkpoint on the seen
tasks against A's (where the seen stage ran it), each arm's last evaluation against A task by task
(exact McNemar), the held-out tasks correct
by how many of their operator transitions the corpus teaches (with the corpus under LEARN_DIR), the
held-out verdicts of A and of each arm's last evaluation by status, how closely their completions
follow the module (the operators' kernels, launches, the constructor), each arm's tasks by their pass
rates in the first and the second half of its iterations (where its pool copy is there), C against B,
each variant of C against C and every arm against the control (C lr0: the SFT Coder sampled on the
same draws, never updated) on the same training draws at each seed both ran, and each arm's mean and
range over its seeds at the end (the seed spread).

With a second directory, BASELINE_DIR (another run's, of the same held-out tasks: another SFT, or a
corpus of the same seed from another generator), arm A is also compared with its arm A task by task.

Usage: python3 table.py LEARN_DIR [BASELINE_DIR]"""
import ast
import json
import math
import re
import sqlite3
import sys
from pathlib import Path


def wilson(k, n, z=1.96):
    if n == 0:
        return (0.0, 0.0)
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def share(p, n):
    """A share of n tasks as 'p [lo, hi]'."""
    if p is None or not n:
        return "-"
    k = round(p * n)
    lo, hi = wilson(k, n)
    return f"{p:.3f} [{lo:.2f}, {hi:.2f}]"


def figures(m):
    """pass@1, fast_1 vs eager and vs torch.compile, geomean vs eager, tasks: from bench's overall
    metrics or a trainer's eval entry."""
    n = m.get("tasks", 0)
    return {"n": n, "pass1": m.get("pass_at_k", {}).get("pass@1"), "fast1": m.get("fast_p_eager", {}).get("1"),
            "fast1_compile": m.get("fast_p_compile", {}).get("1"), "geomean": m.get("geomean_speedup_eager")}


def coder_steps(m):
    """An iteration's Coder steps (none where the iteration had no Coder phase)."""
    return m.get("coder", {}).get("steps", [])


def training_pass_rates(its):
    """The Coder's pass rate on its training samples, an iteration's steps averaged, by iteration
    (iterations without a Coder step left out)."""
    rates = [[s["pass_rate"] for s in coder_steps(m) if "pass_rate" in s] for m in its]
    return [sum(r) / len(r) for r in rates if r]


def pool_pass_rates(its, window=5):
    """The Coder's pass rate on its training samples (temperature 1) over the first and the last
    `window` iterations: whether RL moves the policy on the tasks it trains on, which held-out
    figures at 0 cannot show."""
    rates = training_pass_rates(its)
    if not rates:
        return "-"
    first, last = rates[:window], rates[-window:]
    return f"{sum(first) / len(first):.3f} -> {sum(last) / len(last):.3f}"


def jsonl(path):
    """The objects of a JSON-lines file, blank lines skipped."""
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def verdicts(eval_dir):
    """An evaluation's verdicts (bench's verdicts.jsonl); None when it kept none."""
    path = eval_dir / "verdicts.jsonl"
    return jsonl(path) if path.exists() else None


def syntax_failures(eval_dir):
    """How many of an evaluation's completions are not valid Python (the verifier's syntax check):
    the first sign of a policy drifting off what SFT taught it."""
    vs = verdicts(eval_dir)
    if vs is None:
        return "?"
    return sum(v.get("checks", {}).get("syntax") == "fail" for v in vs)


def completion_key(c):
    """A completion's task and sample: the same key in every evaluation of the held-out tasks."""
    return c["task"], c.get("sample", 0)


def completions(eval_dir):
    """An evaluation's completions by task and sample; None when it kept none."""
    path = eval_dir / "completions.jsonl"
    return {completion_key(c): c["completion"] for c in jsonl(path)} if path.exists() else None


def written_as_a(eval_dir, a):
    """How many of an evaluation's completions are arm A's (a: completions(arm A)), text for text,
    as 'k/n': greedy decoding repeats the SFT Coder's completion until the updates move one of its
    tokens, so the share left says how far they moved what the Coder writes on tasks they never
    drew, correct or not. '?' where either kept no completions."""
    own = completions(eval_dir)
    if own is None or a is None:
        return "?"
    return f"{sum(a.get(key) == text for key, text in own.items())}/{len(own)}"


def failure_counts(name, eval_dir):
    """An evaluation's verdicts by status, most first, as 'name: runtime_error 77 (17 launch a kernel
    never defined, 42 fail constructing ModelNew), incorrect 12, ...': a kernel launched but never
    defined is the held-out failure of a Coder that copies a training kernel's launch without
    composing its body; a ModelNew that cannot be built from get_init_inputs is one whose constructor
    is a training module's, not the module's. None when the evaluation kept no verdicts."""
    vs = verdicts(eval_dir)
    if vs is None:
        return None
    counts, undefined, constructing = {}, 0, 0
    for v in vs:
        status = v.get("status", "unknown")
        counts[status] = counts.get(status, 0) + 1
        reason = v.get("reason") or ""
        m = re.search(r"NameError: name '(\w+)' is not defined", reason)
        undefined += status == "runtime_error" and m is not None and m.group(1).endswith("kernel")
        constructing += status == "runtime_error" and reason.startswith("constructing ModelNew failed")
    parts = []
    for status, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        extra = (f" ({undefined} launch a kernel never defined, {constructing} fail constructing ModelNew)"
                 if status == "runtime_error" else "")
        parts.append(f"{status} {n}{extra}")
    return f"{name}: " + ", ".join(parts)


def class_def(source, cls):
    """Class cls of source (ast.ClassDef); None when source is not valid Python or has no such class."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls), None)


def method(node, name):
    """Method name of a class (ast.FunctionDef), or None."""
    return next((f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == name), None)


def constructor(source, cls):
    """Class cls's __init__: its parameters, then its statements after super().__init__(), normalised
    (ast.unparse); None when source is not valid Python or has no such class."""
    node = class_def(source, cls)
    if node is None:
        return None
    f = method(node, "__init__")
    if f is None:
        return []
    body = [ast.unparse(st) for st in f.body if not isinstance(st, ast.Pass)]
    return [ast.unparse(f.args)] + [line for line in body if "super()" not in line]


def normalised(line):
    """A line of Python as ast.unparse writes it; None when it is not a statement."""
    try:
        return ast.unparse(ast.parse(line))
    except SyntaxError:
        return None


def forward_lines(source):
    """Model.forward's statements before its return, normalised (ast.unparse): the lines the teacher's
    kernels name in their comments. Empty when source has no such method."""
    node = class_def(source, "Model")
    f = method(node, "forward") if node is not None else None
    return [ast.unparse(st) for st in f.body if not isinstance(st, ast.Return)] if f is not None else []


def held_out_tasks(d):
    """Per held-out task (its file's stem): its operators in the order its forward applies them
    (corpus/heldout/manifest.jsonl), its Model's constructor (constructor(); None without its file)
    and its forward's lines (forward_lines()). None without the corpus under d."""
    manifest = d / "corpus" / "heldout" / "manifest.jsonl"
    if not manifest.exists():
        return None
    tasks = {}
    for t in jsonl(manifest):
        path = manifest.parent / t["file"]
        source = path.read_text() if path.exists() else None
        tasks[Path(t["file"]).stem] = (t["apis"], None if source is None else constructor(source, "Model"),
                                       forward_lines(source or ""))
    return tasks


def in_order(lines, within):
    """Whether lines are distinct lines of within, in within's order."""
    rest = iter(within)
    return all(any(line == w for w in rest) for line in lines)


# The end of a kernel's name as the teacher writes it: '_kernel', a repeat's '_kernel_2'.
KERNEL_SUFFIX = re.compile(r"_kernel(_\d+)?$")


def names_operator(kernel, api):
    """Whether a kernel's name is the teacher's name for a kernel computing api: its operators joined
    by '_' then '_kernel' ('relu_kernel', 'bmm_logsigmoid_kernel'), a repeat suffixed '_2'."""
    stem = KERNEL_SUFFIX.sub("", kernel)
    return f"_{api}_" in f"_{stem}_"


def module_followed(name, eval_dir, tasks):
    """How closely an evaluation's candidates (the files bench extracted from the completions,
    jobs.jsonl) follow their module, as 'name: module lines above the kernels k/n; operator 1 k/n,
    2 k/n, ...; launch only kernels they define k/n; constructor as the module's k/m': the
    completions whose kernels are headed by the module's forward lines, as the teacher's are (each
    top-level comment a line of it, in its order; at least one); per position in the operator chain,
    the completions defining a kernel named for that operator; those whose every launch (a name
    holding 'kernel' before '[') is of a kernel they define; and, of the tasks whose Model builds
    submodules, those whose ModelNew builds them with the same arguments (the constants a Coder must
    copy from the prompt: channels, groups, sizes). A completion bench could not extract a file from
    follows nothing. A Coder that reads the module writes its first operator's kernel; one that
    composes keeps to the chain after it, launches what it wrote and copies the constructor; the
    comments tell a chain copied wrong from one copied right and then written wrong. None without
    completions or the corpus."""
    completions, jobs = eval_dir / "completions.jsonl", eval_dir / "jobs.jsonl"
    if tasks is None or not completions.exists():
        return None
    candidates = {j["id"]: j["candidate"] for j in jsonl(jobs)} if jobs.exists() else {}
    named, headed, launches_defined, built, copied, n = {}, 0, 0, 0, 0, 0
    for c in jsonl(completions):
        task = tasks.get(c["task"].split("/")[-1])
        if task is None:
            continue
        apis, init, lines = task
        source = candidates.get(f"{c['task']}#{c.get('sample', 0)}", "")
        comments = [normalised(m) for m in re.findall(r"^# (.*)$", source, re.M)]
        headed += bool(comments) and in_order(comments, lines)
        defined = set(re.findall(r"^def (\w+)\(", source, re.M))
        kernels = [k for k in defined if KERNEL_SUFFIX.search(k)]
        for i, api in enumerate(apis):
            hits = named.setdefault(i, [0, 0])
            hits[0] += any(names_operator(k, api) for k in kernels)
            hits[1] += 1
        launched = set(re.findall(r"\b(\w*kernel\w*)\[", source))
        launches_defined += bool(launched) and launched <= defined
        if init is not None and len(init) > 1:  # parameters, then the submodules it builds
            built += 1
            copied += constructor(source, "ModelNew") == init
        n += 1
    per_position = ", ".join(f"{i + 1} {k}/{m}" for i, (k, m) in sorted(named.items()))
    return (f"{name}: module lines above the kernels {headed}/{n}; operator {per_position}; "
            f"launch only kernels they define {launches_defined}/{n}; constructor as the module's {copied}/{built}")


def outcomes(eval_dir):
    """Per held-out task: (correct, fast), fast being correct and faster than eager; None when the
    evaluation kept no verdicts."""
    vs = verdicts(eval_dir)
    if vs is None:
        return None
    return {v["id"].split("#")[0]: (bool(v.get("correct")),
                                    bool(v.get("correct")) and (v.get("speedup_eager") or 0) > 1) for v in vs}


def mcnemar(gained, lost):
    """Two-sided exact McNemar p: the discordant tasks' split against a fair coin."""
    n = gained + lost
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(gained, lost) + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def against(label, end, start):
    """One evaluation against another on the same held-out tasks, paired: the tasks each got that the
    other did not, as 'label, task by task: pass +3 -1 (exact McNemar p = 0.62); fast_1 ...'. Far more
    sensitive than the two intervals of the table's rows. Where the two evaluated other tasks (another
    run's corpus), over the tasks both have, and it says so."""
    if end is None or start is None:
        return None
    common = sum(t in start for t in end)
    if common != len(end) or common != len(start):
        label += f" on the {common} tasks both evaluated (of {len(end)} and {len(start)})"
    parts = []
    for k, what in ((0, "pass"), (1, "fast_1")):
        gained = sum(end[t][k] and not start[t][k] for t in end if t in start)
        lost = sum(start[t][k] and not end[t][k] for t in end if t in start)
        parts.append(f"{what} +{gained} -{lost} (exact McNemar p = {mcnemar(gained, lost):.2f})")
    return f"{label}, task by task: " + "; ".join(parts) + "."


TRANSITION_CLASSES = ("every", "some", "none")


def transitions_taught(d):
    """Per held-out task (its file's stem): whether some training pair teaches every, some or none of
    its operator transitions (an operator's output going into the next one of its composition). The
    split keeps the API sets apart, not the transitions: a task whose transitions were all taught
    asks for less composing than one whose were not. None without the corpus under d."""
    train, manifest = d / "corpus" / "train.jsonl", d / "corpus" / "heldout" / "manifest.jsonl"
    if not train.exists() or not manifest.exists():
        return None
    taught = {step for pair in jsonl(train) for step in zip(pair["apis"], pair["apis"][1:])}
    classes = {}
    for task in jsonl(manifest):
        steps = list(zip(task["apis"], task["apis"][1:]))
        k = sum(step in taught for step in steps)
        classes[Path(task["file"]).stem] = "every" if k == len(steps) else "none" if k == 0 else "some"
    return classes


def correct_by_transitions(name, classes, outcome):
    """An evaluation's correct held-out tasks in each class of transitions_taught, as 'k/n'."""
    if classes is None or outcome is None:
        return None
    counts = {c: [0, 0] for c in TRANSITION_CLASSES}
    for task, (ok, _) in outcome.items():
        c = classes.get(task.split("/")[-1])
        if c:
            counts[c][0] += ok
            counts[c][1] += 1
    return f"{name}: " + ", ".join(f"{c} {k}/{n}" for c, (k, n) in counts.items())


def correct_by_iteration(its):
    """Correct Coder samples per iteration, of the tasks its replay drew."""
    return {m["iteration"]: sum(s.get("correct", 0) for s in coder_steps(m)) for m in its}


RUN_NAME = re.compile(r"arm-([BCD])-seed(\d+)(?:-(.+))?")
# A tasks=seen arm's variant: "tasksseen" (the 40 seen tasks) or "tasksseenN" (the first N of them).
SEEN_VARIANT = re.compile(r"(?:^|-)tasksseen(\d*)(?:-|$)")
# A variant's options in the order its run name gives them (an option's value may hold a "-": lr3e-4).
OPTION_NAMES = "ptemp|pdraws|lr|warmup|mb|temp|kl|beta|adv|tasks"  # ptemp before temp, which it ends with
OPTION = re.compile(rf"(?:{OPTION_NAMES}).+?(?=-(?:{OPTION_NAMES})|$)")
# The control arm (lr=0): the SFT Coder sampled and verified on the arms' draws, never updated.
CONTROL = "C lr0"


def largest_kl(its):
    """The largest step KL to the SFT Coder and its iteration, as 'K at iteration I', with that step's
    largest token's KL where the trainer recorded it (kl_max: a spike of a few tokens shows a token far
    above the mean) and that token (kl_max_at: its text, the update that scored it, its log-probs
    there, at the step's start and under the reference: one far below its start was moved by the
    step's earlier updates, one low at the start was drawn from the tail); None when no step computed
    one. A spike the last step's KL no longer shows."""
    steps = [(s["kl"], m["iteration"], s.get("kl_max"), s.get("kl_max_at"), s.get("updates"))
             for m in its for s in coder_steps(m) if "kl" in s]
    if not steps:
        return None
    kl, it, peak, at, updates = max(steps, key=lambda step: step[0])
    where = ""
    if at:
        sampler = at.get("sampler_logp")
        where = (f", {json.dumps(at['text'])} scored in update {at['update'] + 1} of {updates}: log-prob "
                 f"{at['logp']:.1f} there, {at['old_logp']:.1f} at the step's start"
                 + (f" ({sampler:.1f} for the sampler)" if sampler is not None else "")
                 + f", {at['ref_logp']:.1f} under the reference")
    return f"{kl:.2e} at iteration {it}" + (f" (its largest token: {peak:.2e}{where})" if peak is not None else "")


def seen_against_a(run, a_seen):
    """An arm's last checkpoint on the seen stage's training tasks (greedy, RUN/seen-iter-N) against A's
    on the same tasks: what RL kept of what SFT taught, or, for a tasks=seen arm, raised of what it
    trained on. A tasks=seenN arm trained on the first N of them (by name): those and the others are
    paired apart too. None where the seen stage did not run it."""
    runs = sorted(p for p in run.glob("seen-iter-*") if (p / "metrics.json").exists())
    if not runs:
        return None
    f = figures(json.loads((runs[-1] / "metrics.json").read_text())["overall"])
    it = int(runs[-1].name.rsplit("-", 1)[1])
    line = (f"{run.name} at iteration {it} on {f['n']} seen tasks (greedy): pass@1 {f['pass1'] or 0:.3f}, "
            f"fast_1 {f['fast1'] or 0:.3f}")
    end = outcomes(runs[-1])
    paired_line = against("against A", end, a_seen)
    n = SEEN_VARIANT.search(RUN_NAME.fullmatch(run.name).group(3) or "")
    if paired_line and n and n.group(1) and int(n.group(1)) < len(end):
        trained = set(sorted(end)[:int(n.group(1))])
        for label, keep in ((f"on the {len(trained)} it trained on", True),
                            (f"on the other {len(end) - len(trained)}", False)):
            part = against(label, {t: v for t, v in end.items() if (t in trained) == keep},
                           {t: v for t, v in a_seen.items() if (t in trained) == keep})
            paired_line = paired_line[:-1] + "; " + part
    return line + (f"; {paired_line}" if paired_line else ".")


def parent_variant(arm):
    """The arm a variant of C extends by its last option ("C advdr_grpo-temp0.7" extends "C advdr_grpo"),
    where the two draw the same tasks (the last option is not the pool's): their runs at one seed are
    paired like a variant and C. None for C itself, for one option over C (paired with C already),
    and where the last option is tasks=."""
    options = OPTION.findall(arm[2:]) if arm.startswith("C ") else []
    if len(options) < 2 or options[-1].startswith("tasks"):
        return None
    return "C " + "-".join(options[:-1])


def paired(seed, label, c, base, b):
    """Two arms at one seed on one pool (C against B, a variant of C against C): both draw their tasks
    uniformly from it with the same seeded replay, so iteration i of each samples the same tasks (and,
    from the same start, the same tokens until their policies part): the per-iteration difference of
    correct samples is the sharpest comparison the runs hold. D proposes its own tasks and has no
    such pairing."""
    common = sorted(set(c) & set(b))
    if not common:
        return None
    d = [c[i] - b[i] for i in common]
    ahead, behind = sum(x > 0 for x in d), sum(x < 0 for x in d)
    return (f"Seed {seed}, {label} against {base} on the same draws (iterations {common[0]}-{common[-1]}): "
            f"correct samples {sum(c[i] for i in common)} against {sum(b[i] for i in common)} ({label} - {base} = "
            f"{sum(d):+d}); {label} ahead in {ahead} iterations, behind in {behind}, equal in "
            f"{len(d) - ahead - behind}.")


def speed_only(its):
    """How much of the updates the speed term alone ordered: the groups with signal whose samples
    were all correct (their advantages come from speedups, timing noise included), a step's mean, and
    their mean share of the advantages' absolute sum. None where the trainer did not record it."""
    steps = [s for m in its for s in coder_steps(m) if "speed_only_share" in s]
    if not steps:
        return None
    n = len(steps)
    signal = sum(s["groups"] - s["zero_signal_groups"] for s in steps) / n
    groups = sum(s["speed_only_groups"] for s in steps) / n
    return (f"groups ordered by speed alone (every sample correct): {groups:.1f} of {signal:.1f} with signal a "
            f"step, {sum(s['speed_only_share'] for s in steps) / n:.2f} of the advantages' weight")


def logprob_gap(its):
    """How far the update's log-probs of the sampled tokens were from the sampler's: the steps' mean
    gap and the largest token's. Rounding (bf16) unless the trainer scores what the sampler did not
    draw (docs/RL.md). None where the trainer did not record it."""
    steps = [s for m in its for s in coder_steps(m) if "logprob_gap" in s]
    if not steps:
        return None
    return (f"sampler-trainer log-prob gap: mean {sum(s['logprob_gap'] for s in steps) / len(steps):.1e}, "
            f"largest {max(s['logprob_gap_max'] for s in steps):.1e}")


def gradient_norms(its, clip):
    """The updates' gradient norms before clipping: the median step's, the steps clipped (over the
    Coder's max_grad_norm) with their norms, and AdamW's gradient scale after the last step (the norm
    its steps divide by: a clipped spike far above the usual norms keeps it high, and every later step
    small; PolicyOptimizer::gradient_scale). A step's largest update where the trainer recorded it
    (grad_norm_max), its updates' mean otherwise. None without steps."""
    steps = [(m["iteration"], s) for m in its for s in coder_steps(m) if "grad_norm" in s]
    if not steps:
        return None
    key = "grad_norm_max" if all("grad_norm_max" in s for _, s in steps) else "grad_norm"
    norms = sorted(s[key] for _, s in steps)
    clipped = ", ".join(f"{it} ({s[key]:.1e})" for it, s in steps if clip and s[key] > clip)
    which = "its largest update's" if key == "grad_norm_max" else "its updates' mean"
    line = (f"a step's gradient norm before clipping ({which}): median {norms[len(norms) // 2]:.1e}"
            + (f", over the clip ({clip:g}) at iterations: {clipped or 'none'}" if clip else ""))
    scale = [s["grad_scale"] for _, s in steps if "grad_scale" in s]
    return line + (f"; AdamW's gradient scale after the last step {scale[-1]:.1e}" if scale else "")


def seen_curve(run, its, config):
    """A tasks=seen arm's training pass rate by iteration. For tasks=seenN with N <= tasks_per_step
    every iteration samples the same N tasks, so the curve is a learning curve on fixed tasks; with
    more (the 40 seen tasks) each iteration draws tasks_per_step of them. None for an arm on the pool."""
    kind = SEEN_VARIANT.search(RUN_NAME.fullmatch(run.name).group(3) or "")
    rates = training_pass_rates(its)
    if not kind or not rates:
        return None
    per_step = config.get("coder_phase", {}).get("tasks_per_step", 16)
    n = int(kind.group(1)) if kind.group(1) else None
    tasks = f"its {n} tasks each time" if n and n <= per_step else f"{per_step} of its {n or 'seen'} tasks each time"
    return f"{run.name}, training pass rate by iteration ({tasks}): {', '.join(f'{r:.2f}' for r in rates)}."


def training_attempts(d, run, its, columns):
    """An arm's Coder samples from its pool copy (LEARN_DIR/arm-X-seedN.tasks.sqlite: an attempt per
    sample, by the iteration's policy) as (iteration, *columns) rows, for the iterations its metrics
    hold: one sampled when a deadline came is not counted. None without the pool copy or metrics."""
    pool = d / f"{run.name}.tasks.sqlite"
    if not pool.exists() or not its:
        return None
    db = sqlite3.connect(str(pool))
    try:
        rows = db.execute(f"SELECT model_version, {columns} FROM attempts "
                          "WHERE model_version LIKE 'coder@iter-%'").fetchall()
    finally:
        db.close()
    last = max(m["iteration"] for m in its)
    attempts = []
    for version, *values in rows:
        iteration = int(version.rsplit("-", 1)[1]) + 1  # the samples of iteration i come from coder@iter-(i-1)
        if iteration <= last:
            attempts.append((iteration, *values))
    return attempts


def per_task_learning(d, run, its, config):
    """Whether the Coder got better at the tasks it trained on, read from the arm's pool copy
    (LEARN_DIR/arm-X-seedN.tasks.sqlite: an attempt per sample, by the iteration's policy): of the
    tasks its replay drew in both halves of its iterations, each task's pass rate over its draws in
    the first half against the second, at the sampling temperature. A tasks=seen arm draws each of
    its 40 tasks ~6 times; an arm on the whole pool rarely draws one twice (the line counts the tasks
    drawn in one iteration only). None without the pool copy or with fewer than 5 such tasks."""
    rows = training_attempts(d, run, its, "task_id, correct")
    if rows is None:
        return None
    last = max(m["iteration"] for m in its)
    half = last // 2
    draws = {}  # task -> [[correct, samples] in the first half, in the second]
    drawn_in = {}  # task -> the iterations that drew it
    for iteration, task, ok in rows:
        counts = draws.setdefault(task, [[0, 0], [0, 0]])[iteration > half]
        counts[0] += ok
        counts[1] += 1
        drawn_in.setdefault(task, set()).add(iteration)
    once = sum(len(iterations) == 1 for iterations in drawn_in.values())
    both = [(e[0] / e[1], l[0] / l[1]) for e, l in draws.values() if e[1] and l[1]]
    if len(both) < 5:
        return None
    up, down = sum(l > e for e, l in both), sum(l < e for e, l in both)
    temperature = config.get("coder_phase", {}).get("temperature")
    return (f"{run.name}, per task on its training draws"
            f"{f' (temperature {temperature:g})' if temperature is not None else ''}: of {len(draws)} tasks drawn, "
            f"{once} in one iteration only; {len(both)} drawn in both halves of its {last} iterations "
            f"(1-{half}, {half + 1}-{last}); their mean pass rate {sum(e for e, _ in both) / len(both):.3f} -> "
            f"{sum(l for _, l in both) / len(both):.3f}; up in {up}, down in {down}, level in "
            f"{len(both) - up - down} (exact sign test p = {mcnemar(up, down):.2f}).")


def proposals(run, its):
    """What an arm's propose stage (arm D) gave its Coder: the Proposer's modules, how many were valid and
    new, the symbolic generator's fill-in, how many of the measured modules the Coder's probes put in
    the band (passed sometimes, not always: the groups a step can learn from), and the pool's band
    modules beside its replayed tasks; with the groups without signal, the quantity D is meant to
    lower against C's uniform draws. None for an arm without a propose stage."""
    rounds = [m for m in its if "propose" in m]
    if not rounds:
        return None
    total = {k: sum(m["propose"].get(k, 0) for m in rounds)
             for k in ("proposals", "valid", "valid_from_proposer", "symbolic", "modules_measured", "in_band")}
    updated = sum(bool(m["propose"].get("updated")) for m in rounds)
    band = sum(m.get("pool", {}).get("from_band", 0) for m in rounds) / len(rounds)
    replayed = sum(m.get("pool", {}).get("replayed", 0) for m in rounds) / len(rounds)
    steps = [s for m in its for s in coder_steps(m) if "zero_signal_groups" in s]
    signal = (f"; groups without signal {sum(s['zero_signal_groups'] for s in steps) / len(steps):.1f} of "
              f"{sum(s['groups'] for s in steps) / len(steps):.1f} a step" if steps else "")
    return (f"{run.name}, propose over {len(rounds)} iterations: the Proposer wrote {total['proposals']} modules, "
            f"{total['valid']} valid ({total['valid_from_proposer']} new ones measured), the symbolic generator "
            f"added {total['symbolic']}; of the {total['modules_measured']} measured, {total['in_band']} in the "
            f"band; the Proposer updated in {updated} of them; the Coder's pool {band:.1f} band modules and "
            f"{replayed:.1f} replayed tasks an iteration{signal}.")


def probed_modules(d, run, its):
    """What an arm's probes (arm D's propose stage: G Coder samples a valid module) measured of the
    modules it made, the Proposer's and the symbolic generator's fill-in, by the number of operators in
    their API set: modules whose probes were all correct (solved, no signal), some (the band: what the
    Coder's step learns from) and none; and the Coder's training samples on them (band modules and
    their replays), correct of all, for the iterations its metrics hold. The band needs modules at
    the Coder's frontier, which is a number of operators (docs/LEARNING.md). From the arm's pool copy;
    None without one or without a propose stage."""
    pool = d / f"{run.name}.tasks.sqlite"
    if not pool.exists() or not any("propose" in m for m in its):
        return None
    db = sqlite3.connect(str(pool))
    try:
        probes = db.execute("SELECT a.task_id, t.apis, a.correct FROM attempts a JOIN tasks t ON t.id = a.task_id "
                            "WHERE a.model_version = 'probe'").fetchall()
    finally:
        db.close()
    if not probes:
        return None
    modules = {}  # task -> [operators, correct probes, probes]
    for task, apis, ok in probes:
        counts = modules.setdefault(task, [len(json.loads(apis)), 0, 0])
        counts[1] += ok
        counts[2] += 1
    by_size = {}  # operators -> [all, some, none]
    for size, ok, n in modules.values():
        by_size.setdefault(size, [0, 0, 0])[0 if ok == n else 1 if ok else 2] += 1
    measured = ", ".join(f"{size} {'/'.join(map(str, c))}" for size, c in sorted(by_size.items()))
    trained = {}  # operators -> [correct, samples]
    task_column = "(SELECT {} FROM tasks WHERE tasks.id = attempts.task_id)"
    for _, origin, apis, ok in training_attempts(d, run, its, f"{task_column.format('origin')}, "
                                                 f"{task_column.format('apis')}, correct") or []:
        if origin == "corpus":
            continue
        counts = trained.setdefault(len(json.loads(apis)), [0, 0])
        counts[0] += ok
        counts[1] += 1
    samples = ", ".join(f"{size} {c[0]}/{c[1]}" for size, c in sorted(trained.items())) or "none"
    return (f"{run.name}, the modules its probes measured by operators in the API set, probes all/some/none "
            f"correct: {measured}; the Coder's training samples on them by operators, correct/all: {samples}.")


def proposer_samples(d):
    """The SFT Proposer's modules before any RL (the proposals stage: LEARN_DIR/proposals-tT/), one line
    a temperature: how many passed validation, by the number of operators in their API set (what D's
    band needs is modules of two or more that its Coder passes sometimes), and the checks that turned
    the others down. A module with the text of a task already in the store (a training task's copy) is
    turned down as not novel and not stored again, so the stored modules can be fewer than the command
    wrote: its summary (summary.json) counts them all, and the line says how many were such copies."""
    lines = []
    for path in sorted(d.glob("proposals-t*/proposals.jsonl")):
        modules = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if not modules:
            continue
        by_size = {}  # operators -> [valid, stored]
        checks = {}
        for m in modules:
            counts = by_size.setdefault(len(m["apis"]), [0, 0])
            counts[0] += m["valid"]
            counts[1] += 1
            if not m["valid"]:
                check = (m["reason"] or "").split(":", 1)[0] or "none given"
                checks[check] = checks.get(check, 0) + 1
        summary_path = path.parent / "summary.json"
        summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
        written = summary.get("proposed", len(modules))
        copies = written - len(modules)
        if summary.get("failed_checks"):
            checks = summary["failed_checks"]
        valid = sum(v for v, _ in by_size.values())
        sizes = ", ".join(f"{n} {v}/{w}" for n, (v, w) in sorted(by_size.items()))
        refused = ", ".join(f"{c} {k}" for k, c in sorted(checks.items(), key=lambda kv: (-kv[1], kv[0])))
        stored = f" ({copies} the text of a stored task)" if copies > 0 else ""
        lines.append(f"SFT Proposer at temperature {path.parent.name[len('proposals-t'):]}: {valid} of "
                     f"{written} modules valid{stored}; by operators in the API set, valid/stored: {sizes}"
                     f"{f'; turned down by check: {refused}' if refused else ''}.")
    return lines


def training_failures(d, run, its):
    """How an arm's training samples ended, by iteration, from its pool copy: correct, runtime errors
    (a kernel that does not run) and format errors (no valid Python candidate: mostly a slip of
    sampling, whose negative advantage falls on the whole completion; docs/LEARNING.md, seventeenth
    and eighteenth runs). None without the pool copy."""
    rows = training_attempts(d, run, its, "status")
    if not rows:
        return None
    by_iteration = {}  # iteration -> {status: samples}
    for iteration, status in rows:
        counts = by_iteration.setdefault(iteration, {})
        counts[status] = counts.get(status, 0) + 1
    sizes = {sum(c.values()) for c in by_iteration.values()}
    each = f" of {sizes.pop()} each time" if len(sizes) == 1 else ""
    cells = [f"{c.get('correct', 0)}/{c.get('runtime_error', 0)}/{c.get('format_error', 0)}"
             + ("" if each else f" of {sum(c.values())}") for _, c in sorted(by_iteration.items())]
    return f"{run.name}, training samples correct/runtime errors/format errors by iteration{each}: {', '.join(cells)}."


def stage_command(arm, seed):
    """The scripts/learning_experiment.sh stage that makes an arm's row: "C advdr_grpo-lr3e-4" at seed 1
    is `arm C 1 adv=dr_grpo lr=3e-4` (the run's name joins each option without its "="); arm A's is
    `sft`."""
    if arm == "A":
        return "`sft`"
    name, _, variant = arm.partition(" ")
    options = [re.sub(rf"^({OPTION_NAMES})", r"\1=", option) for option in OPTION.findall(variant)]
    return "`" + " ".join(["arm", name, str(seed), *options]) + "`"


def row(arm, seed, start, end, pool, iterations, verified, tokens, wall):
    g = f"{end['geomean']:.3f}x" if end.get("geomean") else "-"
    return (f"| {arm} | {seed} | {share(start['pass1'], start['n'])} | {share(end['pass1'], end['n'])} | "
            f"{share(start['fast1'], start['n'])} | {share(end['fast1'], end['n'])} | "
            f"{share(end['fast1_compile'], end['n'])} | {g} | {pool} | {iterations} | {verified} | {tokens} | "
            f"{wall:.0f} s | {stage_command(arm, seed)} |")


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: table.py LEARN_DIR [BASELINE_DIR]")
    d = Path(sys.argv[1])
    baseline = Path(sys.argv[2]) if len(sys.argv) == 3 else None
    baseline_outcomes = outcomes(baseline / "arm-A") if baseline is not None else None
    if baseline is not None and baseline_outcomes is None:
        sys.exit(f"{baseline / 'arm-A' / 'verdicts.jsonl'} is missing: the baseline has no arm A to compare with")
    a = d / "arm-A" / "metrics.json"
    if not a.exists():
        sys.exit(f"{a} is missing: run the sft stage first")
    start = figures(json.loads(a.read_text())["overall"])
    print("| arm | seed | pass@1 start | pass@1 end | fast_1 start | fast_1 end | fast_1 vs compile, end | "
          "geomean vs eager, end | training pass rate, first 5 -> last 5 iterations | iterations | verifications | "
          "tokens sampled | wall | stage (scripts/learning_experiment.sh) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    print(row("A", "-", start, start, "-", 0, 0, 0, 0.0))
    ends = {}  # arm -> {seed: ({iteration: figures}, {iteration: eval dir})} over its evaluations
    correct = {}  # (arm, seed) -> {iteration: correct samples}
    start_outcomes = outcomes(d / "arm-A")
    pairs = []  # each arm's last evaluation against A
    classes = transitions_taught(d)
    by_transitions = [correct_by_transitions("arm A", classes, start_outcomes)]
    by_status = [failure_counts("arm A", d / "arm-A")]
    tasks = held_out_tasks(d)
    by_module = [module_followed("arm A", d / "arm-A", tasks)]
    start_invalid = syntax_failures(d / "arm-A")
    start_completions = completions(d / "arm-A")
    seen_lines = []
    learning_lines = []
    a_seen = outcomes(d / "arm-A-seen")
    for run in sorted(d.glob("arm-[BCD]-seed*")):
        name = RUN_NAME.fullmatch(run.name)
        if not name or not run.is_dir() or not (run / "metrics.jsonl").exists():
            continue
        its = jsonl(run / "metrics.jsonl")
        # A variant's arm is labelled with it ("C lr3e-4"): its seeds are spread over apart from C's.
        arm, seed = name.group(1) + (f" {name.group(3)}" if name.group(3) else ""), name.group(2)
        correct[(arm, seed)] = correct_by_iteration(its)
        seen_lines.append(seen_against_a(run, a_seen))
        config = json.loads((run / "run.json").read_text()).get("config", {}) if (run / "run.json").exists() else {}
        learning_lines.append(seen_curve(run, its, config))
        learning_lines.append(per_task_learning(d, run, its, config))
        learning_lines.append(training_failures(d, run, its))
        learning_lines.append(proposals(run, its))
        learning_lines.append(probed_modules(d, run, its))
        evals = [m["eval"] for m in its if "eval" in m]
        wall = sum(sum(v for v in m.get("stage_s", {}).values() if isinstance(v, (int, float))) for m in its)
        # A run not yet evaluated (a tasks=seen arm is evaluated at its end only) still shows its
        # training pass rate and spending.
        print(row(arm, seed, start, figures(evals[-1] if evals else {}), pool_pass_rates(its), len(its),
                  sum(m.get("verified", 0) for m in its), sum(m.get("tokens_sampled", 0) for m in its), wall))
        if not evals:
            continue
        curve = ", ".join(f"{m['iteration']}: {m['eval'].get('pass_at_k', {}).get('pass@1', 0):.3f}"
                          for m in its if "eval" in m)
        print(f"<!-- {run.name} pass@1 by iteration: {curve} -->")
        eval_dirs = {m["iteration"]: run / "eval" / ("iter-%06d" % m["iteration"]) for m in its if "eval" in m}
        invalid = ", ".join(f"{it}: {syntax_failures(e)}" for it, e in eval_dirs.items())
        as_a = ", ".join(f"{it}: {written_as_a(e, start_completions)}" for it, e in eval_dirs.items())
        # The trainer computes the KL only where it weighs it (coder_phase.kl_beta > 0).
        weighed = config.get("coder_phase", {}).get("kl_beta", 0) > 0
        kl = [s["kl"] for s in coder_steps(its[-1]) if "kl" in s and weighed]
        largest = largest_kl(its) if weighed else None
        clip = config.get("coder", {}).get("max_grad_norm", 0)
        notes = "".join(f"; {note}" for note in (speed_only(its), logprob_gap(its), gradient_norms(its, clip))
                        if note)
        print(f"<!-- {run.name} held-out completions not valid Python (arm A: "
              f"{start_invalid}) by iteration: {invalid}; written as arm A's by iteration: {as_a}; "
              f"KL to the SFT Coder, last step: "
              f"{f'{kl[-1]:.2e}' if kl else 'not computed'}{f', largest: {largest}' if largest else ''}{notes} -->")
        last, last_eval = list(eval_dirs.items())[-1]
        end_outcomes = outcomes(last_eval)
        pairs.append(against(f"{run.name} at iteration {last} against A", end_outcomes, start_outcomes))
        by_transitions.append(correct_by_transitions(f"{run.name} at iteration {last}", classes, end_outcomes))
        by_status.append(failure_counts(f"{run.name} at iteration {last}", last_eval))
        by_module.append(module_followed(f"{run.name} at iteration {last}", last_eval, tasks))
        ends.setdefault(arm, {})[seed] = ({m["iteration"]: figures(m["eval"]) for m in its if "eval" in m},
                                         eval_dirs)
    print()
    print(f"Arm A (one row: greedy): pass@1 {start['pass1'] or 0:.3f}, fast_1 {start['fast1'] or 0:.3f}.")
    sampled = d / "arm-A-sampled" / "metrics.json"
    if sampled.exists():
        k = json.loads(sampled.read_text())["overall"].get("pass_at_k", {})
        print(f"Arm A sampled (8 a task, temperature 1): pass@1 {k.get('pass@1', 0):.3f}, "
              f"pass@8 {k.get('pass@8', 0):.3f}.")
    seen = d / "arm-A-seen" / "metrics.json"
    if seen.exists():
        f = figures(json.loads(seen.read_text())["overall"])
        print(f"Arm A on {f['n']} of its training tasks (greedy): pass@1 {f['pass1'] or 0:.3f}, "
              f"fast_1 {f['fast1'] or 0:.3f}.")
    for line in proposer_samples(d) + seen_lines + learning_lines:
        if line:
            print(line)
    if baseline is not None:
        print(against(f"Arm A against {baseline}'s arm A", start_outcomes, baseline_outcomes))
        line = module_followed(f"{baseline}'s arm A", baseline / "arm-A", held_out_tasks(baseline))
        if line:
            print(f"Its completions against their module: {line}.")
    for line in pairs:
        if line:
            print(line)
    if classes is not None and by_transitions[0]:
        print("Held-out tasks correct, by how many of their operator transitions the training pairs teach "
              "(every, some, none): " + "; ".join(line for line in by_transitions if line) + ".")
    if by_status[0]:
        print("Held-out verdicts by status: " + "; ".join(line for line in by_status if line) + ".")
    if by_module[0]:
        print("Held-out completions against their module (the module's lines heading the kernels; a kernel "
              "named for the operator at each position of its chain; launches; constructor): "
              + "; ".join(line for line in by_module if line) + ".")
    for (arm, seed), c in sorted(correct.items()):
        if arm[0] != "C":
            continue
        b = "B" + arm[1:]  # the B of the same variant
        if (b, seed) in correct:
            line = paired(seed, arm, c, b, correct[(b, seed)])
            if line:
                print(line)
        # A variant of C on the same pool against C: what the variant changed on the same draws.
        if arm not in ("C", CONTROL) and "tasksseen" not in arm and ("C", seed) in correct:
            line = paired(seed, arm, c, "C", correct[("C", seed)])
            if line:
                print(line)
        # A variant against the variant it extends by one option (temp0.7 over advdr_grpo; a clamp over
        # that): the one option's change on the same draws, tasks=seen arms included.
        parent = parent_variant(arm)
        if parent and (parent, seed) in correct:
            line = paired(seed, arm, c, parent, correct[(parent, seed)])
            if line:
                print(line)
    # Every arm on the pool against the control at its seed: above it, the updates raised the pass
    # rate on the draws they were made for; the sharpest test of learning the runs hold.
    for (arm, seed), c in sorted(correct.items()):
        if arm[0] == "D" or arm == CONTROL or "tasksseen" in arm or (CONTROL, seed) not in correct:
            continue
        line = paired(seed, arm, c, CONTROL, correct[(CONTROL, seed)])
        if line:
            print(line)
    # The seed spread a comparison must beat, per arm at the last iteration all its seeds were evaluated
    # at (a seed cut short ends before the others): the mean and range over its seeds, and each later
    # seed against the first task by task, the churn between seeds of one setting.
    for arm, seeds in sorted(ends.items()):
        shared = set.intersection(*(set(evals) for evals, _ in seeds.values()))
        if not shared:
            print(f"Arm {arm}: its {len(seeds)} seeds share no evaluated iteration.")
            continue
        at = max(shared)
        p = [evals[at]["pass1"] or 0.0 for evals, _ in seeds.values()]
        f = [evals[at]["fast1"] or 0.0 for evals, _ in seeds.values()]
        print(f"Arm {arm} over {len(seeds)} seed(s) at iteration {at}: pass@1 mean {sum(p) / len(p):.3f} (range "
              f"{min(p):.3f}-{max(p):.3f}), fast_1 mean {sum(f) / len(f):.3f} (range {min(f):.3f}-{max(f):.3f}).")
        first, *later = sorted(seeds, key=int)
        for seed in later:
            line = against(f"Arm {arm} seed {seed} against seed {first} at iteration {at}",
                           outcomes(seeds[seed][1][at]), outcomes(seeds[first][1][at]))
            if line:
                print(line)


if __name__ == "__main__":
    main()
