// Package convert turns a whole Hugging Face checkpoint folder (config.json, safetensors,
// tokenizer.json, tokenizer_config.json, generation_config.json) into one GGUF file that
// llama.cpp runs, and back.
//
// It does what llama.cpp's convert_hf_to_gguf.py does for the architectures tokenwise runs:
// llama.cpp tensor names (a mixture of experts' per-expert tensors stacked into one
// [experts, rows, cols] tensor per projection), the q/k row permutation of its "llama" graph
// (Llama, Mistral, Mixtral),
// the architecture metadata ("llama.*", "qwen2.*", "qwen3.*"), Llama 3 rope scaling as a
// rope_freqs tensor, and the tokenizer as tokenizer.ggml.* metadata. Both directions keep
// every tensor bit-exact when the dtype is unchanged; 1-D tensors (norms, biases) are stored
// as F32 in GGUF, as llama.cpp expects, which is lossless from f16/bf16 and undone on the
// way back.
package convert

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// Options control a conversion.
type Options struct {
	// DType of the written weight matrices: "f32", "f16", "bf16" or "q8_0" (GGUF only), or
	// for GGUF one of llama-quantize's k-quant file types (KMixNames: "q4_k_m", ...), which choose
	// a dtype per tensor as llama-quantize does (kMix). "" keeps each tensor's dtype; a
	// quantized GGUF tensor becomes f32 in an HF folder.
	DType string
	// Name is GGUF's general.name (default: the source folder's name).
	Name string
}

// Metadata keys tokenwise adds so that GGUF -> HF restores what llama.cpp's keys lose.
const (
	keyHFModelType   = "tokenwise.hf.model_type"   // "mistral" vs "llama"
	keyHFRopeScaling = "tokenwise.hf.rope_scaling" // config.json's rope_scaling, JSON
)

// kv is one metadata entry before it becomes a gguf.KV. val is string, bool, uint32,
// int32, float32, or a slice of string/int32/float32.
type kv struct {
	key string
	val any
}

