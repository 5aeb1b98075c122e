#!/usr/bin/env bash
# The learning experiment's stages in one call of a machine that gives each command a deadline and
# keeps nothing between sessions (the project's GPU machine: docs/LEARNING.md, "What the device
# allows"). Builds build-gpu/kernelzero when it is missing and KZ_BIN names no other binary
# (scripts/gpu_test.sh: carry .deps), then runs scripts/learning_experiment.sh once per STAGE (an arm
# as arm:C:1; stages joined by commas at once, as sft,proposer) until DEADLINE_S seconds after the
# start: the running stage gets SIGINT then, which every stage resumes from on the next call (teach
# keeps its verdicts, sft checkpoints). Logs and packed results go to $OUT:
#   scripts/learning_session.sh DEADLINE_S STAGE...
#   session.log       what ran and when, each stage's exit status and last lines
#   logs.tgz          each stage's whole log (STAGE.log, its : and = written -)
#   results.tgz       the small files of the run directory (bench and train metrics, reports, logs,
#                     each arm's pool copy: its attempts are its per-task pass rates by iteration):
#                     never models, checkpoints, the training pool, the corpus or the teach run
#   corpus.tgz        with KZ_LEARN_PACK_CORPUS=1, once the pool is imported: corpus/, pool.sqlite,
#                     pool.corpus (carry them back to runs/learning to skip the stage's import)
#   teach.tar.xz      with KZ_LEARN_PACK_TEACH=1: the teach run (KZ_LEARN_TEACH_ARCHIVE of a later call)
#   arms.tgz.aa, .ab  with KZ_LEARN_PACK_ARMS=1: every RL arm that has a checkpoint and no seen stage
#                     on it (its run, last checkpoint, pool copy, toml; not the rollout log: a
#                     running arm's checkpoint without its adapters, a finished one's with its
#                     adapters alone, for its seen stage), in parts of 15 MiB. Parts found in the
#                     run directory at the start are unpacked there (carried packed: a carry counts
#                     unpacked bytes), so that a call on another machine resumes the arms over the
#                     same rebuilt Coder (the arm stage refuses another: docs/LEARNING.md, "Across
#                     machines")
#   kernelzero.tgz    with KZ_LEARN_PACK_BIN=1: build-gpu/kernelzero and the stamp of what it was built
#                     from; carried back as build-gpu/kernelzero.tgz, a later call on a fresh machine
#                     runs it instead of building again where the stamp is that call's own
# KZ_LEARN_CORPUS_ARCHIVE names a packed corpus layout (corpus/, pool.sqlite, pool.corpus: the
# committed data/learning/corpus-*.tar.xz) unpacked into $DIR when $DIR/corpus is absent, so that a
# call carries only what the tree does not hold (by-gpu/, an arms pack).
# Results made over one kind of GPU's Coder (arm A, the seen stage, an arms pack) may be carried under
# $DIR/by-gpu/KIND/ for each kind a call may land on (KIND a word of nvidia-smi's GPU name: H100,
# H200): the folder of the machine's kind replaces the same-named entries of $DIR, the others are
# dropped, so that a call free to take either kind resumes over the Coder it will rebuild.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
DEADLINE=${1:?usage: $0 DEADLINE_S STAGE...}
shift
S=$SECONDS
OUTD=${OUT:-/tmp/kz-out}
DIR=${KZ_LEARN_DIR:-runs/learning}
LOG=$OUTD/session.log
mkdir -p "$OUTD" "$DIR"
left() { echo $(( DEADLINE - (SECONDS - S) )); }
say() { echo "[session +$(( SECONDS - S ))s] $*" | tee -a "$LOG"; }
gpus=$(nvidia-smi --query-gpu=name,memory.used --format=csv,noheader 2>/dev/null)
gpu=$(head -1 <<< "$gpus") && gpu=${gpu%%,*}  # the first GPU's name
say "$(git rev-parse --short HEAD 2>/dev/null) ($(git status --short 2>/dev/null | wc -l) paths changed); $gpus"
# What a build of kernelzero here depends on: this checkout's path (the binary names its python/ and
# .deps/prefix), the C++ sources and build scripts, the torch it links and the GPU's architecture.
build_stamp() {
  { pwd; python3 -c 'import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_capability())' 2>/dev/null
    find . \( -path ./.deps -o -path './build*' -o -path ./.venv -o -path ./runs -o -path ./.git \) -prune -o -type f \
      \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name CMakeLists.txt -o -name '*.cmake' \
      -o -name gpu_test.sh \) -print0 | sort -z | xargs -0 sha256sum; } | sha256sum | cut -c1-16
}
# A build carried from an earlier call's kernelzero.tgz, used only where it is this call's build.
if [[ -z ${KZ_BIN:-} && -f build-gpu/kernelzero.tgz ]]; then
  tar xzf build-gpu/kernelzero.tgz -C build-gpu && rm -f build-gpu/kernelzero.tgz
  stamp=$(build_stamp) carried=$(cat build-gpu/kernelzero.stamp 2>/dev/null) refused=
  if [[ $carried != "$stamp" ]]; then
    refused="${carried:-without a stamp} is not this call's ($stamp)"
  elif ! bash scripts/gpu_deps.sh || ! build-gpu/kernelzero info > /dev/null 2>&1; then
    refused="$stamp does not run here"
  fi
  if [[ -n $refused ]]; then
    say "carried build $refused: building"
    rm -f build-gpu/kernelzero build-gpu/kernelzero.stamp
  else
    say "carried build $stamp used"
  fi
