#!/usr/bin/env python3
"""Tokenizes texts with the tokenizer transformers builds from a GGUF alone.

usage: hf_gguf_encode.py MODEL.gguf < texts.jsonl > ids.jsonl

Each input line is a JSON string; each output line the ids (no special tokens added), or
{"error": ...} for the whole run on stdout's first line when the file does not load.

This is the tokenizer AutoTokenizer.from_pretrained(dir, gguf_file=...) gives, the one vLLM
and SGLang use when they are handed only a GGUF. With torch installed it is that call. Without
torch (the reference venv has none: the PyPI wheel brings gigabytes of CUDA libraries),
AutoTokenizer cannot build the model config it also reads, so the script calls the tokenizer
class AutoTokenizer resolves to, PreTrainedTokenizerFast.from_pretrained(dir, gguf_file=...):
the same get_gguf_tokenizer and convert_gguf_tokenizer. transformers' GGUF reader imports
torch at the top only for its tensor dtype table, which reading metadata never touches, so an
empty module stands in for that import alone.
"""
import json
import os
import sys
import tempfile
import types

os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
from transformers import AutoTokenizer, PreTrainedTokenizerFast  # noqa: E402
from transformers.utils import is_torch_available  # noqa: E402

# Alone in a folder: from_pretrained(dir, gguf_file=...) reads a tokenizer.json beside the
# GGUF when there is one (as in a specialize --gguf output folder) and never looks at the GGUF's.
d = tempfile.mkdtemp()
f = os.path.basename(sys.argv[1])
os.symlink(os.path.abspath(sys.argv[1]), os.path.join(d, f))
if is_torch_available():
    tok = AutoTokenizer.from_pretrained(d, gguf_file=f)
else:
    torch = types.ModuleType("torch")
    torch.__getattr__ = lambda name: type(name, (), {})  # names used at import, as annotations
    sys.modules["torch"] = torch
    tok = PreTrainedTokenizerFast.from_pretrained(d, gguf_file=f)
for line in sys.stdin:
    print(json.dumps(tok.encode(json.loads(line), add_special_tokens=False)))
os.remove(os.path.join(d, f))
os.rmdir(d)
