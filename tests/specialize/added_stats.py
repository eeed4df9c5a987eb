#!/usr/bin/env python3
"""Counts how a specialized tokenizer's added tokens travel and generalize.

usage: added_stats.py OUT_DIR TRAIN.jsonl HELD_OUT.jsonl [MAX_BYTES]

For the added tokens tokenwise specialize wrote (tokenizer.json added_tokens that are not
special): how many are longer than MAX_BYTES (default 32: llama-cpp-python's piece buffer),
contain a byte outside printable ASCII without space (what transformers' GGUF tokenizer
converter drops), recur in at most 2 training records (memorized), and occur in no held-out
record. A record is one JSONL line (prompt and completion together)."""
import json, sys

out, train, held = sys.argv[1:4]
max_bytes = int(sys.argv[4]) if len(sys.argv) > 4 else 32
tok = json.load(open(out + "/tokenizer.json"))
added = [a["content"] for a in tok["added_tokens"] if not a["special"]]

def records(path):
    recs = []
    for line in open(path):
        r = json.loads(line)
        recs.append("\x00".join(r.get(k, "") for k in ("text", "prompt", "completion")))
    return recs

tr, ho = records(train), records(held)
def df(s, recs):
    return sum(1 for r in recs if s in r)
stats = {"added": len(added), "over_max_bytes": 0, "not_portable": 0, "train_records_le_2": 0, "held_out_records_0": 0}
for s in added:
    b = s.encode()
    stats["over_max_bytes"] += len(b) > max_bytes
    stats["not_portable"] += any(c < 0x21 or c > 0x7e for c in b)
    stats["train_records_le_2"] += df(s, tr) <= 2
    stats["held_out_records_0"] += df(s, ho) == 0
stats["max_bytes"] = max((len(s.encode()) for s in added), default=0)
print(json.dumps(stats))
