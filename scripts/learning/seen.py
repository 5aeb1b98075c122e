"""Where the SFT Coder leaves what it was taught: its greedy completions of 40 training tasks (the
`seen` stage of scripts/learning_experiment.sh, arm-A-seen/) against the corpus completion of each
task (corpus/train.jsonl), with the verifier's verdict. Greedy decoding of a model that fits its
corpus reproduces the completion; the first line where it does not is the decision it got wrong (an
operator's kernel name, a constructor argument, the inputs of `forward`).

Usage: python3 seen.py LEARN_DIR"""
import collections
import json
import sys
from pathlib import Path


def code_lines(completion):
    return [line.rstrip() for line in completion.splitlines() if line.strip()]


def first_difference(want, got):
    """(index, wanted line, written line) of the first differing non-blank line, or None."""
    for i, (w, g) in enumerate(zip(want, got)):
        if w != g:
            return i, w, g
    if len(want) != len(got):
        i = min(len(want), len(got))
        return i, want[i] if i < len(want) else "<end>", got[i] if i < len(got) else "<end>"
    return None


def kind(line):
    """What a wanted line decides, by its form in the teacher's code."""
    s = line.strip()
    if s.startswith("# "):  # the module's line a kernel, or a launch, computes
        return "a module line named in a comment"
    if s.startswith("def ") and s.endswith(":") and "_kernel(" in s:
        return "a kernel's name or parameters"
    if "_kernel[" in s:
        return "a kernel launch"
    if s.startswith("def __init__") or s.startswith("self."):  # the signature, a module, self.dim = dim
        return "a constructor argument"
    if s.startswith("def _"):
        return "a Triton helper function"
    if s.startswith("def forward"):
        return "forward's inputs"
    if s.startswith("@triton.jit"):
        return "how many kernels"
    return "a kernel body or glue line"


def main():
    d = Path(sys.argv[1])
    seen = d / "arm-A-seen"
    if not (seen / "completions.jsonl").exists():
        sys.exit(f"{seen / 'completions.jsonl'} is missing: run the seen stage first")
    taught = {}
    for line in (d / "corpus" / "train.jsonl").read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            taught[row["task"]] = row["completion"]
    status = {}
    for line in (seen / "verdicts.jsonl").read_text().splitlines():
        if line.strip():
            v = json.loads(line)
            status[v["id"].split("/")[-1].split("#")[0]] = v["status"]
    kinds, exact, lines = collections.Counter(), 0, []
    for line in (seen / "completions.jsonl").read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        task = row["task"].split("/")[-1]
        if task not in taught:
            continue
        want, got = code_lines(taught[task]), code_lines(row["completion"])
        diff = first_difference(want, got)
        verdict = status.get(task, "?")
        if diff is None:
            exact += 1
            lines.append(f"{task} {verdict}: the corpus completion, exactly")
            continue
        i, w, g = diff
        kinds[kind(w)] += 1
        lines.append(f"{task} {verdict}: line {i + 1} of {len(want)} ({kind(w)})\n  taught:  {w.strip()}\n"
                     f"  written: {g.strip()}")
    total = exact + sum(kinds.values())
    print(f"{total} seen tasks: {exact} reproduced exactly; the first difference decides "
          + ", ".join(f"{k} ({n})" for k, n in kinds.most_common()))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
