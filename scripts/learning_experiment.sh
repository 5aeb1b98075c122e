#!/usr/bin/env bash
# The learning experiment (docs/LEARNING.md), one stage per call, each resumable and each within one
# GPU command of <= 9 minutes:
#   scripts/learning_experiment.sh corpus           the teacher's verified kernels (a re-run finishes an
#                                                   interrupted one), the corpus, the training pool
#   scripts/learning_experiment.sh sft              the Coder from scratch (a re-run resumes an
#                                                   interrupted one); arm A (the SFT Coder on the
#                                                   held-out tasks)
#   scripts/learning_experiment.sh proposer         the Proposer from scratch on the corpus's pairs and
#                                                   the generator's (resumes likewise): only arm D
#                                                   loads it; then its modules at temperatures 1 and
#                                                   0.7 (the proposals stage)
#   scripts/learning_experiment.sh proposals [T]    the SFT Proposer's modules for API sets of the
#                                                   teacher's families, sampled at T (1), validated
#   scripts/learning_experiment.sh sampled          the SFT Coder sampled 8 times a held-out task (pass@8)
#   scripts/learning_experiment.sh seen [RUN]       the SFT Coder, greedy, on 40 of its training tasks, and
#                                                   where it first leaves the completion it was taught;
#                                                   with an arm's run (arm-C-seed1), its last checkpoint
#   scripts/learning_experiment.sh arm B|C|D SEED [lr=V] [warmup=N] [mb=N] [temp=V] [kl=k3_clamped|k3+] [beta=V] [adv=dr_grpo] [tasks=seen|seenN] [ptemp=V] [pdraws=N]
#                                                   one RL arm from the SFT checkpoint; a variant: the
#                                                   Coder's lr (lr=0: the control, never updated), its
#                                                   lr's warm-up over N AdamW steps, its AdamW steps
#                                                   an iteration (mb, 4 otherwise), its sampling
#                                                   temperature in the Coder steps, the KL's estimator
#                                                   and weight (0.04 otherwise), the advantage
#                                                   (dr_grpo: no std division), or only the seen
#                                                   stage's 40 tasks to train on (does RL raise what
#                                                   it trains on?), or the first N of them (seen16:
#                                                   each drawn in every iteration); arm D's Proposer's
#                                                   sampling temperature in its propose stage (ptemp);
#                                                   arm D's run is named for its Proposer's drawn
#                                                   pairs (pdraws: added where they are not 0, and
#                                                   checked where given)
#   scripts/learning_experiment.sh table [BASE]     the summary table (markdown) of what has run; with
#                                                   another run's directory, arm A against its arm A
# Arms: A SFT only; B GRPO, correctness and speed from the first step; C CA-GRPO, tasks drawn uniformly
# from the training pool; D CA-GRPO with the frontier and the Proposer (co-evolution).
# Environment: KZ_BIN (build-gpu/kernelzero), KZ_LEARN_DIR (runs/learning), KZ_LEARN_DRAWS (2400 teacher
# draws), KZ_LEARN_LANES (12 verifier lanes and validations at once), KZ_LEARN_DEVICE (cuda),
# KZ_LEARN_TEACH_ARCHIVE (a packed teach run, e.g. an earlier call's teach.tar.xz, that starts an
# absent teach/: teach then verifies only the jobs it has no verdict for), KZ_LEARN_SEEN (40 training
# tasks in the seen stage), KZ_LEARN_PROPOSER_DRAWS (6000 of the generator's pairs in the Proposer's SFT).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BIN=${KZ_BIN:-build-gpu/kernelzero}
DIR=${KZ_LEARN_DIR:-runs/learning}
DEV=${KZ_LEARN_DEVICE:-cuda}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
CORPUS=$DIR/corpus
SIZES=typical
[[ $DEV == cpu ]] && SIZES=small

stage=${1:?usage: $0 corpus | sft | proposer | proposals [T] | sampled | seen [RUN] | arm B|C|D SEED [lr=V] [warmup=N] [mb=N] [temp=V] [kl=k3_clamped|k3+] [beta=V] [adv=dr_grpo] [tasks=seen|seenN] [ptemp=V] [pdraws=N] | table [BASE]}

# A sampling temperature as the stages take it: a decimal number (temp=, ptemp=, proposals T).
TEMPERATURE='^[0-9]*\.?[0-9]+$'

