// tokenwise's web page: plain JavaScript, no framework, no build step. Every request goes
// to the server that served the page: the public API (/tokenize-like pieces, streamed
// /v1/chat/completions and /v1/completions) and /v1/tokenwise/{status,tokenize,cost}.
"use strict";

const $ = (sel, root = document) => root.querySelector(sel);
const el = (tag, cls, text) => {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
};
// dur prints milliseconds with a unit that keeps three significant digits (cost-model times
// of a small model on a GPU are nanoseconds).
const dur = (ms) => {
  if (!(ms > 0)) return "0 ms";
  if (ms >= 1) return ms.toFixed(2) + " ms";
  if (ms >= 1e-3) return (ms * 1e3).toPrecision(3) + " µs";
  return (ms * 1e6).toPrecision(3) + " ns";
};
const count = (v) => Math.round(v).toLocaleString("en-US");
const fmt = (v, d = 1) => (v === undefined || v === null || Number.isNaN(v)) ? "–" : Number(v).toFixed(d);

// The API key lives in sessionStorage: kept while the tab is open, gone when it closes.
let apiKey = sessionStorage.getItem("tokenwise-key") || "";
let status = null; // the last /v1/tokenwise/status

function showError(msg) {
  const p = $("#error");
  p.textContent = msg;
  p.hidden = !msg;
}

class APIError extends Error {
  constructor(status, msg) { super(msg); this.status = status; }
}

async function api(path, opts = {}) {
  const headers = Object.assign({}, opts.headers || {});
  if (apiKey) headers["Authorization"] = "Bearer " + apiKey;
  if (opts.body && !headers["Content-Type"]) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, Object.assign({}, opts, { headers }));
  if (resp.status === 401) {
    $("#key-state").textContent = apiKey ? "key refused" : "this server needs an API key";
    $("#api-key").focus();
    throw new APIError(401, "The server needs its API key (--api-key): enter it above.");
  }
  if (!resp.ok) {
    let msg = resp.status + " " + resp.statusText;
    try { msg = (await resp.json()).error.message || msg; } catch (_) { /* not JSON */ }
    throw new APIError(resp.status, msg);
  }
  return resp;
}
const getJSON = async (path, opts) => (await api(path, opts)).json();
const postJSON = (path, body, signal) => getJSON(path, { method: "POST", body: JSON.stringify(body), signal });

// ---- tabs: arrow keys, Home and End move between them (WAI-ARIA tabs pattern)
const tabs = [...document.querySelectorAll("[role=tab]")];
function selectTab(tab, focus) {
  for (const t of tabs) {
    const on = t === tab;
    t.setAttribute("aria-selected", on);
    t.tabIndex = on ? 0 : -1;
    $("#" + t.getAttribute("aria-controls")).hidden = !on;
  }
  if (focus) tab.focus();
  history.replaceState(null, "", "#" + tab.id.slice(4));
  if (tab.id === "tab-cost") loadCost();
}
for (const t of tabs) {
  t.addEventListener("click", () => selectTab(t, false));
  t.addEventListener("keydown", (e) => {
    const i = tabs.indexOf(t);
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: tabs.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    selectTab(tabs[(to + tabs.length) % tabs.length], true);
  });
}

// ---- API key
$("#api-key").value = apiKey;
$("#key-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  apiKey = $("#api-key").value.trim();
  if (apiKey) sessionStorage.setItem("tokenwise-key", apiKey); else sessionStorage.removeItem("tokenwise-key");
  $("#key-state").textContent = "";
  showError("");
  await start();
});

