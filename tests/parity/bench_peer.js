#!/usr/bin/env node
// Times one peer tokenizer on a text file, encode only (loading and reading excluded), for
// scripts/bench-tokenizer.sh. Prints one JSON line {"peer","tokens","bytes","seconds","mb_s",
// "cpu_seconds"}; cpu_seconds is the process's user + system time during the encode, steadier
// than the wall clock on a busy machine.
//
//   node bench_peer.js hf TOKENIZER_JSON TEXT_FILE [--ids OUT.json]
//       HF tokenizers: the whole file as one encode() call (single-threaded by nature).
//   node bench_peer.js hf-batch TOKENIZER_JSON TEXT_FILE
//       HF tokenizers: the file cut after line ends into ~256 KiB pieces, one encodeBatch();
//       RAYON_NUM_THREADS sets its threads.
//   node bench_peer.js tiktoken o200k_base TEXT_FILE [--ids OUT.json]
//       tiktoken (Rust compiled to WASM), special tokens allowed as HF matches them.
//
// --ids writes the ids as a JSON array, to check they equal tokenwise's.
'use strict';
const fs = require('fs');
const path = require('path');
const {createRequire} = require('module');

const refs = process.env.TOKENWISE_REFS || path.join(__dirname, '..', '..', '.cache', 'refs');
const req = createRequire(path.join(refs, 'package.json'));

function fail(msg) {
  process.stderr.write(`bench_peer: ${msg}\n`);
  process.exit(1);
}

// pieces cuts text after a '\n' followed by an ASCII letter, like tokenwise count does.
function pieces(text, size) {
  const out = [];
  while (text.length > size) {
    let cut = -1;
    for (let i = size; i < text.length - 1; i++) {
      if (text[i] === '\n' && /[A-Za-z]/.test(text[i + 1])) {
        cut = i + 1;
        break;
      }
    }
    if (cut < 0) break;
    out.push(text.slice(0, cut));
    text = text.slice(cut);
  }
  if (text.length > 0) out.push(text);
  return out;
}

async function main() {
  const [peer, model, file, flag, idsOut] = process.argv.slice(2);
  if (!peer || !model || !file) fail('usage: bench_peer.js hf|hf-batch|tiktoken TOKENIZER|ENCODING FILE [--ids OUT]');
  const text = fs.readFileSync(file, 'utf8');
  const bytes = Buffer.byteLength(text);
  let ids;
  let tokens = 0;
  let t0;
  let t1;
  let c0;
  let c1;
  if (peer === 'hf' || peer === 'hf-batch') {
    const {Tokenizer} = req('tokenizers');
    const tok = Tokenizer.fromFile(model);
    await tok.encode('warm up the thread pool', null, {addSpecialTokens: false});
    if (peer === 'hf') {
      c0 = process.cpuUsage();
      t0 = process.hrtime.bigint();
      const e = await tok.encode(text, null, {addSpecialTokens: false});
      t1 = process.hrtime.bigint();
      c1 = process.cpuUsage(c0);
      ids = e.getIds();
      tokens = ids.length;
    } else {
      // Bytes, not UTF-16 units, set the piece size in tokenwise; close enough for timing.
      const ps = pieces(text, 256 << 10);
      c0 = process.cpuUsage();
      t0 = process.hrtime.bigint();
      const es = await tok.encodeBatch(ps, {addSpecialTokens: false});
      t1 = process.hrtime.bigint();
      c1 = process.cpuUsage(c0);
      for (const e of es) tokens += e.getLength();
    }
  } else if (peer === 'tiktoken') {
    const {get_encoding} = req('tiktoken');
    const enc = get_encoding(model);
    enc.encode('warm up', 'all');
    c0 = process.cpuUsage();
    t0 = process.hrtime.bigint();
    const out = enc.encode(text, 'all');
    t1 = process.hrtime.bigint();
    c1 = process.cpuUsage(c0);
    ids = Array.from(out);
    tokens = ids.length;
    enc.free();
  } else {
    fail(`unknown peer ${peer}`);
  }
  const seconds = Number(t1 - t0) / 1e9;
  if (flag === '--ids') fs.writeFileSync(idsOut, JSON.stringify(ids));
  const cpuSeconds = (c1.user + c1.system) / 1e6;
  process.stdout.write(JSON.stringify({peer, tokens, bytes, seconds, mb_s: bytes / 1e6 / seconds, cpu_seconds: cpuSeconds}) + '\n');
}

main().catch((e) => fail(e.stack || String(e)));
