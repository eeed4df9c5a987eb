// run.mjs drives llama.cpp (through node-llama-cpp's prebuilt CPU library) on a GGUF file so the
// Go tests can compare tokenwise against it. It reads one JSON request on stdin and writes one
// JSON answer on stdout:
//
//   request:  {"model": "m.gguf", "threads": 1, "contextSize": 512,
//              "prompts": [{"ids": [1, 2, 3], "n": 64, "topk": 32}],
//              "texts": ["hello world"], "parseSpecial": false, "kvCacheType": "F16"|"F32",
//              "cpuLibrary": "haswell"|"skylakex"}
//   answer:   {"vocabSize": N, "bos": id|null, "eos": id|null, "cpuLibrary": "haswell",
//              "prompts": [{"ids": [...greedy continuation...], "top": [[id, logit - maxLogit], ...],
//                           "steps": [[[id, logit - maxLogit], ...], ...]}],
//              "tokens": [[...ids of texts[0]...], ...]}
//
// Prompts are token ids, not text, so the tokenizer cannot hide a forward-pass difference.
// Generation is greedy with no penalties: controlledEvaluate with temperature 0 builds a sampler
// chain of just llama.cpp's greedy sampler, so the candidates it returns are the raw logits.
// "top" holds the first generated step's top-k as logit minus the maximum logit, recovered as
// ln(p_i / p_max) from the softmax node-llama-cpp reports (shift-invariant, so it compares
// directly with tokenwise's logits minus their maximum). topk < 0 returns every nonzero one.
// A prompt with "everyStep": true also gets "steps": the same top-k at every generated step
// (steps[0] is top), for locating the first step whose logits differ; without it, no steps.
//
// cpuLibrary names the ggml CPU build (libggml-cpu-NAME.so) that llama.cpp runs: node-llama-cpp
// is loaded from $TOKENWISE_REFS/ggml/NAME/node_modules, which holds that one library
// (scripts/setup-refs.sh), instead of the best one for this CPU, so that a parity result does
// not depend on the machine. The answer's cpuLibrary is the library actually mapped into this
// process (/proc/self/maps). Without cpuLibrary, only vocabOnly requests are accepted.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

async function readStdin() {
	const chunks = [];
	for await (const c of process.stdin) chunks.push(c);
	return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}

const req = await readStdin();
const refs = process.env.TOKENWISE_REFS || path.resolve(import.meta.dirname, "../../.cache/refs");
let modules = path.join(refs, "node_modules");
if (req.cpuLibrary != null) {
	if (!/^[a-z0-9]+$/.test(req.cpuLibrary)) throw new Error(`cpuLibrary ${JSON.stringify(req.cpuLibrary)}: not a ggml CPU library name`);
	modules = path.join(refs, "ggml", req.cpuLibrary, "node_modules");
	if (!fs.existsSync(modules)) throw new Error(`${modules} missing: run scripts/setup-refs.sh`);
} else if (req.vocabOnly !== true && (req.prompts ?? []).length > 0) {
	throw new Error("cpuLibrary is required to run prompts: name the ggml CPU build to compare with");
}
const entry = path.join(modules, "node-llama-cpp", "dist", "index.js");
const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);

// loadedCpuLibrary is the NAME of the libggml-cpu-NAME.so mapped into this process, or null.
function loadedCpuLibrary() {
	const maps = fs.readFileSync("/proc/self/maps", "utf8");
	const names = new Set([...maps.matchAll(/libggml-cpu-([a-z0-9]+)\.so/g)].map((m) => m[1]));
	if (names.size > 1) throw new Error(`several ggml CPU libraries loaded: ${[...names].join(", ")}`);
	return names.size === 1 ? [...names][0] : null;
}
// One thread by default: ggml's workers spin while they wait for each other, and on a busy
// machine (test runs share the cores) two spinning threads made a 64-token run ~9x slower.
const threads = req.threads ?? 1;
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error, maxThreads: threads });
const model = await llama.loadModel({ modelPath: req.model, gpuLayers: 0, useMmap: true, vocabOnly: req.vocabOnly === true });
const out = {
	vocabSize: null,
	bos: model.tokens.bos ?? null,
	eos: model.tokens.eos ?? null,
	cpuLibrary: null,
	prompts: [],
	tokens: [],
};
out.vocabSize = model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length ?? null;