// ---- tokens panel
async function tokenize() {
  const text = $("#tok-text").value;
  const special = $("#tok-special").checked;
  const sides = [["model", $("#tok-model")]];
  if (status && status.compare_tokenizer) sides.push(["compare", $("#tok-compare")]);
  else {
    $("#tok-compare .name").textContent = "(none: serve with --compare-tokenizer)";
    $("#tok-compare .stats").textContent = "";
  }
  try {
    for (const [which, box] of sides) {
      const r = await postJSON("/v1/tokenwise/tokenize", { prompt: text, tokenizer: which, add_special_tokens: special });
      $(".name", box).textContent = r.tokenizer ? "(" + r.tokenizer + ")" : "";
      const bpt = r.count ? r.bytes / r.count : 0;
      $(".stats", box).textContent = `${r.count} tokens · ${r.bytes} bytes · ${fmt(bpt, 2)} bytes/token`;
      box.dataset.count = r.count;
      const pieces = $(".pieces", box);
      pieces.replaceChildren();
      for (const t of r.tokens) {
        const p = el("span", "piece" + (t.domain ? " domain" : ""));
        p.dataset.id = t.id;
        p.title = `id ${t.id}, ${t.bytes} bytes` + (t.domain ? ", added by the specialized vocabulary" : "");
        p.append(el("span", "", t.text), el("small", "", String(t.id)));
        pieces.append(p);
      }
      $(".ids", box).textContent = "[" + r.tokens.map((t) => t.id).join(", ") + "]";
    }
    document.body.dataset.tokenized = Number(document.body.dataset.tokenized || 0) + 1; // for tests
    showError("");
  } catch (err) { showError(err.message); }
}
$("#tok-form").addEventListener("submit", (e) => { e.preventDefault(); tokenize(); });

// ---- chat panel
let chatAbort = null;
$("#chat-stop").addEventListener("click", () => chatAbort && chatAbort.abort());
$("#chat-form").addEventListener("submit", (e) => { e.preventDefault(); chat(); });

// sse reads a server-sent event stream, calling onData with each parsed data: line.
async function sse(resp, onData) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n\n")) >= 0) {
      const ev = buf.slice(0, i);
      buf = buf.slice(i + 2);
      for (const line of ev.split("\n")) {
        if (!line.startsWith("data: ")) continue;
        const data = line.slice(6);
        if (data === "[DONE]") return;
        onData(JSON.parse(data));
      }
    }
  }
}

async function chat() {
  const mode = $("#chat-mode").value;
  const body = {
    temperature: Number($("#chat-temp").value),
    max_tokens: Number($("#chat-max").value),
    stream: true,
    stream_options: { include_usage: true, include_tokens: true },
  };
  const prompt = $("#chat-prompt").value;
  if (mode === "chat") {
    body.messages = [];
    const sys = $("#chat-system").value.trim();
    if (sys) body.messages.push({ role: "system", content: sys });
    body.messages.push({ role: "user", content: prompt });
  } else {
    body.prompt = prompt;
  }
  if ($("#chat-use-schema").checked) {
    let schema;
    try { schema = JSON.parse($("#chat-schema").value); } catch (err) {
      showError("The schema is not valid JSON: " + err.message);
      return;
    }
    body.response_format = { type: "json_schema", json_schema: { name: "page", schema } };
  }
  const out = $("#chat-out");
  out.replaceChildren();
  out.dataset.done = "";
  $("#chat-timeline").replaceChildren();
  $("#chat-usage").replaceChildren();
  $("#chat-cost").replaceChildren();
  $("#chat-state").textContent = "streaming…";
  $("#chat-go").disabled = true;
  $("#chat-stop").disabled = false;
  chatAbort = new AbortController();
  const arrivals = []; // when each chunk with tokens reached the page (ms since sending)
  const t0 = performance.now();
  let usage = null, steps = null, finish = "";
  try {
    const resp = await api(mode === "chat" ? "/v1/chat/completions" : "/v1/completions",
      { method: "POST", body: JSON.stringify(body), signal: chatAbort.signal });
    await sse(resp, (chunk) => {
      if (chunk.error) throw new Error(chunk.error.message);
      if (chunk.usage) { usage = chunk.usage; steps = chunk.tokenwise ? chunk.tokenwise.steps : []; }
      for (const c of chunk.choices || []) {
        if (c.finish_reason) finish = c.finish_reason;
        const toks = c.tokenwise ? c.tokenwise.tokens : [];
        if (toks.length) arrivals.push(performance.now() - t0);
        for (const t of toks) {
          const s = el("span", "tok src-" + t.source + (t.domain ? " domain" : "") + (t.special ? " special" : ""), t.text);
          s.dataset.id = t.id;
          s.dataset.source = t.source;
          s.title = `id ${t.id}: ${t.source}` + (t.domain ? ", domain token" : "") + (t.special ? ", special token (not in the text)" : "");
          out.append(s);
        }
      }
    });
    out.dataset.done = "1";
    $("#chat-state").textContent = `done (${finish})`;
    showError("");
    if (usage) {
      renderUsage(usage, steps || [], out.querySelectorAll(".tok"));
      renderTimeline(usage, steps || []);
      requestCost(usage);
    }
  } catch (err) {
    $("#chat-state").textContent = err.name === "AbortError" ? "stopped" : "failed";
    if (err.name !== "AbortError") showError(err.message);
  } finally {
    $("#chat-go").disabled = false;
    $("#chat-stop").disabled = true;
    chatAbort = null;
  }
}