# The seen stage's tasks: the first KZ_LEARN_SEEN training tasks by name, copied once.
seen_tasks() {
  [[ -d $DIR/seen-tasks ]] && return
  local taught
  mapfile -t taught < <(find "$CORPUS/train_tasks" -maxdepth 1 -name 'task_*.py' | sort)
  rm -rf "$DIR/seen-tasks.tmp" && mkdir -p "$DIR/seen-tasks.tmp"
  cp -t "$DIR/seen-tasks.tmp" "${taught[@]:0:${KZ_LEARN_SEEN:-40}}"
  mv "$DIR/seen-tasks.tmp" "$DIR/seen-tasks"
}
# What arm D's Proposer can give its Coder, measured without running D: KZ_LEARN_PROPOSALS (64) API
# sets of the teacher's families (levels 1 and 2 in turn), one module each sampled at temperature $1,
# validated as D's propose stage validates them, against a copy of the training pool (a copy of a
# training task is not novel). proposals-tT/: the command's summary and each module
# (scripts/learning/proposals.py).
proposals() {
  local out=$DIR/proposals-t$1
  [[ -f $out/summary.json ]] && return
  [[ -d $DIR/proposer_sft/model ]] || { echo "no SFT Proposer in $DIR/proposer_sft/model: run the proposer stage first" >&2; exit 2; }
  rm -rf "$out.tmp" && mkdir -p "$out.tmp" && cp "$DIR/pool.sqlite" "$out.tmp/store.sqlite" || return
  "$BIN" propose --model "$DIR/proposer_sft/model" --model-device "$DEV" --device "$DEV" --catalog "$CORPUS/catalog.json" \
    --n "${KZ_LEARN_PROPOSALS:-64}" --temperature "$1" --seed 1 --store "$out.tmp/store.sqlite" --json \
    > "$out.tmp/summary.json" || return
  python3 "$ROOT/scripts/learning/proposals.py" "$out.tmp/store.sqlite" "$out.tmp/proposals.jsonl" || return
  rm "$out.tmp/store.sqlite" && mv "$out.tmp" "$out"
  python3 -c 'import json, sys; s = json.load(open(sys.argv[1]))
print("SFT Proposer at temperature %s: %d of %d modules valid, turned down by check: %s"
      % (sys.argv[2], s["valid"], s["proposed"], json.dumps(s["failed_checks"])))' "$out/summary.json" "$1"
}
# A model directory's fingerprint: its files' contents.
fingerprint() { (cd "$1" && sha256sum -- * | sha256sum | cut -c1-16); }
# Whatever is made over the SFT Coder (an arm's run, a bench of it) is resumed over the same Coder only,
# and arm D over the same SFT Proposer too (same_coder RESULT proposer): a session rebuilds both (they
# cannot travel), and the rebuild repeats them on the same kind of GPU only (docs/LEARNING.md, "Across
# machines"). Their fingerprints go beside a result made from now on (RESULT.base: the Coder's, then
# the Proposer's); a result without one is resumed unchecked. Without `proposer` only the Coder's is
# compared: the seen stage of arm D's run loads its Coder alone.
same_coder() {
  [[ -d $DIR/sft/model ]] || { echo "no SFT Coder in $DIR/sft/model: run the sft stage first" >&2; exit 2; }
  [[ -n ${coder_sha:-} ]] || coder_sha=$(fingerprint "$DIR/sft/model")
  local base=$coder_sha models="SFT Coder" made
  if [[ ${2:-} == proposer ]]; then
    base+=" $(fingerprint "$DIR/proposer_sft/model")" models="SFT Coder and Proposer"
  fi
  if [[ -f $1.base ]]; then
    made=$(cat "$1.base")
    [[ ${2:-} == proposer ]] || made=${made%% *}
    [[ $made == "$base" ]] || {
      echo "$1 was made over another $models (fingerprint $made, now $base: rebuilt on another kind of GPU?); move it away to start it afresh" >&2
      exit 2
    }
  elif [[ ! -e $1 ]]; then
    echo "$base" > "$1.base"
  fi
}
case $stage in
corpus)
  if [[ -n ${KZ_LEARN_TEACH_ARCHIVE:-} && ! -d $DIR/teach ]]; then
    bash scripts/learning/unpack.sh "$KZ_LEARN_TEACH_ARCHIVE" "$DIR"
    [[ -d $DIR/teach ]] || { echo "$KZ_LEARN_TEACH_ARCHIVE holds no teach/ directory" >&2; exit 2; }
  fi
  # One candidate per task, a quarter of them fused (the corpus's mix): the corpus trains on one.
  "$BIN" teach --out "$DIR/teach" --count "${KZ_LEARN_DRAWS:-2400}" --seed 1 --supported-only --sizes $SIZES \
    --fused-share 0.25 --device "$DEV" --workers "${KZ_LEARN_LANES:-12}" \
    --validation-workers "${KZ_LEARN_LANES:-12}" --no-progress
  # Held out at level 2 only: every operator is taught alone, the evaluation asks for new compositions.
  "$BIN" corpus --from "$DIR/teach" --out "$CORPUS" --heldout-levels 2 --heldout-max-apis "${KZ_LEARN_HELDOUT_MAX_APIS:-3}"
  # The pool is imported once per corpus: a re-run that leaves the corpus as it was keeps it. Its tasks
  # keep the validations teach recorded for them (the same source, API set and device).
  digest=$(cat "$CORPUS/corpus.json" "$CORPUS/train_tasks/manifest.jsonl" | sha256sum | cut -d' ' -f1)
  if [[ ! -f $DIR/pool.sqlite || $(cat "$DIR/pool.corpus" 2>/dev/null) != "$digest" ]]; then
    rm -f "$DIR/pool.sqlite"* "$DIR/pool.corpus"
    "$BIN" tasks import --store "$DIR/pool.sqlite" "$CORPUS/train_tasks" --origin corpus --device "$DEV" \
      --workers "${KZ_LEARN_LANES:-12}" --validations "$DIR/teach/validation.jsonl"
    echo "$digest" > "$DIR/pool.corpus"
  fi
  ;;
