package convert

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// byteLevelAlphabet is GPT-2's byte-to-unicode map.
func byteLevelAlphabet() []string {
	var keep []int
	for b := '!'; b <= '~'; b++ {
		keep = append(keep, int(b))
	}
	for b := 0xA1; b <= 0xAC; b++ {
		keep = append(keep, b)
	}
	for b := 0xAE; b <= 0xFF; b++ {
		keep = append(keep, b)
	}
	out := make([]string, 256)
	n := 0
	for b := 0; b < 256; b++ {
		if slices.Contains(keep, b) {
			out[b] = string(rune(b))
		} else {
			out[b] = string(rune(256 + n))
			n++
		}
	}
	return out
}

// tinyTokenizer writes a small byte-level BPE tokenizer.json (every byte, a few merges, two
// special tokens) with the pre-tokenizer of llama.cpp's kind pre.
func tinyTokenizer(t *testing.T, pre string) (tokJSON, cfgJSON []byte) {
	t.Helper()
	alpha := byteLevelAlphabet()
	vocab := map[string]int{}
	for i, s := range alpha {
		vocab[s] = i
	}
	var merges [][2]string
	for _, m := range [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"Ġ", "a"}, {"e", "r"}, {"o", "n"}, {"Ġ", "w"}} {
		merges = append(merges, m)
		vocab[m[0]+m[1]] = len(vocab)
	}
	bos, eos := len(vocab), len(vocab)+1
	var pt any
	ignore := false
	switch pre {
	case "gpt-2":
		pt = map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}
	case "smollm":
		pt = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Digits", "individual_digits": true},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}}}
	case "llama-bpe", "qwen2":
		re := splitRegex[pre]
		ignore = pre == "llama-bpe"
		pt = map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": re}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}}}
	default:
		t.Fatalf("tinyTokenizer: pre %q", pre)
	}
	tj := map[string]any{
		"version": "1.0",
		"added_tokens": []any{
			map[string]any{"id": bos, "content": "<|bos|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
			map[string]any{"id": eos, "content": "<|eos|>", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
		},
		"normalizer":     nil,
		"pre_tokenizer":  pt,
		"post_processor": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false},
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"model": map[string]any{"type": "BPE", "dropout": nil, "unk_token": nil, "continuing_subword_prefix": nil,
			"end_of_word_suffix": nil, "fuse_unk": false, "byte_fallback": false, "ignore_merges": ignore,
			"vocab": vocab, "merges": merges},
	}
	var err error
	if tokJSON, err = json.Marshal(tj); err != nil {
		t.Fatal(err)
	}
	cfgJSON, _ = json.Marshal(map[string]any{"bos_token": "<|bos|>", "eos_token": "<|eos|>", "add_bos_token": false,
		"chat_template": "{% for m in messages %}<|bos|>{{ m['content'] }}<|eos|>{% endfor %}"})
	return tokJSON, cfgJSON
}

