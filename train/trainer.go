package train

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
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
	Threads     int     // worker goroutines over a micro-batch's sequences (all CPUs)
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

// Trainer holds a net's optimizer state and the workers' buffers.
type Trainer struct {
	Net  *Net
	Opt  Options
	step int

	m, v      []float32 // AdamW moments
	grad      []float32 // the step's reduced gradient
	frozen    []bool    // per spec
	workers   []worker
	totalToks int64
	start     time.Time
}

type worker struct {
	g    []float32
	gw   weights[float32]
	acts acts[float32]
	loss float64
	n    int
	toks int
	err  error
}

// NewTrainer prepares to train net with opt.
func NewTrainer(net *Net, opt Options) (*Trainer, error) {
	if err := opt.defaults(); err != nil {
		return nil, err
	}
	tr := &Trainer{Net: net, Opt: opt, m: make([]float32, len(net.W)), v: make([]float32, len(net.W)), grad: make([]float32, len(net.W))}
	tr.frozen = make([]bool, len(net.Specs))
	any := false
	for i, s := range net.Specs {
		tr.frozen[i] = opt.Trainable != nil && !opt.Trainable(s.Name)
		any = any || !tr.frozen[i]
	}
	if !any {
		return nil, errors.New("no tensor is trainable")
	}
	tr.workers = make([]worker, opt.Threads)
	for i := range tr.workers {
		tr.workers[i].g = make([]float32, len(net.W))
		tr.workers[i].gw = bind(net.Cfg, net.Specs, tr.workers[i].g)
	}
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

// Gradient computes the mean-loss gradient of seqs into tr's gradient buffer (summing
// Accum micro-batches, each spread over the workers) and returns the mean loss and the
// number of targets. Exported through Step; tests call it to compare with finite differences.
func (tr *Trainer) gradient(seqs []Sequence) (float64, int, int, error) {
	c := tr.Net.core()
	for i := range tr.workers {
		clear(tr.workers[i].g)
		tr.workers[i].loss, tr.workers[i].n, tr.workers[i].toks, tr.workers[i].err = 0, 0, 0, nil
	}
	per := (len(seqs) + tr.Opt.Accum - 1) / tr.Opt.Accum
	for lo := 0; lo < len(seqs); lo += per {
		micro := seqs[lo:min(lo+per, len(seqs))]
		// Worker w takes sequences w, w+W, ...: a fixed assignment, so the sums (and the
		// trained weights) are the same on every run with the same thread count.
		var wg sync.WaitGroup
		nw := min(len(tr.workers), len(micro))
		for w := range nw {
			wg.Add(1)
			go func(wk *worker) {
				defer wg.Done()
				for i := w; i < len(micro); i += nw {
					if wk.err != nil {
						return
					}
					l, n, err := c.lossGrad(micro[i].IDs, micro[i].Mask, &wk.gw, &wk.acts)
					if err != nil {
						wk.err = fmt.Errorf("sequence %d: %w", lo+i, err)
						return
					}
					wk.loss += l
					wk.n += n
					wk.toks += len(micro[i].IDs)
				}
			}(&tr.workers[w])
		}
		wg.Wait()
	}
	var loss float64
	n, toks := 0, 0
	for i := range tr.workers {
		if err := tr.workers[i].err; err != nil {
			return 0, 0, 0, err
		}
		loss += tr.workers[i].loss
		n += tr.workers[i].n
		toks += tr.workers[i].toks
	}
	copy(tr.grad, tr.workers[0].g)
	for i := 1; i < len(tr.workers); i++ {
		axpy(tr.grad, 1, tr.workers[i].g)
	}
	if n == 0 {
		return 0, 0, toks, errors.New("batch has no target tokens")
	}
	inv := float32(1 / float64(n))
	for i := range tr.grad {
		tr.grad[i] *= inv
	}
	for i, s := range tr.Net.Specs {
		if tr.frozen[i] {
			clear(tr.grad[s.Off : s.Off+s.N])
		}
	}
	return loss / float64(n), n, toks, nil
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
	var ss float64
	for _, g := range tr.grad {
		ss += float64(g) * float64(g)
	}
	norm := math.Sqrt(ss)
	if !isFinite(norm) || !isFinite(loss) {
		return StepStats{}, fmt.Errorf("step %d: loss %g, gradient norm %g: training diverged", tr.step+1, loss, norm)
	}
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
	for i, s := range tr.Net.Specs {
		if tr.frozen[i] {
			continue
		}
		decay := float32(0)
		if s.Decay && o.WeightDecay > 0 {
			decay = float32(lr * o.WeightDecay)
		}
		w, g := tr.Net.W[s.Off:s.Off+s.N], tr.grad[s.Off:s.Off+s.N]
		m, v := tr.m[s.Off:s.Off+s.N], tr.v[s.Off:s.Off+s.N]
		for j := range w {
			gj := g[j] * clip
			m[j] = b1*m[j] + (1-b1)*gj
			v[j] = b2*v[j] + (1-b2)*gj*gj
			mh, vh := m[j]*c1, v[j]*c2
			w[j] -= flr*mh/(float32(math.Sqrt(float64(vh)))+eps) + decay*w[j]
		}
	}
	tr.totalToks += int64(toks)
	return StepStats{Step: tr.step, Loss: loss, Targets: n, Tokens: toks, LR: lr, GradNorm: norm}, nil
}

func isFinite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// Loss is the mean cross-entropy per target token of seqs under the current weights.
func (n *Net) Loss(seqs []Sequence, threads int) (float64, error) {
	if threads <= 0 {
		threads = runtime.NumCPU()
	}
	c := n.core()
	var mu sync.Mutex
	var total float64
	count := 0
	var firstErr error
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(threads, len(seqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a acts[float32]
			for {
				i := int(next.Add(1)) - 1
				if i >= len(seqs) {
					return
				}
				l, k, err := c.lossGrad(seqs[i].IDs, seqs[i].Mask, nil, &a)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = fmt.Errorf("sequence %d: %w", i, err)
				}
				total += l
				count += k
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if count == 0 {
		return 0, errors.New("no target tokens")
	}
	return total / float64(count), nil
}

// Logits runs ids through the net and returns the logits at every position.
func (n *Net) Logits(ids []int) ([][]float32, error) {
	c := n.core()
	var a acts[float32]
	if err := c.forward(ids, &a); err != nil {
		return nil, err
	}
	out := make([][]float32, len(ids))
	for t := range ids {
		out[t] = make([]float32, n.Cfg.VocabSize)
		c.logits(&a, t, out[t])
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
	rng := rand.New(rand.NewPCG(o.Seed, 0xda7a))
	order := rng.Perm(len(data))
	pos := 0
	per := o.Batch * o.Accum
	var stats []StepStats
	var winLoss float64
	var winToks, winSteps int
	winStart := time.Now()
	last := o.Steps
	if o.StopAt > 0 && o.StopAt < o.Steps {
		last = o.StopAt
	}
	for s := 0; s < last; s++ {
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
		if o.Checkpoint != nil && ((o.CheckpointEvery > 0 && st.Step%o.CheckpointEvery == 0) || st.Step == last) {
			if err := o.Checkpoint(st.Step); err != nil {
				return stats, fmt.Errorf("checkpoint at step %d: %w", st.Step, err)
			}
		}
	}
	return stats, nil
}
