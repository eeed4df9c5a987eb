#!/usr/bin/env node
// Encodes texts with Hugging Face's official Rust tokenizers library (npm `tokenizers`), the
// reference that tokenwise must match id for id.
//
//   node hf_encode.js [--offsets] TOKENIZER_JSON [IN.jsonl|-] [OUT.jsonl|-]
//
// Each input line is a JSON string or {"text": ...}. Each output line, in input order, is
//   {"ids": encode(text, add_special_tokens=false),
//    "ids_sp": encode(text, add_special_tokens=true),
//    "dec": decode(ids, skip_special=false), "dec_sp": decode(ids_sp, skip_special=false),
//    "dec_skip": decode(ids_sp, skip_special=true),
//    "offs": with --offsets, the (start, end) of each token of ids, flattened, in Unicode
//            scalar values (code points) of the text}
// A field equal to its default is left out: ids_sp defaults to ids, dec to the text itself,
// dec_sp and dec_skip to dec.
// The library is found under $TOKENWISE_REFS/node_modules (default <repo>/.cache/refs).
// Set RAYON_NUM_THREADS to bound the library's threads.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const {createRequire} = require('module');

function refsDir() {
  return process.env.TOKENWISE_REFS || path.join(__dirname, '..', '..', '.cache', 'refs');
}

function sameIds(a, b) {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function fail(msg) {
  process.stderr.write(`hf_encode: ${msg}\n`);
  process.exit(1);
}

async function main() {
  let args = process.argv.slice(2);
  const withOffsets = args[0] === '--offsets';
  if (withOffsets) args = args.slice(1);
  const [tokPath, inPath = '-', outPath = '-'] = args;
  if (!tokPath) fail('usage: hf_encode.js [--offsets] TOKENIZER_JSON [IN.jsonl|-] [OUT.jsonl|-]');
  const req = createRequire(path.join(refsDir(), 'package.json'));
  let Tokenizer;
  try {
    ({Tokenizer} = req('tokenizers'));
  } catch (e) {
    fail(`cannot load npm tokenizers from ${refsDir()} (run scripts/setup-refs.sh): ${e.message}`);
  }
  let tok;
  try {
    tok = Tokenizer.fromFile(tokPath);
  } catch (e) {
    fail(`${tokPath}: ${e.message}`);
  }

  const input = inPath === '-' ? process.stdin : fs.createReadStream(inPath);
  const out = outPath === '-' ? process.stdout : fs.createWriteStream(outPath);
  const rl = readline.createInterface({input, crlfDelay: Infinity});

  // Batches amortize the N-API crossing; the library spreads a batch over its thread pool.
  const batchSize = 256;
  let batch = [];
  let lineNo = 0;
  const flush = async () => {
    if (batch.length === 0) return;
    const [plain, special] = await Promise.all([
      tok.encodeBatch(batch, {addSpecialTokens: false}),
      tok.encodeBatch(batch, {addSpecialTokens: true}),
    ]);
    const ids = plain.map((e) => e.getIds());
    const idsSp = special.map((e) => e.getIds());
    const [dec, decSp, decSkip] = await Promise.all([
      tok.decodeBatch(ids, false),
      tok.decodeBatch(idsSp, false),
      tok.decodeBatch(idsSp, true),
    ]);
    let chunk = '';
    for (let i = 0; i < batch.length; i++) {
      // Fields equal to their default are left out to keep the output (and the cache) small.
      const r = {ids: ids[i]};
      if (!sameIds(idsSp[i], ids[i])) r.ids_sp = idsSp[i];
      if (dec[i] !== batch[i]) r.dec = dec[i];
      if (decSp[i] !== dec[i]) r.dec_sp = decSp[i];
      if (decSkip[i] !== dec[i]) r.dec_skip = decSkip[i];
      if (withOffsets) r.offs = plain[i].getOffsets().flat();
      chunk += JSON.stringify(r) + '\n';
    }
    if (!out.write(chunk)) await new Promise((r) => out.once('drain', r));
    batch = [];
  };
  for await (const line of rl) {
    lineNo++;
    let v;
    try {
      v = JSON.parse(line);
    } catch (e) {
      fail(`${inPath}:${lineNo}: ${e.message}`);
    }
    if (typeof v === 'object' && v !== null && typeof v.text === 'string') v = v.text;
    if (typeof v !== 'string') fail(`${inPath}:${lineNo}: want a JSON string or {"text": ...}`);
    batch.push(v);
    if (batch.length >= batchSize) await flush();
  }
  await flush();
  if (out !== process.stdout) await new Promise((r) => out.end(r));
}

main().catch((e) => fail(e.stack || String(e)));
