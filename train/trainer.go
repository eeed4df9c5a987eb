package train

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"time"

	"github.com/tokenwise/tokenwise/kernels"
)

// Sequence is one training text as token ids. Mask, when set, marks the tokens that are
// targets (a completion's tokens); nil trains on every next token.
type Sequence struct {
	IDs  []int
	Mask []bool
}

// Targets is the number of positions of s that carry a loss.
func (s Sequence) Targets() int {
	if s.Mask == nil {
		return max(len(s.IDs)-1, 0)
	}
	n := 0
	for i := 1; i < len(s.IDs) && i < len(s.Mask); i++ {
		if s.Mask[i] {
			n++
		}
	}
	return n
}

// Options configure a training run. Zero values take the defaults in parentheses.
type Options struct {
	Steps       int     // optimizer steps
	Batch       int     // sequences per micro-batch (4)
	Accum       int     // micro-batches whose gradients add up to one step (1)
	LR          float64 // peak learning rate (1e-3)
	MinLR       float64 // the cosine's floor (LR/10)
	Warmup      int     // linear warmup steps (Steps/20)
	WeightDecay float64 // AdamW's decoupled decay on matrices (0.1; negative: none)
	Beta1       float64 // (0.9)
	Beta2       float64 // (0.95)
	Eps         float64 // (1e-8)
	Clip        float64 // global gradient norm limit (1; negative: no clipping)
	Threads     int     // worker threads every product of a sequence is split across (all CPUs)
	Seed        uint64  // data order
	// Trainable says which tensors (by Hugging Face name) the optimizer updates; nil: all.
	Trainable func(name string) bool
	Log       io.Writer // progress lines (loss, lr, tokens/s); nil: none
	LogEvery  int       // steps between progress lines (10)
	// StopAt, when in (0, Steps), ends the run after that many steps with the schedule still
	// spanning Steps: a reproducible prefix of the full run.
	StopAt int
	// Checkpoint, when set, is called every CheckpointEvery steps and after the last.
	Checkpoint      func(step int) error
	CheckpointEvery int
	// State, when set, is the file Run keeps the trainer state in (state.go): the trainable
	// float32 weights, the AdamW moments and the step, written (atomically) at every
	// checkpoint step, whether or not Checkpoint is set.
	State string
	// Resume makes Run continue from State: the weights, moments and step it holds, and the
	// data order replayed to that step, so that the run ends as a run never stopped would
	// (the same bits, given the same data, options and starting net). Without a State file
	// Run starts from step 0 (and says so in Log).
	Resume bool
}

func (o *Options) defaults() error {
	if o.Steps <= 0 {
		return fmt.Errorf("steps = %d: must be positive", o.Steps)
	}
	def := func(v *float64, d float64) {
		if *v == 0 {
			*v = d
		}
	}
	if o.Batch <= 0 {
		o.Batch = 4
	}
	if o.Accum <= 0 {
		o.Accum = 1
	}
	def(&o.LR, 1e-3)
	def(&o.MinLR, o.LR/10)
	if o.Warmup <= 0 {
		o.Warmup = max(o.Steps/20, 1)
	}
	def(&o.WeightDecay, 0.1)
	def(&o.Beta1, 0.9)
	def(&o.Beta2, 0.95)
	def(&o.Eps, 1e-8)
	def(&o.Clip, 1)
	if o.Threads <= 0 {
		o.Threads = runtime.NumCPU()
	}
	if o.LogEvery <= 0 {
		o.LogEvery = 10
	}
	return nil
}

// Schedule is the learning rate at step (0-based): linear warmup to LR over Warmup steps,
// then a cosine down to MinLR at the last step.
func (o *Options) Schedule(step int) float64 {
	if step < o.Warmup {
		return o.LR * float64(step+1) / float64(o.Warmup)
	}
	span := o.Steps - o.Warmup
	if span <= 1 {
		return o.LR
	}
	p := float64(step-o.Warmup) / float64(span-1)
	return o.MinLR + 0.5*(o.LR-o.MinLR)*(1+math.Cos(math.Pi*min(p, 1)))
}

