#!/usr/bin/env bash
# Policy-engine benchmarks on a GPU machine (results go to docs/BENCHMARKS.md), each with its anchor
# in the same command, on a random 7B-shaped Qwen2 in bf16:
#   generate: prompt 256, 256 new tokens, batch 1/16/64, and batch 64 with the decode GEMMs on
#             cuBLASLt's first pick (KZ_DECODE_GEMM_TUNING=0); then Hugging Face generate (hf_generate.py)
#   train:    LoRA r64 (alpha 128) on all linear layers, recomputation, batch 8 x 2048, LoRA products
#             in fp32 (as peft) and in bf16 (as autocast), GPU time per kernel of one step; then
#             Hugging Face + PEFT with gradient checkpointing (hf_train_lora.py), as written (LoRA
#             products in fp32) and under torch.autocast(bf16) (as HF Trainer with bf16 runs it)
#   splits:   batch 64 with the decode attention's key chunks fixed (KZ_DECODE_ATTENTION_SPLITS =
#             each of $KZ_SPLITS, default "1 2 4 8"), for tuning its default
# Usage: scripts/bench_engine.sh BUILD_DIR OUT_DIR [ANCHORS_DIR | none] [generate,train,splits]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:?build dir}
OUTD=${2:?out dir}
ANCHORS=$(cd "${3:-../shared/anchors}" 2>/dev/null && pwd || true)
PY=${KZ_PYTHON:-python3}
mkdir -p "$OUTD"
echo "[bench-engine] $(date -u +%FT%TZ) $($PY -c 'import torch, transformers; print(torch.__version__, torch.cuda.get_device_name(), "transformers", transformers.__version__)')"
WHAT=${4:-generate,train}
if [[ ,$WHAT, == *,generate,* ]]; then
  "$BUILD"/kernelzero bench-engine --arch qwen2 --preset 7b-shape --batch 1,16,64 --prompt-len 256 --new-tokens 256 --profile \
    --repeats ${KZ_BENCH_REPEATS:-3} --json | tee "$OUTD/engine_generate.jsonl"
  # The decode GEMMs' timed algorithm choice against cuBLASLt's first pick (decode_gemm.h), batch 64.
  echo "[bench-engine] KZ_DECODE_GEMM_TUNING=0:"
  KZ_DECODE_GEMM_TUNING=0 "$BUILD"/kernelzero bench-engine --arch qwen2 --preset 7b-shape --batch 64 --prompt-len 256 --new-tokens 256 \
    --profile --repeats ${KZ_BENCH_REPEATS:-3} --json | tee "$OUTD/engine_generate_untuned.jsonl"
  if [[ -f "$ANCHORS/hf_generate.py" ]]; then
    echo "[bench-engine] anchor (hf_generate.py):"
    (cd /tmp && timeout 400 $PY "$ANCHORS/hf_generate.py") 2>&1 | grep -E "ANCHOR|Error" | tee "$OUTD/anchor_generate.log"
  fi
fi
if [[ ,$WHAT, == *,splits,* ]]; then
  : > "$OUTD/engine_splits.jsonl"
  for n in ${KZ_SPLITS:-1 2 4 8}; do
    echo "[bench-engine] KZ_DECODE_ATTENTION_SPLITS=$n"
    KZ_DECODE_ATTENTION_SPLITS=$n "$BUILD"/kernelzero bench-engine --arch qwen2 --preset 7b-shape --batch 64 --prompt-len 256 \
      --new-tokens 256 --profile --repeats ${KZ_BENCH_REPEATS:-3} --json | tee -a "$OUTD/engine_splits.jsonl"
  done
fi
if [[ ,$WHAT, == *,train,* ]]; then
  # LoRA products in fp32 as peft computes them (the anchor's math), then in bf16 as autocast does.
  : > "$OUTD/engine_train.jsonl"
  for compute in adapter base; do
    "$BUILD"/kernelzero bench-engine --mode train --arch qwen2 --preset 7b-shape --lora-rank 64 --lora-alpha 128 --profile \
      --lora-compute $compute --train-batch 8 --seq-len 2048 --steps 4 --json | tee -a "$OUTD/engine_train.jsonl"
  done
  if [[ -f "$ANCHORS/hf_train_lora.py" ]]; then
    echo "[bench-engine] anchor (hf_train_lora.py):"
    (cd /tmp && timeout 600 $PY "$ANCHORS/hf_train_lora.py") 2>&1 | grep -E "HF train|peak mem|failed|Error" | tee "$OUTD/anchor_train.log"
    # The same script, unchanged, with autocast entered for all of it: the engine's --lora-compute base.
    echo "[bench-engine] anchor under torch.autocast(cuda, bf16):"
    (cd /tmp && timeout 600 $PY -c "import sys, torch; torch.autocast('cuda', dtype=torch.bfloat16).__enter__(); sys.argv = [sys.argv[1]]; exec(compile(open(sys.argv[0]).read(), sys.argv[0], 'exec'))" \
      "$ANCHORS/hf_train_lora.py") 2>&1 | grep -E "HF train|peak mem|failed|Error" | tee "$OUTD/anchor_train_autocast.log"
  fi
fi