sft | proposer)
  # A model directory is renamed into place once its run is done; an interrupted run resumes. Only arm
  # D loads the Proposer: a session of B and C arms skips its SFT.
  # The Coder's held-out loss after each epoch: the held-out tasks' teacher pairs (a corpus made
  # before heldout.jsonl existed has none).
  role=coder out=$DIR/sft data=$CORPUS/train.jsonl held_out=()
  [[ -f $CORPUS/heldout.jsonl ]] && held_out=(--eval-data "$CORPUS/heldout.jsonl")
  [[ $stage == proposer ]] && role=proposer out=$DIR/proposer_sft data=$CORPUS/proposer.jsonl held_out=()
  # The Proposer's pairs: the corpus's, and KZ_LEARN_PROPOSER_DRAWS (6000; 0: none) of the symbolic
  # generator's own modules of two or three operators outside the held-out API sets
  # (teach/proposer_pairs.h): the corpus's pairs of two or more operators alone leave the Proposer
  # unable to compose (docs/LEARNING.md). Their number is the Proposer's (proposer_sft/draws, beside
  # its model: arm D's run is named for it), and a resumed SFT keeps the number it started with. The
  # draw is by seed and takes under a second, so each SFT that has not ended draws again: a resume
  # gets the same pairs, and no file of other draws is reused.
  if [[ $stage == proposer ]]; then
    draws=${KZ_LEARN_PROPOSER_DRAWS:-6000}
    [[ $draws =~ ^[0-9]+$ ]] || { echo "KZ_LEARN_PROPOSER_DRAWS=$draws is not a whole number" >&2; exit 2; }
    draws=$((10#$draws))
    if [[ -f $out/draws ]]; then
      [[ $(cat "$out/draws") == "$draws" ]] || {
        echo "$out was trained on $(cat "$out/draws") drawn pairs, not KZ_LEARN_PROPOSER_DRAWS=$draws: move it away to start it afresh" >&2
        exit 2
      }
    elif [[ -e $out ]]; then
      echo "$out does not say how many drawn pairs it was trained on (no $out/draws): move it away to start it afresh" >&2
      exit 2
    else
      mkdir -p "$out" && echo "$draws" > "$out/draws.tmp" && mv "$out/draws.tmp" "$out/draws"
    fi
    if ((draws)); then
      data=$DIR/proposer_pairs.jsonl
      if [[ ! -d $out/model ]]; then
        "$BIN" proposer-pairs --corpus "$CORPUS" --out "$DIR/proposer_drawn.jsonl" --n "$draws" \
          --level 2 --max-apis 3 --seed 1 || exit
        cat "$CORPUS/proposer.jsonl" "$DIR/proposer_drawn.jsonl" > "$data.tmp" && mv "$data.tmp" "$data" || exit
      fi
    fi
  fi
  if [[ ! -d $out/model ]]; then
    resume=()
    [[ -n $(find "$out/checkpoints" -maxdepth 1 -name 'step-*' ! -name '*.tmp' 2>/dev/null) ]] && resume=(--resume)
    "$BIN" sft --config "scripts/learning/${role}_sft.toml" --data "$data" "${held_out[@]}" --out "$out" --device "$DEV" \
      "${resume[@]}"
  fi
  if [[ $stage == proposer ]]; then
    echo "SFT Proposer fingerprint $(fingerprint "$out/model")"
    # Its modules at 1 (arm D's default) and at 0.7 (ptemp=0.7). They run beside the Coder's SFT in a
    # session's first call (sft,proposer); one that fails leaves the Proposer to arm D all the same.
    for t in 1 0.7; do proposals "$t" || echo "proposals at temperature $t failed (exit $?)" >&2; done
  fi
  if [[ $stage == sft ]]; then
    # Arm A: the SFT Coder, greedy, on the held-out tasks: every RL arm's starting point. Resumed, bench
    # checks the run against arm-A/run.json and loads the Coder only for a completion it lacks.
    same_coder "$DIR/arm-A"
    echo "SFT Coder fingerprint $coder_sha"
    "$BIN" bench --model "$DIR/sft/model" --tasks "$CORPUS/heldout" --backend triton --device "$DEV" \
      --max-new-tokens 3072 --out "$DIR/arm-A" --resume --no-progress --json | tail -1
  fi
  ;;
proposals)
  t=${2:-1}
  [[ $t =~ $TEMPERATURE ]] || { echo "proposals $t: the temperature is not a number" >&2; exit 2; }
  proposals "$t"
  ;;
sampled)
  # How far the SFT Coder reaches when sampled: 8 completions a held-out task at temperature 1 (pass@1
  # and pass@8). Greedy arm A at ~0 with pass@8 above it says the held-out tasks are within reach.
  same_coder "$DIR/arm-A-sampled"
  "$BIN" bench --model "$DIR/sft/model" --tasks "$CORPUS/heldout" --backend triton --device "$DEV" \
    --samples 8 --k 1,8 --temperature 1 --seed 1 --max-new-tokens 3072 --out "$DIR/arm-A-sampled" --resume \
    --no-progress --json | tail -1
  ;;