// Trainer holds a net's optimizer state and the pass's buffers.
type Trainer struct {
	Net  *Net
	Opt  Options
	step int

	m, v      []float32        // AdamW moments
	grad      []float32        // the step's reduced gradient
	frozen    []bool           // per spec
	gw        weights[float32] // grad cut into the trainable tensors; frozen ones nil
	pool      *kernels.Pool
	pass      *fastPass
	chunks    []optChunk
	partial   []float64
	totalToks int64
	start     time.Time
}

// optChunk is a piece of one trainable tensor that the optimizer's loops hand to a worker:
// fixed pieces, so that the gradient norm is summed in the same order on any thread count.
type optChunk struct {
	off, end int
	decay    bool
}

const optChunkLen = 1 << 16

// NewTrainer prepares to train net with opt.
func NewTrainer(net *Net, opt Options) (*Trainer, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	tr := &Trainer{Net: net, Opt: opt, m: make([]float32, len(net.W)), v: make([]float32, len(net.W)), grad: make([]float32, len(net.W))}
	tr.frozen = make([]bool, len(net.Specs))
	var live []Spec
	for i, s := range net.Specs {
		tr.frozen[i] = opt.Trainable != nil && !opt.Trainable(s.Name)
		if tr.frozen[i] {
			continue
		}
		live = append(live, s)
		for off := s.Off; off < s.Off+s.N; off += optChunkLen {
			tr.chunks = append(tr.chunks, optChunk{off: off, end: min(off+optChunkLen, s.Off+s.N), decay: s.Decay})
		}
	}
	if len(live) == 0 {
		return nil, errors.New("no tensor is trainable")
	}
	tr.partial = make([]float64, len(tr.chunks))
	tr.gw = bind(net.Cfg, live, tr.grad)
	tr.pool = kernels.NewPool(opt.Threads)
	tr.pass = newFastPass(net, tr.pool)
	// The pool's workers park when idle; close them once the trainer is unreachable.
	runtime.AddCleanup(tr, func(p *kernels.Pool) { p.Close() }, tr.pool)
	return tr, nil
}

func (n *Net) core() *core[float32] {
	return &core[float32]{cfg: n.Cfg, w: bind(n.Cfg, n.Specs, n.W), freqs: n.freqs}
}

// StepStats reports one optimizer step.
type StepStats struct {
	Step     int     // 1-based
	Loss     float64 // mean cross-entropy per target token
	Targets  int
	Tokens   int // tokens through the forward pass
	LR       float64
	GradNorm float64 // before clipping
}

// gradient computes the mean-loss gradient of seqs into tr's gradient buffer and returns
// the mean loss, the number of targets and of tokens. The sequences go through one at a
// time, each one's products split across the workers, so the sum does not depend on the
// thread count or on how the step is cut into micro-batches (Accum). Exported through Step;
// tests call it to compare with the reference pass.
func (tr *Trainer) gradient(seqs []Sequence) (float64, int, int, error) {
	for _, c := range tr.chunks {
		clear(tr.grad[c.off:c.end])
	}
	var loss float64
	n, toks := 0, 0
	for i, s := range seqs {
		l, k, err := tr.pass.lossGrad(s.IDs, s.Mask, &tr.gw)
		if err != nil {
			return 0, 0, 0, fmt.Errorf("sequence %d: %w", i, err)
		}
		loss += l
		n += k
		toks += len(s.IDs)
	}
	if n == 0 {
		return 0, 0, toks, errors.New("batch has no target tokens")
	}
	inv := float32(1 / float64(n))
	tr.pool.Run(len(tr.chunks), 1, func(_, lo, hi int) {
		for _, c := range tr.chunks[lo:hi] {
			g := tr.grad[c.off:c.end]
			for i := range g {
				g[i] *= inv
			}
		}
	})
	return loss / float64(n), n, toks, nil
}

