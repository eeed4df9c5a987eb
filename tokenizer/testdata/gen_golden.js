// Regenerates golden_*.jsonl from the official Rust library (npm tokenizers@0.23.2):
//   NODE_PATH=.cache/refs/node_modules node tokenizer/testdata/gen_golden.js
// Each line: [text, addSpecial, ids, char offsets, decode(ids,false), decode(ids,true)].
const {Tokenizer} = require('tokenizers');
const fs = require('fs');
const dir = __dirname;
const inputs = JSON.parse(fs.readFileSync(dir + '/inputs.json'));
(async () => {
  for (const name of ['bytelevel', 'bytelevel_legacy', 'metaspace', 'unk', 'subword', 'misc', 'meta2', 'bytelevel_seq', 'gpt2style']) {
    const t = Tokenizer.fromFile(`${dir}/${name}.json`);
    const out = [];
    for (const add of [false, true]) {
      for (const c of inputs) {
        const e = await t.encode(c, null, {addSpecialTokens: add});
        const ids = Array.from(e.getIds());
        out.push(JSON.stringify([c, add, ids, e.getOffsets(), await t.decode(ids, false), await t.decode(ids, true)]));
      }
    }
    fs.writeFileSync(`${dir}/golden_${name}.jsonl`, out.join('\n') + '\n');
  }
})();

// Truncation and padding: golden_batch_*.json holds, per add_special_tokens setting, the ids
// of encode() for every input and of encodeBatch() for the first seven (padding to the longest).
(async () => {
  for (const name of ['trunc_pad', 'trunc_pad2']) {
    const t = Tokenizer.fromFile(`${dir}/${name}.json`);
    const out = {};
    for (const add of [false, true]) {
      const single = [];
      for (const c of inputs) single.push(Array.from((await t.encode(c, null, {addSpecialTokens: add})).getIds()));
      const batch = (await t.encodeBatch(inputs.slice(0, 7), {addSpecialTokens: add})).map(e => Array.from(e.getIds()));
      out[add] = {single, batch};
    }
    fs.writeFileSync(`${dir}/golden_batch_${name}.json`, JSON.stringify(out) + '\n');
  }
})();