fi
if [[ ! -x ${KZ_BIN:-build-gpu/kernelzero} ]]; then
  KZ_BUILD_TARGET=kernelzero KZ_TEST_LABEL=none bash scripts/gpu_test.sh build-gpu >> "$LOG" 2>&1 \
    || { say "build failed"; tail -30 "$LOG"; exit 1; }
  [[ -z ${KZ_BIN:-} ]] && build_stamp > build-gpu/kernelzero.stamp
  say "built"
fi
if [[ -n ${KZ_LEARN_CORPUS_ARCHIVE:-} && ! -d $DIR/corpus ]]; then
  bash scripts/learning/unpack.sh "$KZ_LEARN_CORPUS_ARCHIVE" "$DIR"
  [[ -d $DIR/corpus && -f $DIR/pool.sqlite ]] || { say "$KZ_LEARN_CORPUS_ARCHIVE holds no corpus/ and pool.sqlite"; exit 1; }
  say "corpus unpacked from $KZ_LEARN_CORPUS_ARCHIVE"
fi
if [[ -d $DIR/by-gpu ]]; then
  moved=()
  for kind in "$DIR"/by-gpu/*/; do
    kind=$(basename "$kind")
    # A whole word of the name: "H100" in "NVIDIA H100 80GB HBM3", not in "H1000".
    [[ -n $gpu && " ${gpu//[^A-Za-z0-9]/ } " == *" $kind "* ]] || continue
    for f in "$DIR/by-gpu/$kind"/*; do
      [[ -e $f ]] || continue
      rm -rf "${DIR:?}/${f##*/}" && mv "$f" "$DIR/" && moved+=("${f##*/}")
    done
  done
  say "by-gpu: ${gpu:-no GPU}: ${moved[*]:-nothing} put in place"
  rm -rf "$DIR/by-gpu"
fi
if compgen -G "$DIR/arms.tgz.*" > /dev/null; then
  cat "$DIR"/arms.tgz.* | tar xzf - -C "$DIR" || { say "arms.tgz.* in $DIR do not unpack"; exit 1; }
  rm -f "$DIR"/arms.tgz.*
  say "unpacked arms: $(find "$DIR" -mindepth 2 -maxdepth 2 -path '*/arm-*/checkpoints' -printf '%h ' | sed "s|$DIR/||g")"
fi
# One stage (an arm as arm:C:1) with at most $budget seconds, its log in $OUTD. timeout signals its
# process group: the stage's kernelzero gets the SIGINT itself (in the background too, where bash
# leaves SIGINT ignored: kernelzero sets its own handler). An arm's trainer is told when that comes
# (KZ_LEARN_DEADLINE) and starts no iteration that would run past it: a stage runs on to its end
# after the SIGINT, which an iteration cut there would lose with the seconds it ran.
run_stage() {
  local args
  IFS=: read -ra args <<< "$1"
  KZ_LEARN_DEADLINE=$((EPOCHSECONDS + budget)) timeout -s INT -k 30 "$budget" \
    bash scripts/learning_experiment.sh "${args[@]}" >> "$OUTD/${1//[:=]/-}.log" 2>&1
}
rc=0
for stage in "$@"; do
  budget=$(( $(left) - ${KZ_LEARN_PACK_SECONDS:-25} ))
  (( budget > 10 )) || { say "no time left for $stage"; rc=124; break; }
  say "$stage (at most ${budget} s)"
  # Stages joined by commas run at once, on one GPU (sft,proposer: two models that do not depend on
  # each other; not "+", which kl=k3+ holds), and the next stage waits for all of them. A stage alone
  # runs in the foreground.
  IFS=, read -ra joined <<< "$stage"
  if (( ${#joined[@]} == 1 )); then
    run_stage "$stage"
    codes=("$?")
  else
    pids=() codes=()
    for one in "${joined[@]}"; do
      run_stage "$one" &
      pids+=("$!")
    done
    for pid in "${pids[@]}"; do
      wait "$pid"
      codes+=("$?")
    done
  fi
  for i in "${!joined[@]}"; do
    (( rc == 0 )) && rc=${codes[i]}
    say "${joined[i]}: exit ${codes[i]}"
    tail -3 "$OUTD/${joined[i]//[:=]/-}.log" | tee -a "$LOG"
  done
  (( rc == 0 )) || break
done
# An arm's pool copy is ~3 MB (the training pool's task sources; ~0.6 MB packed) with its attempts,
# and its write-ahead log where a killed arm left one.
(cd "$DIR" && find . -type f ! -name '*.lock' ! -path '*/checkpoints/*' ! -path '*/model/*' ! -path '*/model.tmp/*' \
  ! -path './teach/*' ! -path './corpus/*' \
  \( -name 'arm-*.tasks.sqlite' -o -name 'arm-*.tasks.sqlite-wal' -o -size -3M ! -name '*.sqlite*' \) \
  -print0 | tar czf "$OUTD/results.tgz" --null -T -)
if [[ ${KZ_LEARN_PACK_CORPUS:-0} == 1 && -f $DIR/pool.corpus ]]; then
  tar czf "$OUTD/corpus.tgz" -C "$DIR" corpus pool.sqlite pool.corpus
fi
if [[ ${KZ_LEARN_PACK_TEACH:-0} == 1 && -d $DIR/teach ]]; then
  tar cJf "$OUTD/teach.tar.xz" -C "$DIR" teach
fi
if [[ ${KZ_LEARN_PACK_ARMS:-0} == 1 ]]; then
  packed=() left_out=()
  while IFS= read -r run; do
    # An arm whose seen stage has run on its last checkpoint needs the checkpoint no more (its small
    # files are in results.tgz): left out, so that the packs of arms still running fit a carry.
    last=$(find "$DIR/$run/checkpoints" -mindepth 1 -maxdepth 1 -name 'iter-*' | sort | tail -1)
    [[ -n $last && -f $DIR/$run/seen-${last##*/}/metrics.json ]] && continue
    packed+=("$run")
    for f in "$DIR/$run".*; do [[ -f $f ]] && packed+=("${f#"$DIR"/}"); done
    # A running arm without its adapters (a resume restores the weights from the optimizer's fp32
    # masters, and the next checkpoint writes the adapter again); a finished one (the arm stage writes
    # its report.html once train has finished it) without its optimizer's state, which nothing
    # resumes, and with the adapter its seen stage loads.
    if [[ -f $DIR/$run/report.html ]]; then
      left_out+=("--exclude=$run/checkpoints/*/optimizer.pt")
    else
      left_out+=("--exclude=$run/checkpoints/*/adapter")
    fi
  done < <(cd "$DIR" && find . -mindepth 2 -maxdepth 2 -path './arm-*/checkpoints' -printf '%h\n' | cut -c3- | sort)
  # Nor the rollout log (~6 MB an iteration; a resume only replays from it the steps of an interrupted
  # iteration, which it samples afresh without): a pack stays ~20 MB an arm however long the arm,
  # and a resumed arm's log starts at its resume. Nor the run's lock, which belongs to this machine.
  (( ${#packed[@]} )) && tar czf - -C "$DIR" "${left_out[@]}" --exclude='arm-*/rollouts.jsonl' --exclude='*.lock' \
    "${packed[@]}" \
    | split -b 15m - "$OUTD/arms.tgz."
fi
if [[ ${KZ_LEARN_PACK_BIN:-0} == 1 && -f build-gpu/kernelzero.stamp ]]; then
  tar czf "$OUTD/kernelzero.tgz" -C build-gpu kernelzero kernelzero.stamp
fi
# One archive of the stages' logs: a device call brings back at most 8 files.
logs=()
for f in "$OUTD"/*.log; do [[ $f == "$LOG" ]] || logs+=("${f##*/}"); done
(( ${#logs[@]} )) && tar czf "$OUTD/logs.tgz" -C "$OUTD" --remove-files "${logs[@]}"
say "packed (KiB): $(du -k "$OUTD"/*.t*z* | tr '\n\t' '  ')"
exit "$rc"