// gradNorm is the gradient's Euclidean norm, summed chunk by chunk in a fixed order.
func (tr *Trainer) gradNorm() float64 {
	tr.pool.Run(len(tr.chunks), 1, func(_, lo, hi int) {
		for ci := lo; ci < hi; ci++ {
			c := tr.chunks[ci]
			var ss float64
			for _, g := range tr.grad[c.off:c.end] {
				ss += float64(g) * float64(g)
			}
			tr.partial[ci] = ss
		}
	})
	var ss float64
	for _, p := range tr.partial {
		ss += p
	}
	return math.Sqrt(ss)
}

// Step runs one optimizer step on seqs (Opt.Batch·Opt.Accum sequences, or any number).
func (tr *Trainer) Step(seqs []Sequence) (StepStats, error) {
	if tr.start.IsZero() {
		tr.start = time.Now()
	}
	loss, n, toks, err := tr.gradient(seqs)
	if err != nil {
		return StepStats{}, fmt.Errorf("step %d: %w", tr.step+1, err)
	}
	norm := tr.gradNorm()
	if !isFinite(norm) || !isFinite(loss) {
		return StepStats{}, fmt.Errorf("step %d: loss %g, gradient norm %g: training diverged", tr.step+1, loss, norm)
	}
	lr := tr.apply(norm)
	tr.totalToks += int64(toks)
	return StepStats{Step: tr.step, Loss: loss, Targets: n, Tokens: toks, LR: lr, GradNorm: norm}, nil
}

