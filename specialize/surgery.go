package specialize

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/tensor"
)

// Init names how the rows of new tokens are initialized.
const (
	InitMean = "mean" // mean of the rows of the two tokens a merge joins (added tokens: of their parts)
	InitExp  = "exp"  // AdaptiVocab: exponential weights over the old tokens, toward the last for inputs, the first for outputs
	InitFVT  = "fvt"  // Fast Vocabulary Transfer: mean over the old tokenizer's tokens of the text
)

// Surgery describes the checkpoint WriteCheckpoint wrote.
type Surgery struct {
	Hidden       int    `json:"hidden_size"`
	Tied         bool   `json:"tied_embeddings"`
	DType        string `json:"dtype"`
	RowsBefore   int    `json:"rows_before"` // embedding/LM-head rows (config vocab_size)
	RowsAfter    int    `json:"rows_after"`  // new vocabulary padded to a multiple of PadTo
	ParamsBefore int64  `json:"params_before"`
	ParamsAfter  int64  `json:"params_after"`
	BytesBefore  int64  `json:"bytes_before"` // all weight bytes
	BytesAfter   int64  `json:"bytes_after"`
	HeadBefore   int64  `json:"lm_head_bytes_before"`
	HeadAfter    int64  `json:"lm_head_bytes_after"`
}

// names of the two vocabulary-sized matrices in Llama/Mistral/Qwen checkpoints.
const (
	embedName = "model.embed_tokens.weight"
	headName  = "lm_head.weight"
)

