"""The structured-output workload: held-out essay-grading prompts sent to a tokenwise server,
greedy, with and without response_format json_schema (domain/verdict.schema.json, spaced),
at 1 and 16 concurrent streams. Prints per setting: decode steps per request, output tokens,
the jumped (forced) share, wall time per request, and whether each answer equals the plain
one. Usage: workload.py URL HELD_OUT_JSONL N
"""
import concurrent.futures as cf
import json
import statistics
import sys
import time
import urllib.request

url, path, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
prompts = [json.loads(l)["prompt"] for l in open(path)][:n]
schema = json.load(open("domain/verdict.schema.json"))


def ask(prompt, constrained):
    body = {"messages": [{"role": "user", "content": prompt}], "max_tokens": 200, "temperature": 0}
    if constrained:
        body["response_format"] = {"type": "json_schema", "whitespace": "spaced",
                                   "json_schema": {"name": "verdict", "schema": schema, "strict": True}}
    req = urllib.request.Request(url + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req) as r:
        res = json.load(r)
    return res["choices"][0]["message"]["content"], res["usage"], time.perf_counter() - t0


out = {}
for streams in (1, 16):
    for constrained in (False, True):
        t0 = time.perf_counter()
        with cf.ThreadPoolExecutor(streams) as ex:
            rs = list(ex.map(lambda p: ask(p, constrained), prompts))
        total = time.perf_counter() - t0
        out[(streams, constrained)] = rs
        toks = sum(u["completion_tokens"] for _, u, _ in rs)
        print(json.dumps({"streams": streams, "schema": constrained,
                          "decode_steps": statistics.mean(u["decode_steps"] for _, u, _ in rs),
                          "output_tokens": toks / len(rs),
                          "jumped_share": sum(u.get("jumped_tokens", 0) for _, u, _ in rs) / toks,
                          "wall_s_per_request": statistics.mean(w for _, _, w in rs),
                          "requests_per_s": len(rs) / total,
                          "same_text_as_plain_1_stream": sum(a[0] == b[0] for a, b in zip(rs, out[(1, False)])) / len(rs)}))