// Split regexes of the Llama-3 and Qwen2 tokenizer.json files.
var splitRegex = map[string]string{
	"llama-bpe": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
	"qwen2":     `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
}

type synthArch struct {
	name   string
	config map[string]any
	pre    string
}

// tinyArchs are small configs covering every supported architecture and the conversions'
// special cases: GQA, tied/untied, Qwen2 biases, Qwen3 q/k norms with head_dim != hidden/heads,
// linear and Llama 3 rope scaling, Mistral (llama in GGUF), vocabulary padding, and the
// mixtures of experts (stacked expert tensors; Mixtral is llama with experts in GGUF).
func tinyArchs() []synthArch {
	base := func(mt string) map[string]any {
		a, _ := model.LookupArch(mt)
		return map[string]any{
			"model_type": mt, "architectures": []string{a.HFClass},
			"vocab_size": 300, "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
			"num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 512,
			"rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": false, "hidden_act": "silu",
			"bos_token_id": 264, "eos_token_id": 265,
		}
	}
	llama := base("llama")
	llama["rope_scaling"] = map[string]any{"rope_type": "linear", "factor": 2.0}
	llama3 := base("llama")
	llama3["tie_word_embeddings"] = true
	llama3["rope_theta"] = 500000.0
	llama3["rope_scaling"] = map[string]any{"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
	mistral := base("mistral")
	mistral["num_key_value_heads"] = 4
	mistral["rope_theta"] = 1e6
	qwen2 := base("qwen2")
	qwen2["tie_word_embeddings"] = true
	qwen3 := base("qwen3")
	qwen3["head_dim"] = 32
	qwen3moe := base("qwen3_moe")
	qwen3moe["head_dim"] = 32
	qwen3moe["num_experts"], qwen3moe["num_experts_per_tok"], qwen3moe["moe_intermediate_size"], qwen3moe["norm_topk_prob"] = 6, 2, 32, true
	mixtral := base("mixtral")
	mixtral["num_local_experts"], mixtral["num_experts_per_tok"] = 4, 2
	return []synthArch{
		{"llama", llama, "llama-bpe"},
		{"llama3-tied", llama3, "llama-bpe"},
		{"mistral", mistral, "smollm"},
		{"qwen2", qwen2, "qwen2"},
		{"qwen3", qwen3, "qwen2"},
		{"qwen3moe", qwen3moe, "qwen2"},
		{"mixtral", mixtral, "smollm"},
	}
}

// writeSynth writes an HF checkpoint folder with seeded random weights.
func writeSynth(t *testing.T, dir string, a synthArch, dt tensor.DType) {
	t.Helper()
	cfgJSON, err := json.MarshalIndent(a.config, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := model.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	ts, err := model.RandomWeights(cfg, 7, dt)
	if err != nil {
		t.Fatalf("%s: %v", a.name, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tj, tc := tinyTokenizer(t, a.pre)
	for name, data := range map[string][]byte{"config.json": cfgJSON, "tokenizer.json": tj, "tokenizer_config.json": tc} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := safetensors.Write(filepath.Join(dir, "model.safetensors"), ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
}

// TestRoundTripBitExact converts synthetic checkpoints of every architecture HF -> GGUF -> HF
// at f32, f16 and bf16 and checks every tensor is byte-identical, the config means the same
// and the tokenizer encodes the same.
func TestRoundTripBitExact(t *testing.T) {
	texts := []string{"the weather in the north", "3.14159 and 2718", "<|bos|>hi<|eos|> there\n\n  x"}
	for _, a := range tinyArchs() {
		for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
			t.Run(a.name+"-"+dt.String(), func(t *testing.T) {
				tmp := t.TempDir()
				src, gg, back := filepath.Join(tmp, "hf"), filepath.Join(tmp, "m.gguf"), filepath.Join(tmp, "back")
				writeSynth(t, src, a, dt)
				if err := HFToGGUF(src, gg, Options{}); err != nil {
					t.Fatal(err)
				}
				checkGGUF(t, gg, a, dt)
				if err := GGUFToHF(gg, back, Options{}); err != nil {
					t.Fatal(err)
				}
				sameTensors(t, src, back)
				c1, err := model.ReadConfig(src)
				if err != nil {
					t.Fatal(err)
				}
				c2, err := model.ReadConfig(back)
				if err != nil {
					t.Fatalf("exported config.json: %v", err)
				}
				if !reflect.DeepEqual(c1, c2) {
					t.Errorf("config differs:\n%+v %+v\n%+v %+v", *c1, c1.RopeScaling, *c2, c2.RopeScaling)
				}
				t1, err := tokenizer.Load(src)
				if err != nil {
					t.Fatal(err)
				}
				t2, err := tokenizer.Load(back)
				if err != nil {
					t.Fatalf("exported tokenizer: %v", err)
				}
				for _, s := range texts {
					if a, b := t1.Encode(s, true), t2.Encode(s, true); !slices.Equal(a, b) {
						t.Errorf("%q: %v vs %v", s, a, b)
					}
				}
				if t1.Config().ChatTemplate != t2.Config().ChatTemplate || t1.Config().EOS != t2.Config().EOS {
					t.Errorf("tokenizer_config: template/EOS not carried over")
				}
			})
		}
	}
}

// checkGGUF looks at what llama.cpp reads: names, permuted q/k, f32 norms, metadata.
func checkGGUF(t *testing.T, path string, a synthArch, dt tensor.DType) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	arch, err := f.GetString("general.architecture")
	if err != nil {
		t.Fatal(err)
	}
	want, err := model.LookupArch(a.config["model_type"].(string))
	if err != nil {
		t.Fatal(err)
	}
	if arch != want.GGUF {
		t.Errorf("general.architecture %q, want %q", arch, want.GGUF)
	}
	if n, err := f.GetUint32(arch + ".block_count"); err != nil || n != 2 {
		t.Errorf("%s.block_count = %d, %v", arch, n, err)
	}
	if toks, err := f.GetStrings("tokenizer.ggml.tokens"); err != nil || len(toks) != 300 || toks[299] != "[PAD299]" {
		t.Errorf("tokenizer.ggml.tokens: %d tokens (want 300, padded), %v", len(toks), err)
	}
	if pre, _ := f.GetString("tokenizer.ggml.pre"); pre != a.pre {
		t.Errorf("tokenizer.ggml.pre %q, want %q", pre, a.pre)
	}
	for _, ti := range f.Tensors() {
		if len(ti.Shape) == 1 && ti.Name != "rope_freqs.weight" && ti.DType != tensor.F32 {
			t.Errorf("%s: %s, llama.cpp wants f32 norms and biases", ti.Name, ti.DType)
		}
		if len(ti.Shape) == 2 && ti.DType != dt {
			t.Errorf("%s: %s, want %s", ti.Name, ti.DType, dt)
		}
	}
	_, hasOut := f.Tensor("output.weight")
	if tied := a.config["tie_word_embeddings"].(bool); hasOut == tied {
		t.Errorf("output.weight present=%v with tie_word_embeddings=%v", hasOut, tied)
	}
	_, hasFreqs := f.Tensor("rope_freqs.weight")
	if rs, _ := a.config["rope_scaling"].(map[string]any); (rs != nil && rs["rope_type"] == "llama3") != hasFreqs {
		t.Errorf("rope_freqs.weight present=%v for rope_scaling %v", hasFreqs, rs)
	}
}

func sameTensors(t *testing.T, a, b string) {
	t.Helper()
	ma, err := safetensors.OpenModel(a)
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	mb, err := safetensors.OpenModel(b)
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	if !slices.Equal(ma.Names(), mb.Names()) {
		t.Fatalf("tensor names differ:\n%v\n%v", ma.Names(), mb.Names())
	}
	for _, n := range ma.Names() {
		x, _ := ma.Tensor(n)
		y, _ := mb.Tensor(n)
		if x.DType != y.DType || !slices.Equal(x.Shape, y.Shape) || !bytes.Equal(x.Data, y.Data) {
			t.Errorf("%s: %s%v vs %s%v, bytes equal %v", n, x.DType, x.Shape, y.DType, y.Shape, bytes.Equal(x.Data, y.Data))
		}
	}
}

// TestPermuteRows checks the q/k permutation against convert_hf_to_gguf.py's reshape/swapaxes
// written out by hand for 2 heads of dimension 4, and that inverse undoes it for quantized rows.
func TestPermuteRows(t *testing.T) {
	rows := make([]byte, 8)
	for i := range rows {
		rows[i] = byte(i)
	}
	p, err := permuteRows(tensor.Info{Name: "q", DType: tensor.I8, Shape: []int{8, 1}, Data: rows}, 2, false)
	if err != nil {
		t.Fatal(err)
	}
	// reshape(2 heads, 2 halves, 2) -> swapaxes(1,2): head 0 rows [0 2 1 3], head 1 rows [4 6 5 7]
	if want := []byte{0, 2, 1, 3, 4, 6, 5, 7}; !bytes.Equal(p.Data, want) {
		t.Errorf("permuted %v, want %v", p.Data, want)
	}
	q := make([]byte, 6*2*20) // 6 rows of 64 Q4_1 elements
	for i := range q {
		q[i] = byte(i * 7)
	}
	in := tensor.Info{Name: "k", DType: tensor.Q4_1, Shape: []int{6, 64}, Data: q}
	fw, err := permuteRows(in, 3, false)
	if err != nil {
		t.Fatal(err)
	}
	bw, err := permuteRows(fw, 3, true)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bw.Data, q) {
		t.Error("inverse permutation does not restore the rows")
	}
	if _, err := permuteRows(tensor.Info{Name: "bad", DType: tensor.F32, Shape: []int{6, 1}, Data: make([]byte, 24)}, 4, false); err == nil {
		t.Error("6 rows into 4 heads: no error")
	}
}

// TestExportErrors checks that bad input gives a clear error naming the problem.
func TestExportErrors(t *testing.T) {
	a := tinyArchs()[0]
	mk := func(t *testing.T, edit func(dir string)) string {
		dir := filepath.Join(t.TempDir(), "hf")
		writeSynth(t, dir, a, tensor.F32)
		edit(dir)
		return dir
	}
	setCfg := func(key string, v any) func(string) {
		return func(dir string) {
			c := map[string]any{}
			for k, x := range a.config {
				c[k] = x
			}
			if v == nil {
				delete(c, key)
			} else {
				c[key] = v
			}
			b, _ := json.Marshal(c)
			os.WriteFile(filepath.Join(dir, "config.json"), b, 0o644)
		}
	}
	cases := []struct {
		name, want string
		edit       func(string)
	}{
		{"unsupported arch", "model_type", setCfg("model_type", "gpt_neox")},
		{"no tokenizer", "tokenizer.json", func(d string) { os.Remove(filepath.Join(d, "tokenizer.json")) }},
		{"shape mismatch", "shape", setCfg("intermediate_size", 128)},
		{"truncated safetensors", "model.safetensors", func(d string) {
			p := filepath.Join(d, "model.safetensors")
			b, _ := os.ReadFile(p)
			os.WriteFile(p, b[:len(b)/2], 0o644)
		}},
		{"bad config json", "config.json", func(d string) { os.WriteFile(filepath.Join(d, "config.json"), []byte("{"), 0o644) }},
		{"vocab too small for tokenizer", "vocab_size", setCfg("vocab_size", 100)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := mk(t, c.edit)
			err := HFToGGUF(dir, filepath.Join(t.TempDir(), "x.gguf"), Options{})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one mentioning %q", err, c.want)
			}
		})
	}
	if err := HFToGGUF(mk(t, func(string) {}), filepath.Join(t.TempDir(), "x.gguf"), Options{DType: "q3"}); err == nil {
		t.Error("dtype q3: no error")
	}
	// A truncated GGUF.
	dir := mk(t, func(string) {})
	gg := filepath.Join(t.TempDir(), "m.gguf")
	if err := HFToGGUF(dir, gg, Options{}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(gg)
	os.WriteFile(gg, b[:len(b)-100], 0o644)
	if err := GGUFToHF(gg, filepath.Join(t.TempDir(), "out"), Options{}); err == nil {
		t.Error("truncated GGUF: no error")
	}
}

// TestQ8_0Export checks --dtype q8_0: weight matrices quantized as ggml does, norms f32.
func TestQ8_0Export(t *testing.T) {
	a := tinyArchs()[3]
	tmp := t.TempDir()
	src, gg := filepath.Join(tmp, "hf"), filepath.Join(tmp, "m.gguf")
	writeSynth(t, src, a, tensor.F32)
	if err := HFToGGUF(src, gg, Options{DType: "q8_0"}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(gg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := safetensors.OpenModel(src)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hf, _ := st.Tensor("model.layers.1.mlp.down_proj.weight")
	gq, _ := f.Tensor("blk.1.ffn_down.weight")
	if gq.DType != tensor.Q8_0 {
		t.Fatalf("ffn_down: %s", gq.DType)
	}
	src32 := make([]float32, hf.NumElements())
	if err := tensor.Dequantize(hf.DType, hf.Data, src32); err != nil {
		t.Fatal(err)
	}
	want := make([]byte, len(gq.Data))
	if err := tensor.Quantize(tensor.Q8_0, src32, want); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, gq.Data) {
		t.Error("q8_0 data differs from tensor.Quantize of the source")
	}
	if ft, _ := f.GetUint32("general.file_type"); ft != 7 {
		t.Errorf("general.file_type %d, want 7 (MOSTLY_Q8_0)", ft)
	}
}

// TestConfigAgreesWithModel exports configs that leave tie_word_embeddings out: convert must
// read them as model does (the architecture's default, untied), and the GGUF must load as the
// same shape.
func TestConfigAgreesWithModel(t *testing.T) {
	for _, a := range tinyArchs() {
		t.Run(a.name, func(t *testing.T) {
			delete(a.config, "tie_word_embeddings")
			tmp := t.TempDir()
			src, gg := filepath.Join(tmp, "hf"), filepath.Join(tmp, "m.gguf")
			writeSynth(t, src, a, tensor.F32)
			if err := HFToGGUF(src, gg, Options{}); err != nil {
				t.Fatal(err)
			}
			want, err := model.ReadConfig(src)
			if err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(gg)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, interleaved, err := model.ConfigFromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			if interleaved != want.Arch().GGUFPermutesQK || got.Arch().GGUF != want.Arch().GGUF {
				t.Errorf("GGUF reads as %s (q/k permuted: %v), want a %s graph", got.Architecture, interleaved, want.Arch().GGUF)
			}
			type shape struct {
				vocab, hidden, inter, layers, heads, kv, headDim, maxPos int
				tied, bias                                               bool
			}
			of := func(c *model.Config) shape {
				return shape{c.VocabSize, c.HiddenSize, c.IntermediateSize, c.NumLayers, c.NumHeads, c.NumKVHeads, c.HeadDim, c.MaxPositions, c.TieEmbeddings, c.AttentionBias}
			}
			if of(got) != of(want) || want.TieEmbeddings {
				t.Errorf("GGUF shape %+v, config.json %+v (untied by default)", of(got), of(want))
			}
		})
	}
}

// A Qwen3-MoE checkpoint without norm_topk_prob is not exported: llama.cpp's qwen3moe graph
// would renormalize its experts' weights and so run another model.
func TestExportMoEUnnormed(t *testing.T) {
	a := tinyArchs()[5]
	if a.name != "qwen3moe" {
		t.Fatalf("tinyArchs()[5] is %s", a.name)
	}
	a.config = maps.Clone(a.config)
	a.config["norm_topk_prob"] = false
	dir := filepath.Join(t.TempDir(), "hf")
	writeSynth(t, dir, a, tensor.F32)
	err := HFToGGUF(dir, filepath.Join(t.TempDir(), "x.gguf"), Options{})
	if err == nil || !strings.Contains(err.Error(), "norm_topk_prob") {
		t.Errorf("error %v, want one naming norm_topk_prob", err)
	}
}