// apply is the AdamW update of the trainable tensors from the gradient (of norm norm, clipped
// to Opt.Clip); it advances the step and returns the step's learning rate.
func (tr *Trainer) apply(norm float64) float64 {
	clip := float32(1)
	if tr.Opt.Clip > 0 && norm > tr.Opt.Clip {
		clip = float32(tr.Opt.Clip / norm)
	}
	lr := tr.Opt.Schedule(tr.step)
	tr.step++
	o := &tr.Opt
	b1, b2 := float32(o.Beta1), float32(o.Beta2)
	c1 := float32(1 / (1 - math.Pow(o.Beta1, float64(tr.step))))
	c2 := float32(1 / (1 - math.Pow(o.Beta2, float64(tr.step))))
	eps, flr := float32(o.Eps), float32(lr)
	tr.pool.Run(len(tr.chunks), 1, func(_, lo, hi int) {
		for _, c := range tr.chunks[lo:hi] {
			decay := float32(0)
			if c.decay && o.WeightDecay > 0 {
				decay = float32(lr * o.WeightDecay)
			}
			w, g := tr.Net.W[c.off:c.end], tr.grad[c.off:c.end]
			m, v := tr.m[c.off:c.end], tr.v[c.off:c.end]
			g, m, v = g[:len(w)], m[:len(w)], v[:len(w)]
			for j := range w {
				gj := g[j] * clip
				m[j] = b1*m[j] + (1-b1)*gj
				v[j] = b2*v[j] + (1-b2)*gj*gj
				mh, vh := m[j]*c1, v[j]*c2
				w[j] -= flr*mh/(float32(math.Sqrt(float64(vh)))+eps) + decay*w[j]
			}
		}
	})
	return lr
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Loss is the mean cross-entropy per target token of seqs under the current weights, the
// sequences one after another with each one's products split over threads workers.
func (n *Net) Loss(seqs []Sequence, threads int) (float64, error) {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	pool := kernels.NewPool(threads)
	defer pool.Close()
	pass := newFastPass(n, pool)
	var total float64
	count := 0
	for i, s := range seqs {
		l, k, err := pass.lossGrad(s.IDs, s.Mask, nil)
		if err != nil {
			return 0, fmt.Errorf("sequence %d: %w", i, err)
		}
		total += l
		count += k
	}
	if count == 0 {
		return 0, errors.New("no target tokens")
	}
	return total / float64(count), nil
}

// Logits runs ids through the net and returns the logits at every position.
func (n *Net) Logits(ids []int) ([][]float32, error) {
	pool := kernels.NewPool(runtime.NumCPU())
	defer pool.Close()
	pass := newFastPass(n, pool)
	if err := pass.forward(ids); err != nil {
		return nil, err
	}
	V := n.Cfg.VocabSize
	out := make([][]float32, len(ids))
	pos := make([]int, 0, headChunk)
	for t0 := 0; t0 < len(ids); t0 += headChunk {
		pos = pos[:0]
		for t := t0; t < min(len(ids), t0+headChunk); t++ {
			pos = append(pos, t)
		}
		pass.logitsAt(pos)
		for i, t := range pos {
			out[t] = append([]float32(nil), pass.lg[i*V:(i+1)*V]...)
		}
	}
	return out, nil
}

// Run trains net on data for opt.Steps steps: each step draws Batch·Accum sequences in a
// seeded shuffled order (reshuffled every epoch). It returns the per-step statistics.
func Run(net *Net, data []Sequence, opt Options) ([]StepStats, error) {
	if len(data) == 0 {
		return nil, errors.New("no training sequences")
	}
	tr, err := NewTrainer(net, opt)
	if err != nil {
		return nil, err
	}
	o := &tr.Opt
	if o.Resume && o.State == "" {
		return nil, errors.New("resume: no trainer state file given")
	}
	first := 0
	if o.Resume {
		switch first, err = tr.loadState(o.State, len(data)); {
		case errors.Is(err, errNoState):
			first = 0
			if o.Log != nil {
				fmt.Fprintf(o.Log, "no trainer state at %s: starting at step 0\n", o.State)
			}
		case err != nil:
			return nil, err
		case o.Log != nil:
			fmt.Fprintf(o.Log, "resuming at step %d/%d from %s\n", first, o.Steps, o.State)
		}
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0xda7a))
	order := rng.Perm(len(data))
	pos := 0
	per := o.Batch * o.Accum
	// The data order of the steps already done, replayed: the sequences step first draws
	// are those an unbroken run draws there.
	for range first * per {
		if pos == len(order) {
			order, pos = rng.Perm(len(data)), 0
		}
		pos++
	}
	var stats []StepStats
	var winLoss float64
	var winToks, winSteps int
	winStart := time.Now()
	last := o.Steps
	if o.StopAt > 0 && o.StopAt < o.Steps {
		last = o.StopAt
	}
	for s := first; s < last; s++ {
		batch := make([]Sequence, 0, per)
		for len(batch) < per {
			if pos == len(order) {
				order, pos = rng.Perm(len(data)), 0
			}
			batch = append(batch, data[order[pos]])
			pos++
		}
		st, err := tr.Step(batch)
		if err != nil {
			return stats, err
		}
		stats = append(stats, st)
		winLoss += st.Loss
		winToks += st.Tokens
		winSteps++
		if o.Log != nil && (st.Step%o.LogEvery == 0 || st.Step == last || st.Step == 1) {
			el := time.Since(winStart).Seconds()
			fmt.Fprintf(o.Log, "step %d/%d  loss %.4f  lr %.2e  grad-norm %.3f  %.0f tokens/s  (%s)\n",
				st.Step, o.Steps, winLoss/float64(winSteps), st.LR, st.GradNorm, float64(winToks)/max(el, 1e-9), time.Since(tr.start).Round(time.Second))
			winLoss, winToks, winSteps, winStart = 0, 0, 0, time.Now()
		}
		if (o.CheckpointEvery > 0 && st.Step%o.CheckpointEvery == 0) || st.Step == last {
			if o.Checkpoint != nil {
				if err := o.Checkpoint(st.Step); err != nil {
					return stats, fmt.Errorf("checkpoint at step %d: %w", st.Step, err)
				}
			}
			if o.State != "" {
				if err := tr.saveState(o.State, st.Step, len(data)); err != nil {
					return stats, fmt.Errorf("checkpoint at step %d: %w", st.Step, err)
				}
			}
		}
	}
	return stats, nil
}
