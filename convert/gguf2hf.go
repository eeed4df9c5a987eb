package convert

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// GGUFToHF converts the GGUF file at path into an HF checkpoint folder outDir (created if
// needed): config.json, generation_config.json, model.safetensors, tokenizer.json and
// tokenizer_config.json.
func GGUFToHF(path, outDir string, opts Options) error {
	target, convertAll, err := parseDType(opts.DType)
	if err != nil {
		return err
	}
	if convertAll && target.Quantized() {
		return fmt.Errorf("dtype %s: Hugging Face folders hold f32, f16 or bf16", target)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	m := meta{f}

	arch, ok := m.str("general.architecture")
	if !ok {
		return fmt.Errorf("%s: general.architecture missing", path)
	}
	experts, _ := m.uint(arch + ".expert_count")
	a, err := model.ArchByGGUFExperts(arch, experts > 0)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	permute := a.GGUFPermutesQK // a property of the GGUF graph, whichever model_type runs on it
	if mt, ok := m.str(keyHFModelType); ok {
		if a, err = model.LookupArch(mt); err != nil {
			return fmt.Errorf("%s: %s: %w", path, keyHFModelType, err)
		}
		if a.GGUF != arch {
			return fmt.Errorf("%s: %s %q does not run on llama.cpp's %q graph", path, keyHFModelType, mt, arch)
		}
	}

	need := func(key string) (int, error) {
		v, ok := m.uint(arch + "." + key)
		if !ok {
			return 0, fmt.Errorf("%s: %s.%s missing or not an integer", path, arch, key)
		}
		return int(v), nil
	}
	if a.MoE != (experts > 0) {
		return fmt.Errorf("%s: %s.expert_count %d for %s", path, arch, experts, a.ModelType)
	}
	var c model.HFConfig
	c.ModelType = a.ModelType
	c.Architectures = []string{a.HFClass}
	c.HiddenAct = "silu"
	if c.HiddenSize, err = need("embedding_length"); err != nil {
		return err
	}
	if c.NumHiddenLayers, err = need("block_count"); err != nil {
		return err
	}
	if c.IntermediateSize, err = need("feed_forward_length"); err != nil {
		return err
	}
	if c.NumAttentionHeads, err = need("attention.head_count"); err != nil {
		return err
	}
	c.NumKeyValueHeads = c.NumAttentionHeads
	if v, ok := m.uint(arch + ".attention.head_count_kv"); ok {
		c.NumKeyValueHeads = int(v)
	}
	if v, ok := m.uint(arch + ".attention.key_length"); ok {
		c.HeadDim = int(v)
	} else if c.NumAttentionHeads > 0 {
		c.HeadDim = c.HiddenSize / c.NumAttentionHeads
	}
	if v, ok := m.uint(arch + ".context_length"); ok {
		c.MaxPositionEmbeddings = int(v)
	}
	c.RMSNormEps = 1e-5
	if v, ok := m.float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		c.RMSNormEps = roundF32(v)
	}
	c.RopeTheta = 10000
	if v, ok := m.float(arch + ".rope.freq_base"); ok {
		c.RopeTheta = roundF32(v)
	}
	if rsJSON, ok := m.str(keyHFRopeScaling); ok {
		c.RopeScaling = json.RawMessage(rsJSON)
	} else if typ, ok := m.str(arch + ".rope.scaling.type"); ok && typ != "none" {
		factor, _ := m.float(arch + ".rope.scaling.factor")
		if typ != "linear" {
			return fmt.Errorf("%s: %s.rope.scaling.type %q not supported (linear)", path, arch, typ)
		}
		c.RopeScaling, _ = json.Marshal(map[string]any{"rope_type": "linear", "factor": roundF32(factor)})
	}

	if a.MoE {
		// llama.cpp's graphs renormalize the picked experts' weights: Mixtral's routing,
		// Qwen3-MoE's norm_topk_prob true.
		used, ok := m.uint(arch + ".expert_used_count")
		if !ok {
			return fmt.Errorf("%s: %s.expert_used_count missing", path, arch)
		}
		c.NumExpertsPerTok = int(used)
		if a.ModelType == "mixtral" {
			c.NumLocalExperts = int(experts)
		} else {
			c.NumExperts = int(experts)
			c.MoEIntermediateSize = c.IntermediateSize
			if v, ok := m.uint(arch + ".expert_feed_forward_length"); ok {
				c.MoEIntermediateSize = int(v)
			}
			yes := true
			c.NormTopKProb = &yes
		}
	}

	// Tensors.
	byGG := map[string]tensor.Info{}
	for _, t := range f.Tensors() {
		byGG[t.Name] = t
	}
	if _, ok := byGG["rope_freqs.weight"]; ok && len(c.RopeScaling) == 0 {
		return fmt.Errorf("%s: rope_freqs.weight without %s: the Llama 3 rope_scaling parameters cannot be recovered", path, keyHFRopeScaling)
	}
	emb, ok := byGG["token_embd.weight"]
	if !ok || len(emb.Shape) != 2 {
		return fmt.Errorf("%s: token_embd.weight missing or not 2-D", path)
	}
	c.VocabSize = emb.Shape[0]
	_, hasOutput := byGG["output.weight"]
	tied := !hasOutput
	c.TieWordEmbeddings = &tied
	if _, ok := byGG["blk.0.attn_q.bias"]; ok && !a.QKVBias {
		c.AttentionBias = true
	}

	// The HF dtype: --dtype, else the dtype of the weight matrices when HF can hold it.
	out := target
	if !convertAll {
		out = emb.DType
		if out != tensor.F32 && out != tensor.F16 && out != tensor.BF16 {
			out = tensor.F32
		}
	}
	c.TorchDType = torchDType(out)

	var tensors []tensor.Info
	for _, t := range f.Tensors() {
		if layer, j, ok := stackedName(t.Name); ok && a.MoE {
			ts, err := unstackExperts(t, a, layer, j, out)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			tensors = append(tensors, ts...)
			continue
		}
		name, layer, skip, err := hfName(t.Name)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		if strings.HasSuffix(t.Name, ".ffn_gate_inp.weight") && a.MoE {
			name, _, _, _, _ = a.ExpertTensorNames(layer, 0) // the architecture's router
		}
		if skip {
			continue
		}
		if permute {
			switch {
			case strings.HasSuffix(t.Name, ".attn_q.weight"), strings.HasSuffix(t.Name, ".attn_q.bias"):
				t, err = permuteRows(t, c.NumAttentionHeads, true)
			case strings.HasSuffix(t.Name, ".attn_k.weight"), strings.HasSuffix(t.Name, ".attn_k.bias"):
				t, err = permuteRows(t, c.NumKeyValueHeads, true)
			}
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
		}
		if t, err = castTensor(t, out); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		t.Name = name
		tensors = append(tensors, t)
	}
	var ggNames []tensor.Info
	for _, t := range tensors {
		if gname, _, _, err := ggufName(t.Name); err == nil {
			t.Name = gname
			ggNames = append(ggNames, t)
		}
	}
	if a.MoE {
		for _, t := range f.Tensors() {
			if _, _, ok := stackedName(t.Name); ok {
				ggNames = append(ggNames, t)
			}
		}
	}
	// The config.json to be written, read back as tokenwise reads it.
	mc, err := c.Config()
	if err != nil {
		return fmt.Errorf("%s: config.json: %w", path, err)
	}
	if err := checkTensors(ggNames, mc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}

	// Tokenizer.
	tokJSON, tokCfg, bos, eos, err := tokenizer.GGUFToHF(f)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}

	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return err
	}
	cfgJSON, err := configJSON(&c, bos, eos)
	if err != nil {
		return err
	}
	gen := map[string]any{"_from_model_config": true}
	if bos >= 0 {
		gen["bos_token_id"] = bos
	}
	if eos >= 0 {
		gen["eos_token_id"] = eos
	}
	genJSON, _ := json.MarshalIndent(gen, "", "  ")
	files := []struct {
		name string
		data []byte
	}{
		{"config.json", cfgJSON},
		{"generation_config.json", append(genJSON, '\n')},
		{"tokenizer.json", tokJSON},
		{"tokenizer_config.json", tokCfg},
	}
	for _, fl := range files {
		if err := os.WriteFile(filepath.Join(outDir, fl.name), fl.data, 0o644); err != nil {
			return err
		}
	}
	// A stale index from an earlier export would shadow the single file.
	os.Remove(filepath.Join(outDir, "model.safetensors.index.json"))
	return safetensors.Write(filepath.Join(outDir, "model.safetensors"), tensors, map[string]string{"format": "pt"})
}

