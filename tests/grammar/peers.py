"""Replay tokenwise's sampled documents through llguidance (and XGrammar where it imports).

Reads the JSON tests/grammar/bench writes (a tokenizer.json path, schemas, the token ids of
documents sampled under each schema, tokenwise's compile and mask times) and measures, per
schema, each peer's compile time and the time of the mask before every token of the same
documents, with compact JSON (no whitespace), as tokenwise's default. Prints one JSON object.
"""
import ctypes
import json
import statistics
import sys
import time


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * q))] if xs else None


def run_llguidance(trace):
    import llguidance
    import numpy as np

    with open(trace["tokenizer"]) as f:
        tok = llguidance.LLTokenizer(f.read())
    opts = {"item_separator": ",", "key_separator": ":", "whitespace_flexible": False}
    out = []
    for s in trace["schemas"]:
        start = time.perf_counter()
        grm = llguidance.LLMatcher.grammar_from_json_schema(json.dumps(s["schema"]), defaults=opts)
        m = llguidance.LLMatcher(tok, grm)
        compile_ms = (time.perf_counter() - start) * 1e3
        buf = np.zeros((tok.vocab_size + 31) // 32, dtype=np.uint32)
        times, rejected = [], 0
        for doc in s["docs"]:
            m = llguidance.LLMatcher(tok, grm)
            for tid in doc:
                t0 = time.perf_counter_ns()
                m.unsafe_compute_mask_ptr(buf.ctypes.data, buf.nbytes)
                times.append((time.perf_counter_ns() - t0) / 1e3)
                if not (int(buf[tid // 32]) >> (tid % 32)) & 1 or not m.consume_token(tid):
                    rejected += 1
                    break
        out.append({"compile_ms": compile_ms, "mask_us_median": statistics.median(times) if times else None,
                    "mask_us_p99": pct(times, 0.99), "steps": len(times), "rejected_docs": rejected})
    return out


def run_xgrammar(trace):
    import xgrammar as xgr  # needs torch, which this bench does not install

    raise RuntimeError("xgrammar imported: its runner is not written")


def main():
    trace = json.load(open(sys.argv[1]))
    res = {}
    for name, fn in (("llguidance", run_llguidance), ("xgrammar", run_xgrammar)):
        try:
            res[name] = fn(trace)
        except Exception as e:  # noqa: BLE001 - a peer that cannot run is reported, not fatal
            res[name] = {"error": f"{type(e).__name__}: {e}"}
    print(json.dumps(res))


main()