// WriteCheckpoint writes the HF checkpoint folder src specialized by p into outDir: the
// embedding and LM-head rows sliced by the id map, rows for new tokens initialized by init,
// vocab_size padded to a multiple of padTo (zero rows, which the engine never samples: it
// samples only ids below the tokenizer's vocabulary size), and bos/eos/pad ids renumbered in
// config.json, generation_config.json and tokenizer_config.json.
func WriteCheckpoint(src string, p *Plan, outDir, init string, padTo int) (*Surgery, error) {
	if init == "" {
		init = InitMean
	}
	if init != InitMean && init != InitExp && init != InitFVT {
		return nil, fmt.Errorf("init %q: want mean, exp or fvt", init)
	}
	if padTo <= 0 {
		padTo = 1
	}
	cfgPath := filepath.Join(src, "config.json")
	cfg, err := readJSONObject(cfgPath)
	if err != nil {
		return nil, err
	}
	m, err := safetensors.OpenModel(src)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	emb, ok := m.Tensor(embedName)
	if !ok {
		return nil, fmt.Errorf("%s: no tensor %s", src, embedName)
	}
	head, hasHead := m.Tensor(headName)
	if len(emb.Shape) != 2 {
		return nil, fmt.Errorf("%s: %s has shape %v, want [vocab, hidden]", src, embedName, emb.Shape)
	}
	if emb.DType != tensor.F32 && emb.DType != tensor.F16 && emb.DType != tensor.BF16 {
		return nil, fmt.Errorf("%s: %s is %s; specialize handles f32, f16 and bf16 weights", src, embedName, emb.DType)
	}
	rowsOld, hidden := emb.Shape[0], emb.Shape[1]
	if len(p.NewToOld) > 0 && p.Old.VocabSize() > rowsOld {
		return nil, fmt.Errorf("%s: the tokenizer has %d ids but %s only %d rows", src, p.Old.VocabSize(), embedName, rowsOld)
	}
	nNew := p.Tokenizer.VocabSize()
	rowsNew := (nNew + padTo - 1) / padTo * padTo
	sg := &Surgery{Hidden: hidden, Tied: !hasHead, DType: emb.DType.String(), RowsBefore: rowsOld, RowsAfter: rowsNew}

	newEmb, err := sliceRows(emb, p, rowsNew, init, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", embedName, err)
	}
	var newHead []byte
	if hasHead {
		if head.DType != emb.DType || len(head.Shape) != 2 || head.Shape[0] != rowsOld || head.Shape[1] != hidden {
			return nil, fmt.Errorf("%s: %s is %s %v, want %s [%d %d]", src, headName, head.DType, head.Shape, emb.DType, rowsOld, hidden)
		}
		if newHead, err = sliceRows(head, p, rowsNew, init, false); err != nil {
			return nil, fmt.Errorf("%s: %w", headName, err)
		}
	}

	if err := os.MkdirAll(outDir, 0o755); err != nil {
		return nil, err
	}
	names := m.Names()
	sort.Strings(names)
	var infos []tensor.Info
	var datas [][]byte
	for _, n := range names {
		t, _ := m.Tensor(n)
		elems := int64(t.NumElements())
		nb := int64(len(t.Data))
		sg.ParamsBefore += elems
		sg.BytesBefore += nb
		data := t.Data
		switch n {
		case embedName:
			data = newEmb
		case headName:
			data = newHead
		}
		if n == embedName || n == headName {
			t.Shape = []int{rowsNew, hidden}
			if n == headName || !hasHead {
				sg.HeadBefore = nb
				sg.HeadAfter = int64(len(data))
			}
		}
		sg.ParamsAfter += int64(t.NumElements())
		sg.BytesAfter += int64(len(data))
		t.Data = nil
		infos = append(infos, t)
		datas = append(datas, data)
	}
	if err := safetensors.WriteStream(filepath.Join(outDir, "model.safetensors"), infos, map[string]string{"format": "pt"},
		func(i int) ([]byte, error) { return datas[i], nil }); err != nil {
		return nil, err
	}

	// config.json
	cfg["vocab_size"] = rowsNew
	for _, k := range []string{"bos_token_id", "eos_token_id", "pad_token_id"} {
		if err := remapIDField(cfg, k, p); err != nil {
			return nil, fmt.Errorf("config.json: %w", err)
		}
	}
	if err := writeJSON(filepath.Join(outDir, "config.json"), cfg); err != nil {
		return nil, err
	}
	if gc, err := readJSONObject(filepath.Join(src, "generation_config.json")); err == nil {
		for _, k := range []string{"bos_token_id", "eos_token_id", "pad_token_id", "decoder_start_token_id"} {
			if err := remapIDField(gc, k, p); err != nil {
				return nil, fmt.Errorf("generation_config.json: %w", err)
			}
		}
		if err := writeJSON(filepath.Join(outDir, "generation_config.json"), gc); err != nil {
			return nil, err
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if tc, err := readJSONObject(filepath.Join(src, "tokenizer_config.json")); err == nil {
		if dec, ok := tc["added_tokens_decoder"].(map[string]any); ok {
			out := map[string]any{}
			for _, v := range dec {
				e, _ := v.(map[string]any)
				c, _ := e["content"].(string)
				if id, ok := p.Tokenizer.TokenID(c); ok {
					out[strconv.Itoa(id)] = e
				}
			}
			tc["added_tokens_decoder"] = out
		}
		if err := writeJSON(filepath.Join(outDir, "tokenizer_config.json"), tc); err != nil {
			return nil, err
		}
	} else if !os.IsNotExist(err) {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(outDir, "tokenizer.json"), p.JSON, 0o644); err != nil {
		return nil, err
	}
	vm := map[string]any{
		"old_vocab_size":    p.VocabBefore(),
		"new_vocab_size":    nNew,
		"padded_vocab_size": rowsNew,
		"new_to_old":        p.NewToOld,
		"new_tokens":        p.NewTokens,
	}
	if err := writeJSON(filepath.Join(outDir, "vocab_map.json"), vm); err != nil {
		return nil, err
	}
	// Everything else (chat templates, special_tokens_map.json, README) travels unchanged.
	entries, _ := os.ReadDir(src)
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || strings.HasSuffix(n, ".safetensors") || n == "model.safetensors.index.json" ||
			n == "config.json" || n == "generation_config.json" || n == "tokenizer_config.json" ||
			n == "tokenizer.json" || n == "vocab_map.json" {
			continue
		}
		if _, err := os.Stat(filepath.Join(outDir, n)); err == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, n))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(outDir, n), b, 0o644); err != nil {
			return nil, err
		}
	}
	return sg, nil
}