// HFToGGUF converts the HF checkpoint folder dir into a GGUF file at out.
func HFToGGUF(dir, out string, opts Options) error {
	mix, isMix := parseKMix(opts.DType)
	var target tensor.DType
	var convertAll bool
	if !isMix {
		var err error
		if target, convertAll, err = parseDType(opts.DType); err != nil {
			return err
		}
	}
	cfgPath := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	hf, err := model.ParseHFConfig(raw)
	if err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	cfg, err := hf.Config()
	if err != nil {
		return fmt.Errorf("%s: %w", cfgPath, err)
	}
	a := cfg.Arch()
	arch, permute, rs := a.GGUF, a.GGUFPermutesQK, cfg.RopeScaling

	tokJSON, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return fmt.Errorf("%s: a GGUF file carries its tokenizer: %w", dir, err)
	}
	tokCfg, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	ids := specialIDs(cfg)
	if gen, err := os.ReadFile(filepath.Join(dir, "generation_config.json")); err == nil {
		var g struct {
			BOS json.RawMessage `json:"bos_token_id"`
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(gen, &g); err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, "generation_config.json"), err)
		}
		if l, err := model.TokenIDs(g.BOS); err == nil && len(l) > 0 {
			ids.BOS = l[0]
		}
		if l, err := model.TokenIDs(g.EOS); err == nil && len(l) > 0 {
			ids.EOS = l[0]
		}
	}
	tokMeta, err := tokenizer.GGUFMetadata(tokJSON, tokCfg, cfg.VocabSize, ids)
	if err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}

	st, err := safetensors.OpenModel(dir)
	if err != nil {
		return err
	}
	defer st.Close()

	if cfg.MoE() && !cfg.NormTopKProb {
		return fmt.Errorf("%s: norm_topk_prob false: llama.cpp's %s graph always renormalizes the picked experts' weights, so the GGUF would run another model", cfgPath, arch)
	}
	experts := expertTensors(cfg)
	var tensors []tensor.Info
	fileType := -1
	tied := true // token_embd is also the output matrix unless the checkpoint has one
	for _, name := range st.Names() {
		if gname, _, skip, err := ggufName(name); err == nil && !skip && gname == "output.weight" {
			tied = false
		}
	}
	for _, name := range st.Names() {
		if _, ok := experts[name]; ok {
			continue // stacked below
		}
		t, _ := st.Tensor(name)
		gname, _, skip, err := ggufName(name)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if skip {
			continue
		}
		if permute {
			switch {
			case strings.HasSuffix(gname, ".attn_q.weight"), strings.HasSuffix(gname, ".attn_q.bias"):
				t, err = permuteRows(t, cfg.NumHeads, false)
			case strings.HasSuffix(gname, ".attn_k.weight"), strings.HasSuffix(gname, ".attn_k.bias"):
				t, err = permuteRows(t, cfg.NumKVHeads, false)
			}
			if err != nil {
				return err
			}
		}
		to := t.DType
		if convertAll {
			to = target
		}
		if len(t.Shape) <= 1 {
			to = tensor.F32 // llama.cpp keeps norms and biases in f32
		} else if isMix {
			if to, err = mix.dtypeFor(gname, t.Shape[len(t.Shape)-1], cfg.NumLayers, cfg.NumExperts, tied); err != nil {
				return err
			}
		} else if to.Quantized() && t.Shape[len(t.Shape)-1]%to.BlockSize() != 0 {
			to = tensor.F16 // as gguf-py does when a row does not fill whole blocks
		}
		if len(t.Shape) > 1 && fileType < 0 {
			fileType = ggufFileType(to)
		}
		if t, err = castTensor(t, to); err != nil {
			return err
		}
		t.Name = gname
		tensors = append(tensors, t)
	}
	if cfg.MoE() {
		dtypeOf := func(gname string, t tensor.Info) (tensor.DType, error) {
			dt := t.DType
			if isMix {
				return mix.dtypeFor(gname, t.Shape[1], cfg.NumLayers, cfg.NumExperts, tied)
			}
			if convertAll {
				dt = target
			}
			if dt.Quantized() && t.Shape[1]%dt.BlockSize() != 0 {
				dt = tensor.F16 // as for the other matrices
			}
			return dt, nil
		}
		stacked, err := stackExperts(st, cfg, dtypeOf)
		if err != nil {
			return fmt.Errorf("%s: %w", dir, err)
		}
		if fileType < 0 && len(stacked) > 0 {
			fileType = ggufFileType(stacked[0].DType)
		}
		tensors = append(tensors, stacked...)
	}
	if rs != nil && rs.Type == "llama3" {
		f := llama3RopeFactors(rs, cfg.RopeTheta, cfg.HeadDim)
		tensors = append(tensors, tensor.Info{Name: "rope_freqs.weight", DType: tensor.F32, Shape: []int{len(f)}, Data: tensor.Bytes(f)})
	}
	if err := checkTensors(tensors, cfg); err != nil {
		return fmt.Errorf("%s: %w", dir, err)
	}
	slices.SortStableFunc(tensors, func(a, b tensor.Info) int { return ggufOrder(a.Name) - ggufOrder(b.Name) })

	name := opts.Name
	if name == "" {
		name = filepath.Base(filepath.Clean(dir))
	}
	if isMix {
		fileType = mix.ftype
	}
	meta := archMeta(cfg, hf, name, fileType)
	return writeGGUF(out, meta, tokMeta, tensors)
}

// specialIDs are the BOS and EOS ids config.json gives (-1: none), for the GGUF tokenizer.
func specialIDs(cfg *model.Config) tokenizer.GGUFSpecialIDs {
	ids := tokenizer.GGUFSpecialIDs{BOS: -1, EOS: -1, PAD: -1}
	if len(cfg.BOS) > 0 {
		ids.BOS = cfg.BOS[0]
	}
	if len(cfg.EOS) > 0 {
		ids.EOS = cfg.EOS[0]
	}
	return ids
}