seen)
  # What the SFT Coder learned of what it was shown: greedy on the first 40 training tasks. High here
  # and ~0 on the held-out tasks says it memorises without composing; low here says SFT fell short.
  # With an arm's run: its Coder at its last checkpoint on the same tasks (did RL keep what SFT taught,
  # or, for a tasks=seen arm, raise what it trained on?).
  seen_tasks
  adapter=() out=$DIR/arm-A-seen
  if [[ -n ${2:-} ]]; then
    run=$DIR/${2%/}
    last=
    [[ -d $run/checkpoints ]] && last=$(find "$run/checkpoints" -mindepth 1 -maxdepth 1 -name 'iter-??????' | sort | tail -1)
    [[ -n $last ]] || { echo "$run has no checkpoint: run its arm first" >&2; exit 2; }
    # An arm unpacked from learning_session.sh's arms.tgz has its adapter again at its next checkpoint.
    [[ -d $last/coder/adapter ]] || { echo "$last has no adapter (an arm unpacked from arms.tgz): run its arm an iteration first" >&2; exit 2; }
    same_coder "$run"
    adapter=(--adapter "$last/coder/adapter") out=$run/seen-$(basename "$last")
  fi
  same_coder "$out"
  "$BIN" bench --model "$DIR/sft/model" "${adapter[@]}" --tasks "$DIR/seen-tasks" --backend triton --device "$DEV" \
    --max-new-tokens 3072 --out "$out" --resume --no-progress --json | tail -1
  if [[ -z ${2:-} ]]; then
    # Each completion against the one it was taught: where greedy decoding first leaves it.
    python3 "$ROOT/scripts/learning/seen.py" "$DIR" > "$out/differences.txt"
    head -1 "$out/differences.txt"
  fi
  ;;
