#!/usr/bin/env bash
# Exercises the GPU adaptation recipe (recipes/adapt.py) end to end on this machine's CPU:
# installs PyTorch (PyPI's build, about 3 GB with its CUDA libraries, a few minutes), PEFT,
# accelerate and transformers into .cache/torchenv, then runs TestAdaptRecipe, which
# specializes a tiny model with tokenwise, adapts it with the recipe and holds the result to
# `tokenwise adapt` (same held-out loss before training, loads in tokenwise, resume gives
# the unbroken run's weights, LoRA merged). Not part of scripts/test.sh: the install alone
# would take a third of its time budget.
#
#   scripts/check-adapt-recipe.sh
set -euo pipefail
cd "$(dirname "$0")/.."
env=.cache/torchenv
if ! "$env/bin/python" -c 'import torch, transformers, peft, accelerate' 2>/dev/null; then
	python3 -m venv "$env"
	"$env/bin/pip" install -q torch==2.15.0 transformers==5.25.0 peft==0.21.2 accelerate==1.16.0 safetensors==0.8.0 tokenizers==0.23.3
fi
TOKENWISE_TORCH_PYTHON=$PWD/$env/bin/python GOEXPERIMENT=simd go test ./internal/cli -run 'TestAdaptRecipe$' -count=1 -v