// roundF32 gives a float read from a GGUF float32 its shortest decimal form (1e-06, not
// 9.999999974752427e-07), as the original config.json had it.
func roundF32(v float64) float64 {
	var x float64
	fmt.Sscan(fmt.Sprint(float32(v)), &x)
	return x
}

func configJSON(c *model.HFConfig, bos, eos int) ([]byte, error) {
	m := map[string]any{
		"architectures":           c.Architectures,
		"model_type":              c.ModelType,
		"vocab_size":              c.VocabSize,
		"hidden_size":             c.HiddenSize,
		"intermediate_size":       c.IntermediateSize,
		"num_hidden_layers":       c.NumHiddenLayers,
		"num_attention_heads":     c.NumAttentionHeads,
		"num_key_value_heads":     c.NumKeyValueHeads,
		"head_dim":                c.HeadDim,
		"max_position_embeddings": c.MaxPositionEmbeddings,
		"rms_norm_eps":            c.RMSNormEps,
		"rope_theta":              c.RopeTheta,
		"tie_word_embeddings":     *c.TieWordEmbeddings,
		"hidden_act":              c.HiddenAct,
		"torch_dtype":             c.TorchDType,
		"attention_bias":          c.AttentionBias,
		"mlp_bias":                false,
	}
	if c.NumLocalExperts > 0 {
		m["num_local_experts"] = c.NumLocalExperts
	}
	if c.NumExperts > 0 {
		m["num_experts"], m["moe_intermediate_size"] = c.NumExperts, c.MoEIntermediateSize
	}
	if c.NumExpertsPerTok > 0 {
		m["num_experts_per_tok"] = c.NumExpertsPerTok
	}
	if c.NormTopKProb != nil {
		m["norm_topk_prob"] = *c.NormTopKProb
	}
	if len(c.RopeScaling) > 0 {
		m["rope_scaling"] = c.RopeScaling
	} else {
		m["rope_scaling"] = nil
	}
	if bos >= 0 {
		m["bos_token_id"] = bos
	}
	if eos >= 0 {
		m["eos_token_id"] = eos
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetIndent("", "  ")
	if err := e.Encode(m); err != nil {
		return nil, fmt.Errorf("config.json: %w", err)
	}
	return b.Bytes(), nil
}

// stackedName parses blk.N.ffn_{gate,up,down}_exps.weight: the layer and the projection's
// index in stackedNames.
func stackedName(gg string) (layer, proj int, ok bool) {
	rest, ok := strings.CutPrefix(gg, "blk.")
	if !ok {
		return 0, 0, false
	}
	idx, part, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return 0, 0, false
	}
	for j, n := range stackedNames {
		if part == n {
			return i, j, true
		}
	}
	return 0, 0, false
}

// unstackExperts splits a stacked [experts, rows, cols] GGUF tensor into a's per-expert
// Hugging Face tensors in dtype out.
func unstackExperts(t tensor.Info, a *model.Arch, layer, proj int, out tensor.DType) ([]tensor.Info, error) {
	if len(t.Shape) != 3 {
		return nil, fmt.Errorf("tensor %s: shape %v, want [experts, rows, cols]", t.Name, t.Shape)
	}
	e := t.Shape[0]
	per := len(t.Data) / e
	var ts []tensor.Info
	for x := range e {
		_, g, u, d, _ := a.ExpertTensorNames(layer, x)
		one := tensor.Info{Name: []string{g, u, d}[proj], DType: t.DType, Shape: []int{t.Shape[1], t.Shape[2]}, Data: t.Data[x*per : (x+1)*per]}
		one, err := castTensor(one, out)
		if err != nil {
			return nil, err
		}
		ts = append(ts, one)
	}
	return ts, nil
}
