"""Speculative-decoding workloads for an OpenAI-compatible server (tokenwise serve or
llama-server), greedy chat completions:

  extraction  a receipt in prose; the answer is JSON that copies its store, items and amounts
              (optionally under its JSON schema: --schema)
  code-edit   a short Python function and one change to make; the answer is the function again
  free        open-ended writing, where nothing in the prompt or earlier output predicts it
              (the case where speculation must not cost; SmolLM2-135M repeats itself, though)
  sampled     the free prompts sampled at temperature 1 with a seed per request: text no
              lookup predicts, the no-match case (answers are not compared: drafts keep the
              distribution, not the seeded draws)

Usage: workload.py URL KIND N STREAMS [--schema] [--label L] [--ref FILE]
       workload.py URL KIND N 1 --alt URL2 --alt-label L2 ...
With --alt (one stream), each request goes to URL and to URL2 in turn (the order swapped
every request), each side timed by its own requests: two servers compared in the same
minutes, so that the machine's drift between runs (±5% and more on a shared VM) falls on
both alike. It prints a line per server.
Prints one JSON line: output tokens/s over the run (all streams), decode steps (forward
passes after prefill) per output token, drafted and accepted tokens, and with --ref (the
texts of a plain run, which --save writes) how many answers are identical to it.
The prompts are generated from a fixed seed, so every run of a KIND sends the same ones.
"""
import argparse
import concurrent.futures as cf
import json
import random
import time
import urllib.request

ap = argparse.ArgumentParser()
ap.add_argument("url")
ap.add_argument("kind", choices=["extraction", "code-edit", "free", "sampled"])
ap.add_argument("n", type=int)
ap.add_argument("streams", type=int)
ap.add_argument("--schema", action="store_true")
ap.add_argument("--no-jump-forward", action="store_true", help="with --schema: response_format.jump_forward false (masked decoding)")
ap.add_argument("--label", default="")
ap.add_argument("--alt", help="a second server's URL: requests alternate between the two (one stream)")
ap.add_argument("--alt-label", default="alt")
ap.add_argument("--ref")
ap.add_argument("--save")
ap.add_argument("--max-tokens", type=int, default=160)
ap.add_argument("--prompts-out", help="write the chat prompts as the server renders them (special tokens as text) and exit")
args = ap.parse_args()

rng = random.Random(7)
STORES = ["Lidl", "Tesco", "Aldi", "Carrefour", "Rewe", "Migros", "Edeka", "Spar", "Coop", "Monoprix"]
ITEMS = ["bread", "milk", "eggs", "apples", "coffee", "rice", "butter", "cheese", "tomatoes", "pasta", "tea", "yogurt"]
FUNCS = [
    ("def total_price(items, tax_rate):\n    subtotal = 0\n    for item in items:\n        subtotal += item.price * item.quantity\n    tax = subtotal * tax_rate\n    return subtotal + tax\n",
     "Rename the variable subtotal to net_total."),
    ("def find_user(users, name):\n    for user in users:\n        if user.name == name:\n            return user\n    return None\n",
     "Make the name comparison case-insensitive."),
    ("def moving_average(values, window):\n    result = []\n    for i in range(len(values) - window + 1):\n        chunk = values[i:i + window]\n        result.append(sum(chunk) / window)\n    return result\n",
     "Rename the parameter window to size."),
    ("def parse_line(line):\n    parts = line.strip().split(',')\n    name = parts[0]\n    age = int(parts[1])\n    city = parts[2]\n    return {'name': name, 'age': age, 'city': city}\n",
     "Also strip spaces around the city."),
    ("def count_words(text):\n    counts = {}\n    for word in text.split():\n        word = word.lower()\n        counts[word] = counts.get(word, 0) + 1\n    return counts\n",
     "Rename counts to frequencies."),
]
TOPICS = ["the sea at night", "a city waking up", "an old clock", "learning to swim", "a long train ride", "autumn leaves",
          "a lost letter", "the first snow", "a busy kitchen", "a quiet library"]

SCHEMA = {"type": "object", "properties": {
    "store": {"type": "string"},
    "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
                                         "required": ["name", "price"], "additionalProperties": False}},
    "total": {"type": "number"}}, "required": ["store", "items", "total"], "additionalProperties": False}