// sliceRows builds the new [rowsNew, hidden] matrix: kept (and restored) rows copied byte for
// byte, new tokens initialized, padding rows zero.
func sliceRows(t tensor.Info, p *Plan, rowsNew int, init string, input bool) ([]byte, error) {
	hidden := t.Shape[1]
	rowBytes, err := t.DType.BytesFor(hidden)
	if err != nil {
		return nil, err
	}
	out := make([]byte, rowsNew*rowBytes)
	oldRow := func(o int) []float32 {
		v := make([]float32, hidden)
		_ = tensor.Dequantize(t.DType, t.Data[o*rowBytes:(o+1)*rowBytes], v) // float types always convert
		return v
	}
	newRow := func(n int) []float32 {
		v := make([]float32, hidden)
		_ = tensor.Dequantize(t.DType, out[n*rowBytes:(n+1)*rowBytes], v)
		return v
	}
	for n, o := range p.NewToOld {
		if o >= 0 {
			if o >= t.Shape[0] {
				return nil, fmt.Errorf("old id %d has no row (%d rows)", o, t.Shape[0])
			}
			copy(out[n*rowBytes:], t.Data[o*rowBytes:(o+1)*rowBytes])
		}
	}
	// New tokens in id order: a merge's parts always have smaller ids.
	for _, nt := range p.NewTokens {
		if nt.OldID >= 0 {
			continue
		}
		var rows [][]float32
		var w []float64
		switch {
		case init == InitMean && len(nt.Parts) > 0:
			for _, id := range nt.Parts {
				rows = append(rows, newRow(id))
				w = append(w, 1)
			}
		default: // fvt, exp, or mean without parts
			for i, id := range nt.OldParts {
				rows = append(rows, oldRow(id))
				switch {
				case init != InitExp:
					w = append(w, 1)
				case input:
					// The input side of an n-gram is best predicted by where the model has read
					// the whole n-gram: weight the last tokens most.
					w = append(w, math.Exp(float64(i)))
				default:
					// The output side emits the n-gram's first token first: weight it most.
					w = append(w, math.Exp(-float64(i)))
				}
			}
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("new token %d (%q) has no parts to initialize from", nt.ID, nt.Text)
		}
		v := make([]float32, hidden)
		var sum float64
		for _, x := range w {
			sum += x
		}
		for r, row := range rows {
			f := float32(w[r] / sum)
			for k := range v {
				v[k] += f * row[k]
			}
		}
		if err := encodeRow(t.DType, v, out[nt.ID*rowBytes:(nt.ID+1)*rowBytes]); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func encodeRow(dt tensor.DType, v []float32, dst []byte) error {
	for i, x := range v {
		switch dt {
		case tensor.F32:
			binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(x))
		case tensor.F16:
			binary.LittleEndian.PutUint16(dst[2*i:], tensor.F32ToF16(x))
		case tensor.BF16:
			binary.LittleEndian.PutUint16(dst[2*i:], tensor.F32ToBF16(x))
		default:
			return fmt.Errorf("dtype %s: cannot write rows", dt)
		}
	}
	return nil
}

// remapIDField renumbers an id (or list of ids) field; absent fields stay absent.
func remapIDField(obj map[string]any, key string, p *Plan) error {
	v, ok := obj[key]
	if !ok || v == nil {
		return nil
	}
	one := func(x any) (any, error) {
		n, ok := x.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%s: %v is not an id", key, x)
		}
		id, err := n.Int64()
		if err != nil || id < 0 || int(id) >= len(p.OldToNew) {
			return nil, fmt.Errorf("%s: %v is not an id of the old vocabulary", key, x)
		}
		nid := p.OldToNew[id]
		if nid < 0 {
			return nil, fmt.Errorf("%s: id %d was pruned", key, id)
		}
		return nid, nil
	}
	if list, ok := v.([]any); ok {
		for i := range list {
			x, err := one(list[i])
			if err != nil {
				return err
			}
			list[i] = x
		}
		return nil
	}
	x, err := one(v)
	if err != nil {
		return err
	}
	obj[key] = x
	return nil
}

func readJSONObject(path string) (map[string]any, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

func writeJSON(path string, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
