#!/usr/bin/env python3
"""Reference renderer for tokenwise's chat-template tests.

Reads one JSON object on stdin:
  {"cases": [{"template": "<jinja source>", "bos_token": "...", "eos_token": "...",
              "messages": [{"role": ..., "content": ...}, ...],
              "add_generation_prompt": true, "kwargs": {"date_string": "26 Jul 2024", ...}}, ...]}
and writes {"transformers": "<version>", "outputs": ["<rendered text or null>", ...], "errors": [null or "<message>", ...]} on stdout.

Each case is rendered by Hugging Face transformers' own
PreTrainedTokenizerBase.apply_chat_template(messages, tokenize=False, ...), on a
PreTrainedTokenizerFast built from a tiny tokenizer object whose special tokens are set to the
case's bos/eos strings: rendering with tokenize=False only reads the template and the special
token strings, never the vocabulary.

A case with "tokenizer_dir" instead of "template" loads that folder with AutoTokenizer (its own
tokenizer.json, tokenizer_config.json and chat template) and returns the token ids of
apply_chat_template(messages, tokenize=True, ...) in "outputs" instead of text.
"""
import json
import sys

from tokenizers import Tokenizer, models
import transformers
from transformers import PreTrainedTokenizerFast


def make_tokenizer(case):
    # An empty word-level model: enough for PreTrainedTokenizerFast to exist.
    tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")))
    special = {}
    if case.get("bos_token") is not None:
        special["bos_token"] = case["bos_token"]
    if case.get("eos_token") is not None:
        special["eos_token"] = case["eos_token"]
    if special:
        tok.add_special_tokens(special)
    tok.chat_template = case["template"]
    return tok


def main():
    req = json.load(sys.stdin)
    outputs, errors = [], []
    loaded = {}  # tokenizer_dir -> AutoTokenizer
    for case in req["cases"]:
        try:
            if "tokenizer_dir" in case:
                from transformers import AutoTokenizer

                d = case["tokenizer_dir"]
                if d not in loaded:
                    loaded[d] = AutoTokenizer.from_pretrained(d)
                tok = loaded[d]
                ids = tok.apply_chat_template(
                    case["messages"],
                    tokenize=True,
                    add_generation_prompt=case.get("add_generation_prompt", False),
                    **case.get("kwargs", {}),
                )
                if hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
                    ids = ids["input_ids"]
                outputs.append(list(ids))
                errors.append(None)
                continue
            tok = make_tokenizer(case)
            text = tok.apply_chat_template(
                case["messages"],
                tokenize=False,
                add_generation_prompt=case.get("add_generation_prompt", False),
                **case.get("kwargs", {}),
            )
            outputs.append(text)
            errors.append(None)
        except Exception as e:  # the Go side checks that it fails too
            outputs.append(None)
            errors.append(f"{type(e).__name__}: {e}")
    json.dump({"transformers": transformers.__version__, "outputs": outputs, "errors": errors}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
