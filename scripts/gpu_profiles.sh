#!/usr/bin/env bash
# Takes the shipped GPU profiles (profiles/h100/, profiles/h200/: one folder per GPU) on a machine with one CUDA GPU and PyTorch,
# torchvision, timm and transformers installed; nothing else of the testbed's is needed:
#   bash scripts/gpu_profiles.sh OUT_DIR [PYTHON]
# Each profile runs in a process of its own (its own peak memory); one that fails is reported and
# the others go on. ResNet-50 and ViT-S/16 at 224x224, GPT-2 small at 1024 tokens, each at two
# batches, in bfloat16 mixed precision (autocast; fp32 weights and gradients), as such models train.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: $0 OUT_DIR [PYTHON]}
py=${2:-python3}
mkdir -p "$out"
"$py" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name())"
failed=0
profile() {   # NAME MODEL BATCH [PARAMS]
  local name=$1 model=$2 batch=$3 params=${4:-'{}'}
  if ! timeout 300 "$py" -m workloads.profiling "$model" --engine pytorch --device cuda --dtype bfloat16 \
      --batch "$batch" --params "$params" --warmup 10 --steps 30 --out "$out/$name.json"; then
    echo "FAILED: $name" >&2
    failed=$((failed + 1))
  fi
}
profile resnet50-b32 torchvision/resnet50 32
profile resnet50-b128 torchvision/resnet50 128
profile vit_small-b32 timm/vit_small_patch16_224 32
profile vit_small-b128 timm/vit_small_patch16_224 128
profile gpt2-b8 transformers/gpt2 8 '{"seq_len": 1024}'
profile gpt2-b32 transformers/gpt2 32 '{"seq_len": 1024}'
exit "$failed"
