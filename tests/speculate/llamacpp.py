"""llama.cpp's own draft-free speculation on the prompts workload.py sends: each prompt (the
chat template rendered by the tokenwise server, special tokens as text, in PROMPTS_JSON) runs
through llama.cpp's examples/speculative-simple, greedy, one stream, with the speculation
type and flags given after --. Prints one JSON line like workload.py's: output tokens/s over
the run (llama.cpp's own decode timer summed over prompts), drafted and accepted tokens,
and with --ref (the outputs of a run whose lookup never matches, which --save writes) how
many outputs are identical.

Usage: llamacpp.py BIN MODEL PROMPTS_JSON KIND MAX_TOKENS THREADS --label L [--ref F|--save F] -- FLAGS...
"""
import argparse
import json
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("bin")
ap.add_argument("model")
ap.add_argument("prompts")
ap.add_argument("kind")
ap.add_argument("max_tokens", type=int)
ap.add_argument("threads", type=int)
ap.add_argument("--label", default="")
ap.add_argument("--ref")
ap.add_argument("--save")
argv = sys.argv[1:]
cut = argv.index("--") if "--" in argv else len(argv)
args, flags = ap.parse_args(argv[:cut]), argv[cut + 1:]

prompts = json.load(open(args.prompts))
tokens = drafted = accepted = 0
seconds = 0.0
outs = []
for p in prompts:
    r = subprocess.run([args.bin, "-m", args.model, "-p", p, "-n", str(args.max_tokens), "-t", str(args.threads),
                        "--temp", "0", "-c", "4096"] + flags,
                       capture_output=True, text=True, check=True)
    log = r.stderr + r.stdout
    m = re.search(r"decoded\s+(\d+) tokens in\s+([\d.]+) seconds", log)
    tokens, seconds = tokens + int(m.group(1)), seconds + float(m.group(2))
    drafted += int(re.search(r"n_drafted = (\d+)", log).group(1))
    accepted += int(re.search(r"n_accept\s+= (\d+)", log).group(1))
    outs.append(r.stdout)
row = {"label": args.label, "kind": args.kind, "schema": False, "streams": 1, "requests": len(prompts),
       "output_tok_s": round(tokens / seconds, 2), "tokens_per_request": round(tokens / len(prompts), 1),
       "drafted": drafted, "accepted": accepted}
if drafted:
    row["acceptance"] = round(accepted / drafted, 3)
if args.ref:
    row["same_text_as_plain"] = sum(a == b for a, b in zip(outs, json.load(open(args.ref))))
if args.save:
    json.dump(outs, open(args.save, "w"))
print(json.dumps(row), flush=True)