function kvRows(table, rows) {
  table.replaceChildren();
  for (const [key, label, value] of rows) {
    const tr = el("tr");
    const td = el("td", "", value);
    td.dataset.k = key;
    tr.append(el("th", "", label), td);
    table.append(tr);
  }
}

function renderUsage(u, steps, toks) {
  lastUsage = u; // for re-costing on another profile
  const bySource = {};
  for (const t of toks) bySource[t.dataset.source] = (bySource[t.dataset.source] || 0) + 1;
  const domain = [...toks].filter((t) => t.classList.contains("domain")).length;
  const decodes = steps.filter((s) => !s.prefill);
  // Inter-token latency: time between the ends of consecutive steps that made tokens.
  const ends = steps.map((s) => s.start_ms + s.ms);
  const itl = [];
  for (let i = 1; i < ends.length; i++) if (!steps[i].prefill) itl.push(ends[i] - ends[i - 1]);
  itl.sort((a, b) => a - b);
  const mean = itl.length ? itl.reduce((a, b) => a + b, 0) / itl.length : NaN;
  kvRows($("#chat-usage"), [
    ["prompt_tokens", "prompt tokens", String(u.prompt_tokens)],
    ["cached_tokens", "cached (prefix cache)", String(u.prompt_tokens_details ? u.prompt_tokens_details.cached_tokens : 0)],
    ["completion_tokens", "completion tokens", String(u.completion_tokens)],
    ["queue_ms", "queue", fmt(u.queue_ms, 2) + " ms"],
    ["ttft_ms", "time to first token", fmt(u.ttft_ms, 2) + " ms"],
    ["prefill_ms", "prefill", fmt(u.prefill_ms, 2) + " ms"],
    ["prefill_steps", "prefill steps", String(u.prefill_steps)],
    ["decode_ms", "decode", fmt(u.decode_ms, 2) + " ms"],
    ["decode_steps", "decode steps", String(u.decode_steps)],
    ["timeline_prefill", "prefill chunks in the timeline", String(steps.length - decodes.length)],
    ["timeline_decode", "decode steps in the timeline", String(decodes.length)],
    ["itl", "inter-token latency (mean / median / max)", itl.length ? `${fmt(mean, 2)} / ${fmt(itl[itl.length >> 1], 2)} / ${fmt(itl[itl.length - 1], 2)} ms` : "–"],
    ["sources", "tokens by source", Object.entries(bySource).map(([k, v]) => `${k} ${v}`).join(", ") + (domain ? `, domain ${domain}` : "")],
    ["forced_tokens", "forced / jump-forward (usage)", `${u.forced_tokens || 0} / ${u.jumped_tokens || 0}`],
    ["drafts", "drafted / accepted (usage)", `${u.drafted_tokens || 0} / ${u.accepted_drafts || 0}`],
  ]);
}

