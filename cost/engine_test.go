package cost

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

// engineProfile is a calibrated CPU profile with the engine model's measurements, with
// round numbers so that the tests can compute its predictions by hand: every product
// streams at 10 GB/s and computes at 40 GFLOP/s whatever its shape, unless the caller
// changes the tables.
func engineProfile() *Profile {
	var mv []MatVecRate
	var mm []MatMulRate
	for _, c := range []int{576, 2048} {
		for _, set := range []int{32, 512} {
			mv = append(mv, MatVecRate{Cols: c, SetMiB: set, GBs: 10})
		}
		for _, t := range []int{4, 256} {
			mm = append(mm, MatMulRate{Cols: c, Tokens: t, GFLOPS: 40})
		}
	}
	return &Profile{Name: "engine-cpu", Kind: "cpu", MemGB: 16, Clock: "wall", Calibration: []ThreadRates{{
		Threads: 2, ReadGBs: 20, FMAGFLOPS: 100,
		Kernels: map[string]KernelRates{"bf16": {GEMVGBs: 10, GEMMGFLOPS: 40, GEMM: []TokenRate{{4, 40}, {256, 40}},
			MatVec: mv, MatMul: mm, CallUs: 0}},
		Engine: &EngineCosts{AttnF32: []AttnRate{{HeadDim: 64, Ns: 1e-9}}},
	}}}
}