def prompt(i):
    if args.kind == "extraction":
        store = rng.choice(STORES)
        items = rng.sample(ITEMS, rng.randint(2, 4))
        prices = [round(rng.uniform(0.5, 9.5), 2) for _ in items]
        lines = ", ".join(f"{it} {p:.2f}" for it, p in zip(items, prices))
        return (f"Receipt from {store}: {lines}. Total {sum(prices):.2f}.\n"
                "Return it as JSON with keys store, items (a list of objects with name and price) and total.")
    if args.kind == "code-edit":
        src, change = FUNCS[i % len(FUNCS)]
        return f"Here is a Python function:\n\n{src}\n{change} Return the whole function, and nothing else."
    return f"Write a short poem about {rng.choice(TOPICS)}."


prompts = [prompt(i) for i in range(args.n)]


def post(path, body):
    req = urllib.request.Request(args.url + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)


if args.prompts_out:
    texts = []
    for p in prompts:
        ids = post("/tokenize", {"messages": [{"role": "user", "content": p}]})["tokens"]
        texts.append(post("/detokenize", {"tokens": ids})["prompt"])
    json.dump(texts, open(args.prompts_out, "w"))
    raise SystemExit


def ask(ip, url=None):
    i, p = ip
    url = url or args.url
    body = {"messages": [{"role": "user", "content": p}], "max_tokens": args.max_tokens, "temperature": 0}
    if args.kind == "sampled":
        body["temperature"], body["seed"] = 1.0, 1000 + i
    if args.schema:
        body["response_format"] = {"type": "json_schema", "json_schema": {"name": "receipt", "schema": SCHEMA, "strict": True}}
        if args.no_jump_forward:
            body["response_format"]["jump_forward"] = False
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req) as r:
        res = json.load(r)
    t = time.perf_counter() - t
    u, tm = res.get("usage", {}), res.get("timings", {})  # tokenwise: usage; llama-server: timings
    return {"text": res["choices"][0]["message"]["content"], "tokens": u.get("completion_tokens", tm.get("predicted_n", 0)),
            "decode_steps": u.get("decode_steps"), "decode_ms": u.get("decode_ms"),
            "drafted": u.get("drafted_tokens", tm.get("draft_n", 0)) or 0,
            "accepted": u.get("accepted_drafts", tm.get("draft_n_accepted", 0)) or 0, "seconds": t}


def report(label, rs, wall, same_as=None):
    toks = sum(r["tokens"] for r in rs)
    row = {"label": label, "kind": args.kind, "schema": "no-jump" if args.no_jump_forward else args.schema, "streams": args.streams, "requests": len(rs),
           "output_tok_s": round(toks / wall, 2), "tokens_per_request": round(toks / len(rs), 1),
           "drafted": sum(r["drafted"] for r in rs), "accepted": sum(r["accepted"] for r in rs)}
    if all(r["decode_steps"] is not None for r in rs):
        row["decode_steps_per_token"] = round(sum(r["decode_steps"] for r in rs) / toks, 3)
    if args.streams == 1 and all(r["decode_ms"] for r in rs):
        # One stream: a request's decode time is the decode phase alone (prefill apart).
        row["decode_tok_s"] = round(sum(r["tokens"] - 1 for r in rs) / (sum(r["decode_ms"] for r in rs) / 1000), 2)
    if row["drafted"]:
        row["acceptance"] = round(row["accepted"] / row["drafted"], 3)
    if args.ref:
        ref = json.load(open(args.ref))
        row["same_text_as_plain"] = sum(a == b for a, b in zip([r["text"] for r in rs], ref))
    if same_as is not None:  # --alt: the second server's answers against the first's
        row["same_text_as_first"] = sum(a["text"] == b["text"] for a, b in zip(rs, same_as))
    if args.save:
        json.dump([r["text"] for r in rs], open(args.save, "w"))
    print(json.dumps(row), flush=True)


if args.alt:
    if args.streams != 1:
        raise SystemExit("--alt takes one stream")
    ask((0, prompts[0]))
    ask((0, prompts[0]), args.alt)
    ra, rb = [], []
    for ip in enumerate(prompts):
        if ip[0] % 2:
            rb.append(ask(ip, args.alt))
            ra.append(ask(ip))
        else:
            ra.append(ask(ip))
            rb.append(ask(ip, args.alt))
    report(args.label, ra, sum(r["seconds"] for r in ra))
    args.ref, args.save = None, None
    report(args.alt_label, rb, sum(r["seconds"] for r in rb), same_as=ra)
else:
    ask((0, prompts[0]))  # warm up (the first request also measures the step costs drafting is judged by)
    t0 = time.perf_counter()
    with cf.ThreadPoolExecutor(args.streams) as ex:
        rs = list(ex.map(ask, enumerate(prompts)))
    report(args.label, rs, time.perf_counter() - t0)
