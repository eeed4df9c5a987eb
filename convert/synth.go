package convert

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/model"
	"github.com/tokenwise/tokenwise/tensor"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// SynthGGUF writes a seeded random-weight GGUF of the architecture and shape hfConfig (a
// config.json) describes, in one of llama-quantize's k-quant file types (dtype "q4_k_m",
// "q6_k", ... KMixNames: each tensor the dtype that file type gives it, as export writes them), with the
// tokenizer tokJSON (tokCfg: its tokenizer_config.json, or nil).
//
// It exists for shapes too large to go through a float checkpoint on one machine: a
// Qwen3-30B-A3B is 61 GB in bf16, and quantizing its 30 billion weights to Q4_K with
// llama-quantize's search takes about an hour on two cores (BenchmarkQuantize: ~9M
// weights/s). Here each quantized tensor's blocks are drawn directly: random quants and
// sub-block scales, the block scale chosen so that the weights' standard deviation is the
// one model.Random draws that tensor with (SynthSpread measures it). Norms and routers
// (F32) are model.Random's values. So the file has the size, layout and dtypes of the real
// model's Q4_K_M and reads like it (every byte is a real weight) — what speed and memory
// measurements need — but unlike `tokenwise synth` checkpoints its greedy tokens are not
// kept apart by wide margins, so it is not for parity tests. Streamed one tensor at a time
// (at most one stacked expert tensor in memory). The same config, dtype and seed give the
// same bytes.
func SynthGGUF(hfConfig, tokJSON, tokCfg []byte, out, dtype string, seed uint64) error {
	mix, ok := parseKMix(dtype)
	if !ok {
		return fmt.Errorf("dtype %q: a GGUF synth writes llama-quantize's k-quant file types %s", dtype, KMixNames)
	}
	hf, err := model.ParseHFConfig(hfConfig)
	if err != nil {
		return err
	}
	cfg, err := hf.Config()
	if err != nil {
		return err
	}
	if cfg.MoE() && !cfg.NormTopKProb {
		return fmt.Errorf("norm_topk_prob false: llama.cpp's %s graph always renormalizes the picked experts' weights", cfg.Arch().GGUF)
	}
	r, err := model.NewRandom(cfg, seed, tensor.F32)
	if err != nil {
		return err
	}
	tokMeta, err := tokenizer.GGUFMetadata(tokJSON, tokCfg, cfg.VocabSize, specialIDs(cfg))
	if err != nil {
		return err
	}

	// The tensors as export names, shapes and types them; src is the HF tensor whose
	// values (F32) or spread (quantized) each takes.
	experts := expertTensors(cfg)
	type synthTensor struct {
		info tensor.Info
		src  string
	}
	var ts []synthTensor
	tied := cfg.TieEmbeddings
	for _, t := range r.Tensors() {
		if e, ok := experts[t.Name]; ok {
			if e[2] == 0 {
				ts = append(ts, synthTensor{tensor.Info{Name: fmt.Sprintf("blk.%d.%s", e[0], stackedNames[e[1]]),
					Shape: []int{cfg.NumExperts, t.Shape[0], t.Shape[1]}}, t.Name})
			}
			continue
		}
		gname, _, skip, err := ggufName(t.Name)
		if err != nil {
			return err
		}
		if !skip {
			ts = append(ts, synthTensor{tensor.Info{Name: gname, Shape: t.Shape}, t.Name})
		}
	}
	for i := range ts {
		t := &ts[i].info
		if len(t.Shape) == 1 {
			t.DType = tensor.F32
		} else if t.DType, err = mix.dtypeFor(t.Name, t.Shape[len(t.Shape)-1], cfg.NumLayers, cfg.NumExperts, tied); err != nil {
			return err
		}
	}
	infos := make([]tensor.Info, len(ts))
	for i := range ts {
		infos[i] = ts[i].info
	}
	if err := checkTensors(infos, cfg); err != nil {
		return err
	}
	if rs := cfg.RopeScaling; rs != nil && rs.Type == "llama3" {
		f := llama3RopeFactors(rs, cfg.RopeTheta, cfg.HeadDim)
		ts = append(ts, synthTensor{tensor.Info{Name: "rope_freqs.weight", DType: tensor.F32, Shape: []int{len(f)}, Data: tensor.Bytes(f)}, ""})
	}
	slices.SortStableFunc(ts, func(a, b synthTensor) int { return ggufOrder(a.info.Name) - ggufOrder(b.info.Name) })
	infos = infos[:0]
	for _, t := range ts {
		infos = append(infos, t.info)
	}

	kvs, err := ggufKVs(archMeta(cfg, hf, "synth-"+mix.name, mix.ftype), tokMeta)
	if err != nil {
		return err
	}
	var buf []byte
	units := map[tensor.DType]float64{} // unitSpread per dtype, measured once
	return gguf.WriteStream(out, kvs, infos, 32, func(i int) ([]byte, error) {
		t := ts[i]
		switch {
		case t.info.Data != nil:
			return t.info.Data, nil
		case t.info.DType == tensor.F32:
			return r.Data(t.src)
		}
		_, std, ok := r.Spread(t.src)
		if !ok {
			return nil, fmt.Errorf("synth: no spread for %s", t.src)
		}
		n := t.info.NumElements()
		size, err := t.info.DType.BytesFor(n)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.info.Name, err)
		}
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		unit, ok := units[t.info.DType]
		if !ok {
			if unit, err = unitSpread(t.info.DType); err != nil {
				return nil, fmt.Errorf("tensor %s: %w", t.info.Name, err)
			}
			units[t.info.DType] = unit
		}
		h := fnv.New64a()
		h.Write([]byte(t.info.Name))
		if err := randomBlocks(t.info.DType, buf, std/unit, rand.New(rand.NewPCG(seed, h.Sum64()))); err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.info.Name, err)
		}
		return buf, nil
	})
}