func estimate(t *testing.T, s *Shape, hw *Profile, prompt, output int) *Estimate {
	t.Helper()
	e, err := s.Estimate(hw, Workload{Prompt: prompt, Output: output, Batch: 1, DType: prec(t, "bf16"), KV: prec(t, "f32"), Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// With no fixed costs the engine model of a decode step is the weights' bytes over the
// streaming rate: the products it times one by one must add up to every matrix once.
func TestEngineProductsCoverTheWeights(t *testing.T) {
	s := shape(t, "smollm2-135m")
	hw := engineProfile()
	r, err := hw.Rates(prec(t, "bf16"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if !r.engine() {
		t.Fatalf("rates %+v: want the engine model", r)
	}
	p := s.Params()
	// Every matrix (the norms' scales are not read as a product), the tied head once.
	bytes := float64(p.Attention+p.DenseMLP+p.Embedding) * 2
	step := s.enginePass(r, 1, 1, 32, prec(t, "bf16"), prec(t, "f32"))
	if !near(step.Memory-s.kvReadTime(r, 1, 33), bytes/10e9, 1e-9) {
		t.Errorf("products' byte time %g s, want %g s", step.Memory, bytes/10e9)
	}
	// The only overhead left: attention, bound here by reading the KV cache.
	if kv := s.kvReadTime(r, 1, 33); !near(step.Overhead, kv, 1e-6) {
		t.Errorf("overhead %g s: want only the KV cache reads' %g s", step.Overhead, kv)
	}
	// A MoE model at batch 1: attention, the router, the 8 experts a token uses, the head.
	moe := shape(t, "qwen3-30b-a3b")
	mp := moe.Params()
	mBytes := float64(mp.Attention+mp.Router+mp.ActiveExpert+mp.Shared+int64(moe.Vocab*moe.Hidden)) * 2
	mStep := moe.enginePass(r, 1, 1, 32, prec(t, "bf16"), prec(t, "f32"))
	// (Params.Attention holds the q/k norm scales too: 48·256 of 3.3e9 weights.)
	if !near(mStep.Memory-moe.kvReadTime(r, 1, 33), mBytes/10e9, 1e-5) {
		t.Errorf("MoE products' byte time %g s, want %g s", mStep.Memory-moe.kvReadTime(r, 1, 33), mBytes/10e9)
	}
}

// kvReadTime is the KV-cache term enginePass adds to Memory, for the test's bookkeeping.
func (s *Shape) kvReadTime(r Rates, batch, positions int) float64 {
	return float64(s.Layers) * float64(batch*positions) * 2 * float64(s.KVHeads*s.HeadDim) * 4 / r.OtherBW
}

// Each fixed cost adds exactly its count from the model's shape: a product call 4 times
// per layer plus the head, a hand-over once per layer, per-element costs per token.
func TestEngineOverheadTerms(t *testing.T) {
	s := shape(t, "smollm2-135m")
	base := estimate(t, s, engineProfile(), 32, 1)

	hw := engineProfile()
	k := hw.Calibration[0].Kernels["bf16"]
	k.CallUs = 5
	hw.Calibration[0].Kernels["bf16"] = k
	withCalls := estimate(t, s, hw, 32, 1)
	if d, want := withCalls.Decode.Seconds-base.Decode.Seconds, float64(4*s.Layers+1)*5e-6; !near(d, want, 1e-9) {
		t.Errorf("5 µs per call added %g s to a decode step, want %g (4 calls × %d layers + the head)", d, want, s.Layers)
	}

	// A prefill product's call cost (its activations' conversion) comes from the
	// matrix×matrix table: 4 calls per layer; the head runs one token, at the one-token cost.
	hw = engineProfile()
	k = hw.Calibration[0].Kernels["bf16"]
	k.MatMul = append([]MatMulRate{}, k.MatMul...)
	for i := range k.MatMul {
		k.MatMul[i].CallUs = 10
	}
	hw.Calibration[0].Kernels["bf16"] = k
	withConv := estimate(t, s, hw, 32, 1)
	if d, want := withConv.Prefill.Seconds-base.Prefill.Seconds, float64(4*s.Layers)*10e-6; !near(d, want, 1e-9) {
		t.Errorf("10 µs per prefill call added %g s to the prefill, want %g", d, want)
	}
	if withConv.Decode.Seconds != base.Decode.Seconds {
		t.Errorf("the prefill table's call cost changed a decode step: %g s, was %g", withConv.Decode.Seconds, base.Decode.Seconds)
	}

	hw = engineProfile()
	hw.Calibration[0].Engine.RunUs = 7
	hw.Calibration[0].Engine.NormNs = 1
	withLayer := estimate(t, s, hw, 32, 1)
	// Per layer: one hand-over and two RMSNorms of the hidden state; per pass: the final norm.
	want := float64(s.Layers)*(7e-6+2*float64(s.Hidden)*1e-9) + float64(s.Hidden)*1e-9
	if d := withLayer.Decode.Seconds - base.Decode.Seconds; !near(d, want, 1e-9) {
		t.Errorf("per-layer costs added %g s to a decode step, want %g", d, want)
	}
	if withLayer.Decode.OverheadS <= base.Decode.OverheadS {
		t.Errorf("overhead %g s, without the per-layer costs %g s: want more", withLayer.Decode.OverheadS, base.Decode.OverheadS)
	}
	// Prefill pays the norms for every prompt token, the hand-over once per layer.
	wantPf := float64(s.Layers)*(7e-6+2*32*float64(s.Hidden)*1e-9) + float64(s.Hidden)*1e-9
	if d := withLayer.Prefill.Seconds - base.Prefill.Seconds; !near(d, wantPf, 1e-9) {
		t.Errorf("per-layer costs added %g s to the prefill, want %g", d, wantPf)
	}

	// A model with twice the layers pays twice the per-layer overhead.
	deep := *s
	deep.Layers *= 2
	deepEst := estimate(t, &deep, hw, 32, 1)
	if d, want := deepEst.Decode.OverheadS-withLayer.Decode.OverheadS, float64(s.Layers)*(7e-6+2*float64(s.Hidden)*1e-9); d < want*(1-1e-6) {
		t.Errorf("%d more layers added %g s of overhead, want at least %g", s.Layers, d, want)
	}
}

// Attention is timed per query head and attended position: a step at a longer context
// costs that many more positions.
func TestEngineAttentionGrowsWithContext(t *testing.T) {
	s := shape(t, "smollm2-135m")
	hw := engineProfile()
	hw.Calibration[0].Engine.AttnF32 = []AttnRate{{HeadDim: 64, Ns: 40, HeadNs: 100}}
	r, err := hw.Rates(prec(t, "bf16"), 2)
	if err != nil {
		t.Fatal(err)
	}
	bf16, f32 := prec(t, "bf16"), prec(t, "f32")
	short := s.enginePass(r, 1, 1, 32, bf16, f32)
	long := s.enginePass(r, 1, 1, 512, bf16, f32)
	// 9 heads over 2 threads: the busier worker has 5, so a step takes 10/9 of the average.
	want := float64(s.Layers) * float64(s.Heads) * 480 * 40e-9 * 10 / 9
	if d := long.Seconds - short.Seconds; !near(d, want, 1e-6) {
		t.Errorf("480 more positions added %g s, want %g", d, want)
	}
	// The head dimension scales the per-position cost (a dot product and a sum of hd).
	if pp, ph := hw.Calibration[0].Engine.attn(128, f32); pp != 80 || ph != 200 {
		t.Errorf("attention at head_dim 128 from a 64 measurement: %g ns/position, %g ns/head; want 80 and 200", pp, ph)
	}
}

// The shape tables are interpolated in log scale between measured points and clamped
// beyond them.
func TestEngineInterpolation(t *testing.T) {
	r := Rates{MatVec: []MatVecRate{{576, 32, 20}, {2048, 32, 30}, {576, 512, 10}, {2048, 512, 16}}}
	for _, c := range []struct {
		cols int
		mib  float64
		gbs  float64
	}{
		{576, 32, 20}, {2048, 512, 16}, {100, 1, 20}, {9000, 4096, 16},
		{1086, 32, 25},  // √(576·2048): half way in log(cols)
		{576, 128, 15},  // √(32·512) MiB: half way in log(set)
		{1086, 128, 19}, // both: (25 + 13)/2
	} {
		if got := r.matVecBW(c.cols, c.mib*(1<<20)) / 1e9; !near(got, c.gbs, 0.002) {
			t.Errorf("matvec at %d cols over %g MiB: %g GB/s, want %g", c.cols, c.mib, got, c.gbs)
		}
	}
	// With a 160 MiB last-level cache, 80 MiB and more stream at the memory rate (the
	// 512 MiB row); below, the table is interpolated up to the memory rate at 80 MiB.
	c := r
	c.MatVec = append(slices.Clone(r.MatVec), MatVecRate{576, 128, 40}, MatVecRate{576, 8, 30})
	c.LLCBytes = 160 << 20
	for _, k := range []struct{ mib, gbs float64 }{
		{8, 30}, {32, 20}, {80, 10}, {128, 10}, {300, 10}, {4096, 10},
		{32 * math.Sqrt(80.0/32), 15}, // half way in log from 32 MiB to the cut
	} {
		if got := c.matVecBW(576, k.mib*(1<<20)) / 1e9; !near(got, k.gbs, 0.002) {
			t.Errorf("160 MiB cache: matvec at 576 cols over %g MiB: %g GB/s, want %g", k.mib, got, k.gbs)
		}
	}
	// Without the cache size the 128 MiB measurement counts.
	c.LLCBytes = 0
	if got := c.matVecBW(576, 128<<20) / 1e9; !near(got, 40, 0.002) {
		t.Errorf("unknown cache: matvec at 576 cols over 128 MiB: %g GB/s, want the measured 40", got)
	}
	r.MatMul = []MatMulRate{{Cols: 1024, Tokens: 4, GFLOPS: 10}, {Cols: 1024, Tokens: 64, GFLOPS: 50}}
	if got := r.matMulFLOPS(16, 1024) / 1e9; !near(got, 30, 1e-9) {
		t.Errorf("matmul at 16 tokens: %g GFLOP/s, want 30 (half way in log tokens)", got)
	}
}

// A profile with the engine measurements survives JSON; a profile without them (older
// calibrations, GPUs) loads and predicts by the roofline as before.
func TestEngineProfileRoundTrip(t *testing.T) {
	hw := engineProfile()
	hw.Calibration[0].Engine = &EngineCosts{RunUs: 0.4, NormNs: 1.3, AddNs: 0.5, SiLUNs: 0.7, RopeNs: 2, AnglesNs: 15,
		AttnF32: []AttnRate{{64, 40, 100}, {128, 60, 150}}, AttnF16: []AttnRate{{64, 80, 300}},
		AttnTiled: []TileRate{{64, 5000, 2000}, {128, 9000, 3000}}}
	data, err := json.Marshal(hw)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(file, data, 0o644); err != nil {
		t.Fatal(err)
	}
	back, err := LoadProfile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, hw) {
		t.Errorf("round trip:\n%+v\nwant\n%+v", back.Calibration[0], hw.Calibration[0])
	}
	// The same profile without the engine fields: the plain roofline.
	old := engineProfile()
	k := old.Calibration[0].Kernels["bf16"]
	k.MatVec, k.MatMul = nil, nil
	old.Calibration[0].Kernels["bf16"] = k
	old.Calibration[0].Engine = nil
	r, err := old.Rates(prec(t, "bf16"), 2)
	if err != nil {
		t.Fatal(err)
	}
	if r.engine() {
		t.Fatal("a profile without engine costs uses the engine model")
	}
	s := shape(t, "smollm2-135m")
	e := estimate(t, s, old, 32, 1)
	step := s.DecodeStep(32, 1, prec(t, "bf16"), prec(t, "f32"), prec(t, "f32"))
	if want, _, _ := r.forBatch(1).Time(step); e.Decode.Seconds != want || e.Decode.OverheadS != 0 {
		t.Errorf("decode %g s (overhead %g), want the roofline's %g", e.Decode.Seconds, e.Decode.OverheadS, want)
	}
	// Bad measurements are refused, not divided by.
	bad := engineProfile()
	bad.Calibration[0].Engine.AttnF32[0].Ns = 0
	if err := bad.Validate(); err == nil {
		t.Error("zero attention cost: no error")
	}
	bad = engineProfile()
	k = bad.Calibration[0].Kernels["bf16"]
	k.MatVec = append([]MatVecRate{}, k.MatVec...)
	k.MatVec[1].GBs = -1
	bad.Calibration[0].Kernels["bf16"] = k
	if err := bad.Validate(); err == nil {
		t.Error("negative streaming rate: no error")
	}
}

// Calibrate measures the engine's costs through the kernels: everything present, the
// fixed costs positive (a per-element cost of zero would be a broken timer, not a fast
// machine). Sizes are the smallest Calibrate accepts, so this takes a few seconds.
func TestCalibrateMeasuresEngineCosts(t *testing.T) {
	p, err := Calibrate(CalibrateOptions{Threads: []int{min(2, runtime.NumCPU())}, ReadMiB: 8, DTypes: []string{"q8_0"}, Repeats: 1})
	if err != nil {
		t.Fatal(err)
	}
	c := p.Calibration[0]
	e := c.Engine
	if e == nil {
		t.Fatal("no engine costs")
	}
	if e.NormNs <= 0 || e.AddNs <= 0 || e.SiLUNs <= 0 || e.RopeNs <= 0 || e.AnglesNs <= 0 || e.RunUs < 0 {
		t.Errorf("engine costs %+v: want positive per-element costs", *e)
	}
	if len(e.AttnF32) != 2 || len(e.AttnF16) != 2 || e.AttnF32[0].Ns <= 0 || e.AttnF32[1].HeadDim != 128 {
		t.Errorf("attention %+v / %+v: want positive costs at head_dim 64 and 128", e.AttnF32, e.AttnF16)
	}
	if len(e.AttnTiled) != 2 || e.AttnTiled[0].TileNs <= 0 || e.AttnTiled[1].HeadDim != 128 || e.AttnTiled[1].HeadNs < 0 {
		t.Errorf("tiled attention %+v: want positive costs per tile at head_dim 64 and 128", e.AttnTiled)
	}
	k := c.Kernels["q8_0"]
	// 8 MiB of weights: the only set is those 8 MiB, at each width.
	if len(k.MatVec) != len(matVecCols) || len(k.MatMul) != len(matVecCols)*len(matMulTokens) || k.CallUs <= 0 {
		t.Fatalf("kernel tables: %d matvec, %d matmul, call %g µs", len(k.MatVec), len(k.MatMul), k.CallUs)
	}
	for _, m := range k.MatVec {
		if m.GBs <= 0 || m.SetMiB != 8 {
			t.Errorf("matvec %+v", m)
		}
	}
	if len(k.GEMM) != len(matMulTokens) || k.GEMMGFLOPS <= 0 {
		t.Errorf("GEMM by tokens %v (best %g): want the 2048-wide rows of the shape table", k.GEMM, k.GEMMGFLOPS)
	}
	// And cost uses them.
	e2 := estimate2(t, shape(t, "qwen3-0.6b"), p, "q8_0", c.Threads)
	if e2.Decode.OverheadS <= 0 || e2.Prefill.OverheadS <= 0 {
		t.Errorf("overheads: prefill %g s, decode %g s: want the measured costs", e2.Prefill.OverheadS, e2.Decode.OverheadS)
	}
	if _, err := Calibrate(CalibrateOptions{Threads: []int{1}, ReadMiB: 4, DTypes: []string{"q8_0"}, Repeats: 1}); err == nil {
		t.Error("4 MiB: no error")
	}
}

func estimate2(t *testing.T, s *Shape, hw *Profile, dtype string, threads int) *Estimate {
	t.Helper()
	e, err := s.Estimate(hw, Workload{Prompt: 32, Output: 2, Batch: 1, DType: prec(t, dtype), KV: prec(t, "f32"), Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A sequence's pass of 64+ tokens with an f16 cache is costed as the tiled attention it
// runs: per query head, every (query tile, cache tile) pair under the causal mask at
// TileNs plus TileRate.HeadNs per query tile; shorter passes and f32 caches keep the
// per-position costs.
func TestEngineTiledAttention(t *testing.T) {
	hw := engineProfile()
	hw.Calibration[0].Engine.AttnTiled = []TileRate{{64, 5000, 2000}}
	r, err := hw.Rates(prec(t, "bf16"), 2)
	if err != nil {
		t.Fatal(err)
	}
	s := shape(t, "smollm2-135m") // head_dim 64, 9 query heads
	f16, f32 := prec(t, "f16"), prec(t, "f32")
	without := *r.Engine
	without.AttnTiled = nil
	r0 := r
	r0.Engine = &without
	for _, c := range []struct {
		n, ctx, pairs, qTiles int
		tiled                 bool
	}{
		{128, 0, 1 + 2, 2, true},  // tiles 0-63 and 64-127
		{100, 30, 2 + 3, 2, true}, // positions 30-93 (cache tiles 0-1), 94-129 (0-2)
		{63, 0, 0, 0, false},      // one short of a tile: per position
		{1, 500, 0, 0, false},     // decode
	} {
		for _, kv := range []Precision{f16, f32} {
			got := s.enginePass(r, c.n, 1, c.ctx, prec(t, "bf16"), kv)
			base := s.enginePass(r0, c.n, 1, c.ctx, prec(t, "bf16"), kv)
			if !c.tiled || kv.Name != "f16" {
				if got.Seconds != base.Seconds {
					t.Errorf("n %d ctx %d kv %s: %g s, want the per-position %g s", c.n, c.ctx, kv.Name, got.Seconds, base.Seconds)
				}
				continue
			}
			// Both differ only in attention; rebuild each side's attention from its terms.
			units := c.qTiles * s.Heads
			bal := float64((units+1)/2*2) / float64(units)
			want := bal * 1e-9 * float64(s.Heads) * (float64(c.pairs)*5000 + float64(c.qTiles)*2000)
			e := r.Engine
			perPos, perHead := e.attn(s.HeadDim, kv)
			items := c.n * s.Heads
			positions := float64(c.n)*float64(c.ctx) + float64(c.n)*float64(c.n+1)/2
			ib := float64((items+1)/2*2) / float64(items)
			old := ib * 1e-9 * (float64(items)*perHead + positions*float64(s.Heads)*perPos)
			kvRead := float64(c.ctx+c.n) * 2 * float64(s.KVHeads*s.HeadDim) * kv.Bytes / r.OtherBW
			d := float64(s.Layers) * (max(want, kvRead) - max(old, kvRead))
			if !near(got.Seconds-base.Seconds, d, 1e-6) {
				t.Errorf("n %d ctx %d: tiled pass %g s, per-position %g s: difference %g, want %g", c.n, c.ctx, got.Seconds, base.Seconds, got.Seconds-base.Seconds, d)
			}
		}
	}
}

// The last-level cache is the highest-level data or unified cache in sysfs's layout;
// instruction caches and unreadable entries are skipped.
func TestLastLevelCache(t *testing.T) {
	dir := t.TempDir()
	for i, c := range []struct{ level, typ, size string }{
		{"1", "Data", "48K"}, {"1", "Instruction", "32K"}, {"2", "Unified", "2048K"},
		{"3", "Unified", "266240K"}, {"3", "Instruction", "999M"}, {"4", "Unified", "bogus"},
	} {
		d := filepath.Join(dir, "index"+string(rune('0'+i)))
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for f, v := range map[string]string{"level": c.level, "type": c.typ, "size": c.size} {
			if err := os.WriteFile(filepath.Join(d, f), []byte(v+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if got := lastLevelCacheMiB(dir); got != 260 {
		t.Errorf("last-level cache %d MiB, want 260", got)
	}
	if got := lastLevelCacheMiB(filepath.Join(dir, "missing")); got != 0 {
		t.Errorf("no sysfs: %d MiB, want 0", got)
	}
}
