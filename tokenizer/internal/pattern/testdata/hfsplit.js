// Reference splitter: prints the byte ranges Hugging Face tokenizers (the Rust
// library, npm "tokenizers") matches for each {pattern, text} case read as JSON
// from stdin. It builds a tokenizer whose only pre-tokenizer is
// Split(Regex(pattern), behavior Removed, invert true), which keeps exactly the
// regex matches, and converts the code point offsets it reports to UTF-8 bytes.
const {Tokenizer} = require('tokenizers');

const cases = JSON.parse(require('fs').readFileSync(0, 'utf8'));
const tokenizers = new Map();
function preTokenizer(pattern) {
  let p = tokenizers.get(pattern);
  if (!p) {
    const json = {
      version: '1.0', truncation: null, padding: null, added_tokens: [], normalizer: null,
      pre_tokenizer: {type: 'Split', pattern: {Regex: pattern}, behavior: 'Removed', invert: true},
      post_processor: null, decoder: null,
      model: {type: 'WordLevel', vocab: {'a': 0}, unk_token: 'a'},
    };
    p = Tokenizer.fromString(JSON.stringify(json)).getPreTokenizer();
    tokenizers.set(pattern, p);
  }
  return p;
}

const out = cases.map(({pattern, text}) => {
  const cps = Array.from(text);
  const byteAt = [0];
  for (const c of cps) byteAt.push(byteAt[byteAt.length - 1] + Buffer.byteLength(c));
  return preTokenizer(pattern).preTokenizeString(text).map(([piece, [s, e]]) => {
    if (cps.slice(s, e).join('') !== piece) throw new Error(`offsets [${s},${e}] do not hold ${JSON.stringify(piece)}`);
    return [byteAt[s], byteAt[e]];
  });
});
process.stdout.write(JSON.stringify(out));