// randomBlocks fills dst with blocks of dt whose quants and sub-block scales are uniformly
// random bytes and whose block scale is d: every dequantized weight is d times a random
// integer expression, so d = the wanted deviation / that expression's (unitSpread).
func randomBlocks(dt tensor.DType, dst []byte, scale float64, rng *rand.Rand) error {
	bs, err := dt.BytesFor(dt.BlockSize())
	if err != nil {
		return err
	}
	d := tensor.F32ToF16(float32(scale))
	for i := 0; i+8 <= len(dst); i += 8 {
		binary.LittleEndian.PutUint64(dst[i:], rng.Uint64())
	}
	for i := len(dst) &^ 7; i < len(dst); i++ {
		dst[i] = byte(rng.Uint32())
	}
	for b := 0; b < len(dst); b += bs {
		setBlockScale(dt, dst[b:b+bs], d)
	}
	return nil
}

// setBlockScale writes the f16 block scale d into one block (and Q4_K/Q5_K's min scale,
// kept at half the sub-block range times d so that each sub-block's weights center near 0).
func setBlockScale(dt tensor.DType, blk []byte, d uint16) {
	switch dt {
	case tensor.Q4_K, tensor.Q5_K: // d, dmin, then scales and quants
		binary.LittleEndian.PutUint16(blk[0:], d)
		half := 7.5
		if dt == tensor.Q5_K {
			half = 15.5
		}
		binary.LittleEndian.PutUint16(blk[2:], tensor.F32ToF16(tensor.F16ToF32(d)*float32(half)))
	case tensor.Q6_K: // quants and scales, then d
		binary.LittleEndian.PutUint16(blk[len(blk)-2:], d)
	case tensor.Q8_0, tensor.Q4_0: // d, then quants
		binary.LittleEndian.PutUint16(blk[0:], d)
	}
}

// unitSpread is the standard deviation of dt's weights in random blocks with d = 1,
// measured over 4M weights (within about 0.2% of its expectation).
func unitSpread(dt tensor.DType) (float64, error) {
	switch dt {
	case tensor.Q4_K, tensor.Q5_K, tensor.Q6_K, tensor.Q8_0, tensor.Q4_0:
	default:
		return 0, fmt.Errorf("no random blocks for %v", dt)
	}
	n := 1 << 22
	size, _ := dt.BytesFor(n)
	bs, _ := dt.BytesFor(dt.BlockSize())
	raw := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range raw {
		raw[i] = byte(rng.Uint32())
	}
	one := tensor.F32ToF16(1)
	for b := 0; b < size; b += bs {
		setBlockScale(dt, raw[b:b+bs], one)
	}
	f := make([]float32, n)
	if err := tensor.Dequantize(dt, raw, f); err != nil {
		return 0, err
	}
	var sum, sq float64
	for _, v := range f {
		sum += float64(v)
		sq += float64(v) * float64(v)
	}
	mean := sum / float64(n)
	return math.Sqrt(sq/float64(n) - mean*mean), nil
}

// ggufKVs turns metadata entries into GGUF values, the tokenizer's after them and the
// alignment last.
func ggufKVs(meta []kv, tokMeta []gguf.KV) ([]gguf.KV, error) {
	out := make([]gguf.KV, 0, len(meta)+len(tokMeta)+1)
	for _, m := range meta {
		var v gguf.Value
		switch x := m.val.(type) {
		case string:
			v = gguf.String(x)
		case bool:
			v = gguf.Bool(x)
		case uint32:
			v = gguf.Uint32(x)
		case int32:
			v = gguf.Int32(x)
		case float32:
			v = gguf.Float32(x)
		default:
			return nil, fmt.Errorf("gguf metadata %s: unsupported value type %T", m.key, m.val)
		}
		out = append(out, gguf.KV{Key: m.key, Value: v})
	}
	out = append(out, tokMeta...)
	return append(out, gguf.KV{Key: "general.alignment", Value: gguf.Uint32(32)}), nil
}