// archMeta is the general.* and architecture metadata of a GGUF file for cfg (hf: the
// config.json it came from, for what llama.cpp's keys do not hold), named name, with
// general.file_type fileType (none when negative).
func archMeta(cfg *model.Config, hf *model.HFConfig, name string, fileType int) []kv {
	arch, rs := cfg.Arch().GGUF, cfg.RopeScaling
	meta := []kv{
		{"general.architecture", arch},
		{"general.name", name},
	}
	if fileType >= 0 {
		meta = append(meta, kv{"general.file_type", uint32(fileType)})
	}
	meta = append(meta,
		kv{arch + ".vocab_size", uint32(cfg.VocabSize)},
		kv{arch + ".context_length", uint32(cfg.MaxPositions)},
		kv{arch + ".embedding_length", uint32(cfg.HiddenSize)},
		kv{arch + ".block_count", uint32(cfg.NumLayers)},
		kv{arch + ".feed_forward_length", uint32(cfg.IntermediateSize)},
		kv{arch + ".attention.head_count", uint32(cfg.NumHeads)},
		kv{arch + ".attention.head_count_kv", uint32(cfg.NumKVHeads)},
		kv{arch + ".attention.key_length", uint32(cfg.HeadDim)},
		kv{arch + ".attention.value_length", uint32(cfg.HeadDim)},
		kv{arch + ".rope.dimension_count", uint32(cfg.HeadDim)},
		kv{arch + ".rope.freq_base", float32(cfg.RopeTheta)},
		kv{arch + ".attention.layer_norm_rms_epsilon", float32(cfg.RMSNormEps)},
	)
	if cfg.MoE() {
		meta = append(meta, kv{arch + ".expert_count", uint32(cfg.NumExperts)}, kv{arch + ".expert_used_count", uint32(cfg.ExpertsPerTok)})
		if cfg.ExpertSize != cfg.IntermediateSize {
			meta = append(meta, kv{arch + ".expert_feed_forward_length", uint32(cfg.ExpertSize)})
		}
	}
	if rs != nil {
		if rs.Type == "linear" {
			meta = append(meta, kv{arch + ".rope.scaling.type", "linear"}, kv{arch + ".rope.scaling.factor", float32(rs.Factor)})
		}
		meta = append(meta, kv{keyHFRopeScaling, string(hf.RopeScaling)})
	}
	if cfg.Architecture != arch {
		meta = append(meta, kv{keyHFModelType, cfg.Architecture})
	}
	return meta
}

// ggufFileType is general.file_type (enum llama_ftype) for the dtype of the weight matrices.
func ggufFileType(d tensor.DType) int {
	switch d {
	case tensor.F32:
		return 0
	case tensor.F16:
		return 1
	case tensor.Q4_0:
		return 2
	case tensor.Q4_1:
		return 3
	case tensor.Q8_0:
		return 7
	case tensor.BF16:
		return 32
	}
	return -1
}

// ggufOrder sorts tensors as llama.cpp's converter writes them: embeddings, blocks in order,
// then the final norm and head.
func ggufOrder(name string) int {
	switch name {
	case "token_embd.weight":
		return 0
	case "rope_freqs.weight":
		return 1
	case "output_norm.weight":
		return 1 << 30
	case "output.weight":
		return 1<<30 + 1
	}
	if rest, ok := strings.CutPrefix(name, "blk."); ok {
		idx, part, _ := strings.Cut(rest, ".")
		n := 0
		for _, c := range idx {
			n = n*10 + int(c-'0')
		}
		for j, p := range blockNames {
			if p[1] == part {
				return 2 + n*(len(blockNames)+len(stackedNames)) + j
			}
		}
		for j, p := range stackedNames {
			if p == part {
				return 2 + n*(len(blockNames)+len(stackedNames)) + len(blockNames) + j
			}
		}
	}
	return 1<<30 - 1
}