arm)
  arm=${2:?arm B, C or D}
  seed=${3:?seed}
  case $arm in
  B) reward=grpo propose=false ;;
  C) reward=ca_grpo propose=false ;;
  D)
    reward=ca_grpo propose=true
    [[ -d $DIR/proposer_sft/model ]] || { echo "arm D needs the SFT Proposer: run the proposer stage first" >&2; exit 2; }
    ;;
  *) echo "unknown arm $arm (B, C or D; A is the sft stage's evaluation)" >&2; exit 2 ;;
  esac
  # A variant's options name its run: arm-C-seed1-lr3e-4-tasksseen.
  lr=1e-3 warmup=0 mb=4 temp=1.0 ptemp=1.0 pdraws='' kl=k3 beta=0.04 adv=grpo tasks=pool every=8 variant=
  at_end=$(sed -n 's/^iterations = //p' scripts/learning/arm.toml)  # every = this: evaluated at the end only
  for option in "${@:4}"; do
    case $option in
    lr=?*) lr=${option#lr=} ;;
    warmup=?*) warmup=${option#warmup=} ;;
    mb=?*) mb=${option#mb=} ;;
    temp=?*) temp=${option#temp=} ;;
    # The Proposer's sampling temperature in the propose stage: arm D's alone.
    ptemp=?*)
      [[ $propose == true ]] || { echo "ptemp is the Proposer's sampling temperature: arm D only" >&2; exit 2; }
      ptemp=${option#ptemp=} ;;
    # The drawn pairs its Proposer trained on (the proposer stage's KZ_LEARN_PROPOSER_DRAWS): arm D's
    # run is named for them, so that runs over Proposers trained on different pairs stay apart.
    pdraws=?*)
      [[ $propose == true ]] || { echo "pdraws is the drawn pairs of arm D's Proposer: arm D only" >&2; exit 2; }
      pdraws=${option#pdraws=} ;;
    kl=k3_clamped | kl=k3+) kl=${option#kl=} ;;
    beta=?*) beta=${option#beta=} ;;
    adv=dr_grpo) adv=dr_grpo ;;
    # Evaluated on held-out tasks at its end only (every = the template's iterations). seenN: the
    # first N of them, so that an iteration's tasks_per_step draws each of them (N <= 16) every time.
    tasks=seen | tasks=seen[1-9]*) tasks=${option#tasks=} every=$at_end ;;
    *) echo "unknown arm option $option (lr=VALUE, warmup=STEPS, mb=N, temp=VALUE, kl=k3_clamped, kl=k3+, beta=VALUE, adv=dr_grpo, tasks=seen, tasks=seenN, ptemp=VALUE, pdraws=N)" >&2; exit 2 ;;
    esac
    variant+=-${option//=/}
  done
  if [[ $propose == true ]]; then
    [[ -f $DIR/proposer_sft/draws ]] || { echo "$DIR/proposer_sft does not say how many drawn pairs it was trained on (no draws file): run the proposer stage again" >&2; exit 2; }
    trained=$(cat "$DIR/proposer_sft/draws")
    [[ $trained =~ ^[0-9]+$ ]] || { echo "$DIR/proposer_sft/draws holds no number of drawn pairs: run the proposer stage again" >&2; exit 2; }
    if [[ -z $pdraws ]]; then
      ((trained == 0)) || variant+=-pdraws$trained
    elif [[ ! $pdraws =~ ^[0-9]+$ ]] || ((10#$pdraws != trained)); then
      echo "pdraws=$pdraws: the SFT Proposer was trained on $trained drawn pairs (the proposer stage's KZ_LEARN_PROPOSER_DRAWS)" >&2
      exit 2
    fi
  fi
  for name in lr beta; do
    [[ ${!name} =~ ^[0-9.]+(e-?[0-9]+)?$ ]] || { echo "$name=${!name} is not a number" >&2; exit 2; }
  done
  # lr=0 is the control: the SFT Coder sampled and verified on the arms' draws, never updated. Its
  # held-out evaluation is arm A's, so it is evaluated at its end only.
  [[ $lr =~ ^[0.]+$ ]] && every=$at_end
  [[ $tasks =~ ^(pool|seen|seen[1-9][0-9]*)$ ]] || { echo "tasks=$tasks is not seen or seenN (N a whole number above 0)" >&2; exit 2; }
  [[ $mb =~ ^[1-9][0-9]*$ ]] || { echo "mb=$mb is not a whole number of AdamW steps above 0" >&2; exit 2; }
  [[ $warmup =~ ^[0-9]+$ ]] || { echo "warmup=$warmup is not a whole number of steps" >&2; exit 2; }
  # 0 would be greedy: a group of G equal samples, no signal.
  for name in temp ptemp; do
    [[ ${!name} =~ $TEMPERATURE && ! ${!name} =~ ^[0.]+$ ]] || { echo "$name=${!name} is not a number above 0" >&2; exit 2; }
  done
  if [[ $tasks == seen* ]]; then
    seen_tasks
    if [[ $tasks != seen ]]; then
      mapfile -t first < <(find "$DIR/seen-tasks" -maxdepth 1 -name 'task_*.py' | sort | head -n "${tasks#seen}")
      (( ${#first[@]} == ${tasks#seen} )) || { echo "tasks=$tasks: the seen stage has ${#first[@]} tasks" >&2; exit 2; }
    fi
  fi
  run=$DIR/arm-$arm-seed$seed$variant
  if [[ $propose == true ]]; then same_coder "$run" proposer; else same_coder "$run"; fi
  # Each arm trains on its own copy of the pool: its proposals and attempts stay its own. A tasks=seen
  # arm's pool holds the seen stage's tasks only (validated again on import: teach's validations are
  # not carried with the corpus).
  if [[ ! -f $run.tasks.sqlite ]]; then
    if [[ $tasks == seen* ]]; then
      from=$DIR/seen-tasks
      if [[ $tasks != seen ]]; then
        from=$run.tasks.tmp
        rm -rf "$from" && mkdir -p "$from" && cp -t "$from" "${first[@]}"
      fi
      rm -f "$run.tasks.tmp.sqlite"*
      "$BIN" tasks import --store "$run.tasks.tmp.sqlite" "$from" --origin corpus --device "$DEV" \
        --workers "${KZ_LEARN_LANES:-12}"
      mv "$run.tasks.tmp.sqlite" "$run.tasks.sqlite"
      rm -rf "$run.tasks.tmp"
    else
      cp "$DIR/pool.sqlite" "$run.tasks.tmp.sqlite" && mv "$run.tasks.tmp.sqlite" "$run.tasks.sqlite"
    fi
  fi
  sed -e "s|@ARM@|$arm|; s|@SEED@|$seed|; s|@DEVICE@|$DEV|g; s|@CODER@|$DIR/sft/model|; s|@CODER_LR@|$lr|; s|@KL@|$kl|; s|@KL_BETA@|$beta|; s|@ADVANTAGE@|$adv|" \
      -e "s|@WARMUP@|$warmup|; s|@MINI_BATCHES@|$mb|" \
      -e "s|@TEMPERATURE@|$temp|; s|@PROPOSE_TEMPERATURE@|$ptemp|; s|@EVAL_EVERY@|$every|" \
      -e "s|@PROPOSER@|$DIR/proposer_sft/model|; s|@STORE@|$run.tasks.sqlite|; s|@REWARD@|$reward|" \
      -e "s|@PROPOSE@|$propose|; s|@CATALOG@|$CORPUS/catalog.json|; s|@HELDOUT@|$CORPUS/heldout|g; s|@SIZES@|$SIZES|" \
      scripts/learning/arm.toml > "$run.toml"
  # A finished arm (its report.html written below) unpacked from learning_session.sh's arms.tgz holds
  # its adapters for the seen stage, not the optimizer's state a resume loads: nothing to do here.
  if [[ -f $run/report.html ]] && ! compgen -G "$run/checkpoints/iter-*/coder/optimizer.pt" > /dev/null; then
    echo "$run is finished (its last checkpoint's adapters only, from an arms pack): nothing to resume"
    exit 0
  fi
  resume=()
  [[ -f $run/run.json ]] && resume=(--resume)
  # KZ_LEARN_DEADLINE (Unix seconds; scripts/learning_session.sh): no iteration is started that would
  # end after it; train exits 130 then, as when interrupted.
  "$BIN" train --config "$run.toml" --out "$run" "${resume[@]}" ${KZ_LEARN_DEADLINE:+--deadline "$KZ_LEARN_DEADLINE"}
  "$BIN" report "$run" > /dev/null
  ;;
table)
  # A second argument: another run's directory whose arm A this one's is compared with, task by task.
  python3 "$ROOT/scripts/learning/table.py" "$DIR" ${2:+"$2"}
  ;;
*)
  echo "unknown stage $stage (corpus, sft, proposer, proposals, sampled, seen, arm, table)" >&2
  exit 2
  ;;
esac