for (const text of req.texts ?? []) {
	out.tokens.push(Array.from(model.tokenize(text, req.parseSpecial === true)));
}

// topLogits turns node-llama-cpp's probabilities (a Map sorted by probability, highest first)
// into the topk [id, logit − max logit] pairs, ln(p_i / p_max).
function topLogits(probabilities, topk) {
	const probs = [...probabilities.entries()];
	const pmax = probs[0][1];
	const top = [];
	for (const [id, pr] of probs) {
		if (topk >= 0 && top.length >= topk) break;
		if (pr <= 0) break;
		top.push([id, Math.log(pr / pmax)]);
	}
	return top;
}

if ((req.prompts ?? []).length > 0) {
	const need = Math.max(...req.prompts.map((p) => p.ids.length + (p.n ?? 0))) + 1;
	const contextSize = req.contextSize ?? Math.max(need, 64);
	// kvCacheType: the cache dtype, a ggml type name ("F16", llama.cpp's default, or "F32");
	// node-llama-cpp resolves it to the ggml type id it passes as type_k/type_v. With flash
	// attention, which llama.cpp turns on for the CPU by default ("auto"), an F32 cache is
	// cast to F16 before attention, so "F32" only changes results with flashAttention: false.
	const kv = req.kvCacheType ?? "F16";
	const context = await model.createContext({
		contextSize, batchSize: Math.min(contextSize, 512), threads, sequences: 1,
		experimentalKvCacheKeyType: kv, experimentalKvCacheValueType: kv,
		...(req.flashAttention != null ? { flashAttention: req.flashAttention } : {}),
	});
	const seq = context.getSequence();
	const greedy = { temperature: 0 };
	for (const p of req.prompts) {
		await seq.clearHistory();
		const n = p.n ?? 0;
		const topk = p.topk ?? 32;
		const input = p.ids.map((id, i) =>
			i === p.ids.length - 1 ? [id, { generateNext: { token: true, probabilities: true, options: greedy } }] : id,
		);
		const res = await seq.controlledEvaluate(input);
		const first = res[p.ids.length - 1]?.next;
		if (first == null || first.token == null) throw new Error("llama.cpp produced no token for a prompt");
		const top = topLogits(first.probabilities, topk);
		const every = p.everyStep === true;
		const steps = every ? [top] : null;
		const gen = [first.token];
		while (gen.length < n) {
			const r = await seq.controlledEvaluate([[gen[gen.length - 1], { generateNext: { token: true, probabilities: every, options: greedy } }]]);
			const next = r[0]?.next;
			const t = next?.token;
			if (t == null) throw new Error(`llama.cpp produced no token at step ${gen.length}`);
			if (every) steps.push(topLogits(next.probabilities, topk));
			gen.push(t);
		}
		const answer = { ids: gen.slice(0, Math.max(n, 1)), top };
		if (every) answer.steps = steps.slice(0, Math.max(n, 1));
		out.prompts.push(answer);
	}
	await context.dispose();
}
out.cpuLibrary = loadedCpuLibrary();
if (req.cpuLibrary != null && out.cpuLibrary !== req.cpuLibrary) {
	throw new Error(`asked for libggml-cpu-${req.cpuLibrary}.so, loaded ${out.cpuLibrary == null ? "none" : `libggml-cpu-${out.cpuLibrary}.so`}`);
}
await model.dispose();
process.stdout.write(JSON.stringify(out) + "\n");