// checkTensors verifies the tensors llama.cpp will look for are there with the config's shapes,
// so a wrong checkpoint fails here with a clear message rather than inside llama.cpp.
func checkTensors(ts []tensor.Info, c *model.Config) error {
	byName := map[string]tensor.Info{}
	for _, t := range ts {
		byName[t.Name] = t
	}
	want := func(name string, shape ...int) error {
		t, ok := byName[name]
		if !ok {
			return fmt.Errorf("tensor %s missing", name)
		}
		if !slices.Equal(t.Shape, shape) {
			return fmt.Errorf("tensor %s: shape %v, config.json implies %v", name, t.Shape, shape)
		}
		return nil
	}
	q, kvd := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	if err := want("token_embd.weight", c.VocabSize, c.HiddenSize); err != nil {
		return err
	}
	if err := want("output_norm.weight", c.HiddenSize); err != nil {
		return err
	}
	if _, ok := byName["output.weight"]; ok || !c.TieEmbeddings {
		if err := want("output.weight", c.VocabSize, c.HiddenSize); err != nil {
			return err
		}
	}
	for i := 0; i < c.NumLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		for _, w := range []struct {
			name  string
			shape []int
		}{
			{"attn_norm.weight", []int{c.HiddenSize}},
			{"attn_q.weight", []int{q, c.HiddenSize}},
			{"attn_k.weight", []int{kvd, c.HiddenSize}},
			{"attn_v.weight", []int{kvd, c.HiddenSize}},
			{"attn_output.weight", []int{c.HiddenSize, q}},
			{"ffn_norm.weight", []int{c.HiddenSize}},
		} {
			if err := want(p+w.name, w.shape...); err != nil {
				return err
			}
		}
		mlp := []struct {
			name  string
			shape []int
		}{
			{"ffn_gate.weight", []int{c.IntermediateSize, c.HiddenSize}},
			{"ffn_up.weight", []int{c.IntermediateSize, c.HiddenSize}},
			{"ffn_down.weight", []int{c.HiddenSize, c.IntermediateSize}},
		}
		if c.MoE() {
			e, es := c.NumExperts, c.ExpertSize
			mlp = []struct {
				name  string
				shape []int
			}{
				{"ffn_gate_inp.weight", []int{e, c.HiddenSize}},
				{"ffn_gate_exps.weight", []int{e, es, c.HiddenSize}},
				{"ffn_up_exps.weight", []int{e, es, c.HiddenSize}},
				{"ffn_down_exps.weight", []int{e, c.HiddenSize, es}},
			}
		}
		for _, w := range mlp {
			if err := want(p+w.name, w.shape...); err != nil {
				return err
			}
		}
	}
	return nil
}

// stackedNames are llama.cpp's per-layer expert tensors, each all experts' matrices of one
// projection stacked as [experts, rows, cols] (convert_hf_to_gguf.py merges Hugging Face's
// per-expert tensors into them).
var stackedNames = []string{"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"}

// expertTensors names the per-expert Hugging Face tensors of cfg: name → (layer,
// projection 0..2 as in stackedNames, expert).
func expertTensors(cfg *model.Config) map[string][3]int {
	out := map[string][3]int{}
	a := cfg.Arch()
	for i := range cfg.NumLayers {
		for e := range cfg.NumExperts {
			_, g, u, d, ok := a.ExpertTensorNames(i, e)
			if !ok {
				return out
			}
			for j, n := range []string{g, u, d} {
				out[n] = [3]int{i, j, e}
			}
		}
	}
	return out
}

// stackExperts reads every layer's per-expert tensors from st and returns the stacked GGUF
// tensors, each expert cast to the dtype dtypeOf gives the stacked tensor's name and the
// expert's matrix.
func stackExperts(st *safetensors.Model, cfg *model.Config, dtypeOf func(gname string, t tensor.Info) (tensor.DType, error)) ([]tensor.Info, error) {
	a := cfg.Arch()
	var out []tensor.Info
	for i := range cfg.NumLayers {
		for j, stacked := range stackedNames {
			s := tensor.Info{Name: fmt.Sprintf("blk.%d.%s", i, stacked)}
			for e := range cfg.NumExperts {
				_, g, u, d, _ := a.ExpertTensorNames(i, e)
				name := []string{g, u, d}[j]
				t, ok := st.Tensor(name)
				if !ok {
					return nil, fmt.Errorf("tensor %s: missing (%s has %d experts)", name, cfg.Architecture, cfg.NumExperts)
				}
				if len(t.Shape) != 2 {
					return nil, fmt.Errorf("tensor %s: shape %v, want a matrix", name, t.Shape)
				}
				dt, err := dtypeOf(s.Name, t)
				if err != nil {
					return nil, err
				}
				c, err := castTensor(t, dt)
				if err != nil {
					return nil, err
				}
				if e == 0 {
					s.DType, s.Shape = c.DType, []int{cfg.NumExperts, c.Shape[0], c.Shape[1]}
				} else if c.DType != s.DType || c.Shape[0] != s.Shape[1] || c.Shape[1] != s.Shape[2] {
					return nil, fmt.Errorf("tensor %s: %v%v, expert 0 has %v%v", name, c.DType, c.Shape, s.DType, s.Shape[1:])
				}
				s.Data = append(s.Data, c.Data...)
			}
			out = append(out, s)
		}
	}
	return out, nil
}