function renderTimeline(u, steps) {
  const tl = $("#chat-timeline");
  tl.replaceChildren();
  const end = Math.max(u.queue_ms, ...steps.map((s) => s.start_ms + s.ms), u.ttft_ms) || 1;
  const x = (ms) => (100 * ms / end) + "%";
  const seg = (cls, from, width, title) => {
    const d = el("div", "seg " + cls);
    d.style.left = x(from);
    d.style.width = x(width);
    d.title = title;
    tl.append(d);
  };
  if (u.queue_ms > 0) seg("queue", 0, u.queue_ms, `queue ${fmt(u.queue_ms, 2)} ms`);
  for (const s of steps) {
    seg(s.prefill ? "prefill" : "decode", s.start_ms, s.ms,
      `${s.prefill ? "prefill chunk" : "decode step"} at ${fmt(s.start_ms, 2)} ms: ${fmt(s.ms, 2)} ms, ${s.tokens} tokens` +
      (s.draft ? ` (${s.draft} drafted)` : "") + `, ${s.batch} sequences in the step`);
  }
  const mark = el("div", "ttft");
  mark.style.left = x(u.ttft_ms);
  mark.title = `first token at ${fmt(u.ttft_ms, 2)} ms`;
  tl.append(mark);
  // One tick per decode step, as tall as its inter-token latency.
  const ends = steps.map((s) => s.start_ms + s.ms);
  let most = 0;
  for (let i = 1; i < ends.length; i++) most = Math.max(most, ends[i] - ends[i - 1]);
  for (let i = 1; i < ends.length; i++) {
    if (steps[i].prefill) continue;
    const t = el("div", "itl");
    t.style.left = x(ends[i]);
    t.style.height = Math.max(2, 14 * (ends[i] - ends[i - 1]) / (most || 1)) + "px";
    tl.append(t);
  }
  tl.append(el("div", "axis", `0 — ${fmt(end, 1)} ms · grey queue · blue prefill chunks · red decode steps (ticks: inter-token latency) · black line: first token`));
}

async function requestCost(u) {
  const hw = $("#chat-hw").value;
  if (!hw) return;
  try {
    const r = await getJSON(`/v1/tokenwise/cost?hardware=${encodeURIComponent(hw)}&prompt=${Math.max(1, u.prompt_tokens)}&output=${Math.max(1, u.completion_tokens)}&batch=1`);
    const e = r.estimate;
    kvRows($("#chat-cost"), [
      ["est_prefill", "prefill (cost model)", `${dur(e.prefill.seconds * 1000)}, ${e.prefill.bound}-bound`],
      ["est_decode", "decode (cost model)", `${dur(e.decode.seconds * 1000)}, ${e.decode.bound}-bound`],
      ["est_ratio", "output-over-input cost", fmt(e.output_over_input_cost, 1) + "×"],
      ["measured", "measured here (prefill / decode)", `${fmt(u.prefill_ms, 2)} / ${fmt(u.decode_ms, 2)} ms in ${u.prefill_steps} / ${u.decode_steps} steps`],
    ]);
  } catch (err) { showError(err.message); }
}
let lastUsage = null;
$("#chat-hw").addEventListener("change", () => { if (lastUsage) requestCost(lastUsage); });

// ---- server panel
let lastPoll = null;
const rates = [];
async function poll() {
  try {
    const s = await getJSON("/v1/tokenwise/status");
    status = s;
    let tps = 0;
    if (lastPoll && s.uptime_s > lastPoll.uptime_s) tps = (s.generation_tokens_total - lastPoll.generation_tokens_total) / (s.uptime_s - lastPoll.uptime_s);
    lastPoll = s;
    rates.push(tps);
    if (rates.length > 60) rates.shift();
    kvRows($("#srv"), [
      ["running", "running sequences", `${s.running} of ${s.max_seqs}`],
      ["waiting", "waiting", String(s.waiting)],
      ["kv", "KV blocks in use", `${s.kv_blocks_used} of ${s.kv_blocks} (${s.block_size} tokens each)`],
      ["hit", "prefix-cache hit rate", `${fmt(100 * s.prefix_cache_hit_rate, 1)}% of ${s.prefix_cache_queries} prompt tokens looked up`],
      ["tps", "tokens/s generated", fmt(tps, 1)],
      ["total", "tokens generated / requests finished", `${s.generation_tokens_total} / ${s.requests_finished_total}`],
      ["model", "model", `${s.model} (vocabulary ${s.vocab_size}, context ${s.max_model_len})`],
    ]);
    const spark = $("#srv-spark");
    spark.replaceChildren();
    const top = Math.max(1, ...rates);
    for (const r of rates) {
      const b = el("div");
      b.style.height = (100 * r / top) + "%";
      b.title = fmt(r, 1) + " tokens/s";
      spark.append(b);
    }
  } catch (err) {
    if (err.status !== 401) showError(err.message);
    return false;
  }
  return true;
}

// ---- cost panel: sliders step in powers of two
const pow2 = (id) => 2 ** Number($(id).value);
let costTimer = null, costSeq = 0;
function loadCost() {
  clearTimeout(costTimer);
  costTimer = setTimeout(async () => {
    const p = pow2("#cost-prompt"), o = pow2("#cost-output"), b = pow2("#cost-batch");
    $("#cost-prompt-v").textContent = p;
    $("#cost-output-v").textContent = o;
    $("#cost-batch-v").textContent = b;
    const hw = $("#cost-hw").value;
    if (!hw) return;
    const seq = ++costSeq;
    try {
      const r = await getJSON(`/v1/tokenwise/cost?hardware=${encodeURIComponent(hw)}&prompt=${p}&output=${o}&batch=${b}`);
      if (seq !== costSeq) return; // a later slider move's answer wins
      const e = r.estimate;
      kvRows($("#cost-table"), [
        ["ratio", "output-over-input cost", fmt(e.output_over_input_cost, 1) + "× (decode time per output token / prefill time per input token)"],
        ["prefill", "prefill", `${dur(e.prefill.seconds_per_token * 1000)}/input token, ${count(e.prefill_tok_s)} tok/s, ${e.prefill.bound}-bound`],
        ["decode", "decode", `${dur(e.decode.seconds_per_token * 1000)}/output token, ${count(e.decode_tok_s)} tok/s, ${e.decode.bound}-bound`],
        ["total", "whole batch", dur((e.prefill.seconds + e.decode.seconds) * 1000)],
        ["kv", "KV cache", `${fmt(e.kv_bytes_per_token / 1024, 1)} KiB/token; ${count(e.max_concurrent_seqs)} sequences fit`],
        ["ridge", "decode turns compute-bound at batch", e.decode_ridge_batch > 0 ? String(e.decode_ridge_batch) : "never (memory-bound)"],
        ["model", "model on hardware", `${e.model} on ${e.hardware}`],
      ]);
      // The SVG is the server's own (cost.PlotSVG, the plot of tokenwise cost --plot).
      const doc = new DOMParser().parseFromString(r.svg, "image/svg+xml");
      $("#cost-plot").replaceChildren(document.importNode(doc.documentElement, true));
      showError("");
    } catch (err) { showError(err.message); }
  }, 120);
}
for (const id of ["#cost-prompt", "#cost-output", "#cost-batch", "#cost-hw"]) $(id).addEventListener("input", loadCost);

function fillProfiles(s) {
  for (const sel of document.querySelectorAll("select.hw")) {
    if (sel.options.length) continue;
    for (const p of s.cost_profiles) {
      const o = el("option", "", p);
      o.value = p;
      sel.append(o);
    }
    sel.value = s.cost_hardware || s.cost_profiles[0];
  }
}

let pollTimer = null;
async function start() {
  if (!(await poll())) return;
  $("#model-name").textContent = status.model;
  if (status.api_key_required && !apiKey) {
    // Ask before calling anything that needs the key (no 401 to recover from).
    $("#key-state").textContent = "this server needs an API key";
    $("#api-key").focus();
    return;
  }
  $("#key-state").textContent = apiKey ? "key in use" : "";
  fillProfiles(status);
  clearInterval(pollTimer);
  pollTimer = setInterval(poll, 1000);
  await tokenize();
  const hash = location.hash.slice(1);
  const tab = tabs.find((t) => t.id === "tab-" + hash);
  if (tab) selectTab(tab, false);
}
start();
