package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tokenwise/tokenwise/kernels"
)

// SamplerParams choose how the next token is picked from the logits.
// The zero value is greedy decoding with no penalties.
//
// Order of application, as Hugging Face generate and vLLM do it:
// penalties → temperature → top-k → top-p → min-p → draw.
type SamplerParams struct {
	// Temperature divides the logits; 0 (or below 1e-5, where 1/T would
	// overflow the arithmetic) means greedy: argmax, ties to the lowest id.
	Temperature float32
	// TopK keeps the K most likely tokens (exactly K: of tokens tied with the
	// K-th, the lower ids); 0 disables.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// reaches P (nucleus sampling, as HF's TopPLogitsWarper); 0 or >= 1 disables.
	TopP float32
	// MinP drops tokens whose probability is below MinP times the most likely
	// token's; 0 disables.
	MinP float32
	// RepeatPenalty (HF/llama.cpp repetition penalty) divides the positive
	// logits and multiplies the negative logits of every token seen in the
	// last RepeatLastN tokens of prompt and output; 0 or 1 disables.
	RepeatPenalty float32
	// RepeatLastN is the window of RepeatPenalty: 0 means the whole context
	// (HF), N > 0 the last N tokens (llama.cpp, whose default is 64).
	RepeatLastN int
	// PresencePenalty and FrequencyPenalty follow OpenAI: over the generated
	// tokens only, logit -= presence·[count>0] + frequency·count.
	PresencePenalty  float32
	FrequencyPenalty float32
	// Seed seeds the PCG generator: the same seed, logits and params give
	// the same tokens.
	Seed uint64
	// Logprobs makes Sample report the chosen token's log-probability. It
	// costs one exp per vocabulary entry per step, so it is off by default.
	Logprobs bool
	// TopLogprobs is how many of the most likely alternatives Sample reports
	// (0–20); > 0 implies Logprobs.
	TopLogprobs int
}

// minTemperature is the smallest temperature that samples; below it the
// distribution is a point mass on the argmax anyway.
const minTemperature = 1e-5

// MaxTopLogprobs bounds SamplerParams.TopLogprobs (OpenAI's limit).
const MaxTopLogprobs = 20

// Validate reports parameters out of range.
func (p SamplerParams) Validate() error {
	switch {
	case isBad(p.Temperature) || p.Temperature < 0:
		return fmt.Errorf("temperature %v: must be >= 0", p.Temperature)
	case p.TopK < 0:
		return fmt.Errorf("top_k %d: must be >= 0", p.TopK)
	case isBad(p.TopP) || p.TopP < 0 || p.TopP > 1:
		return fmt.Errorf("top_p %v: must be in [0, 1]", p.TopP)
	case isBad(p.MinP) || p.MinP < 0 || p.MinP > 1:
		return fmt.Errorf("min_p %v: must be in [0, 1]", p.MinP)
	case isBad(p.RepeatPenalty) || p.RepeatPenalty < 0:
		return fmt.Errorf("repetition penalty %v: must be > 0", p.RepeatPenalty)
	case p.RepeatLastN < 0:
		return fmt.Errorf("repeat_last_n %d: must be >= 0", p.RepeatLastN)
	case isBad(p.PresencePenalty) || p.PresencePenalty < -2 || p.PresencePenalty > 2:
		return fmt.Errorf("presence penalty %v: must be in [-2, 2]", p.PresencePenalty)
	case isBad(p.FrequencyPenalty) || p.FrequencyPenalty < -2 || p.FrequencyPenalty > 2:
		return fmt.Errorf("frequency penalty %v: must be in [-2, 2]", p.FrequencyPenalty)
	case p.TopLogprobs < 0 || p.TopLogprobs > MaxTopLogprobs:
		return fmt.Errorf("top_logprobs %d: must be in [0, %d]", p.TopLogprobs, MaxTopLogprobs)
	}
	return nil
}

func isBad(f float32) bool { return math.IsNaN(float64(f)) || math.IsInf(float64(f), 0) }

// TokenLogprob is a token and its log-probability.
type TokenLogprob struct {
	ID      int
	Logprob float32
}

// Choice is what Sample picked.
type Choice struct {
	ID int
	// Logprob is (with SamplerParams.Logprobs) the chosen token's log-probability under the model's own
	// distribution (log-softmax of the masked logits, before penalties,
	// temperature and truncation — vLLM's "raw" logprobs).
	Logprob float32
	// TopLogprobs are the SamplerParams.TopLogprobs most likely tokens under
	// the same distribution, most likely first. The slice is reused by the
	// next Sample call: copy it to keep it.
	TopLogprobs []TokenLogprob
}

// Sampler picks tokens for one sequence. It keeps the sequence's history for
// the penalties and reuses its buffers, so Sample does not allocate after the
// first call that needs them (greedy decoding without penalties never does:
// prob, cand and stamp are 2.4 MB for a 150k vocabulary).
// A Sampler is not safe for concurrent use.
type Sampler struct {
	p      SamplerParams
	vocab  int // ids >= vocab are never sampled (padding rows of the LM head)
	pcg    *rand.PCG
	rng    *rand.Rand
	banned []int

	history  []int // prompt + generated tokens
	genStart int   // history[genStart:] are generated tokens

	work  []float32 // the logits being transformed
	prob  []float64 // prob[id]: unnormalized probability of candidate id (allocated by truncate)
	cand  []int32   // candidate ids (allocated by truncate)
	stamp []uint32  // stamp[id] == epoch: id already handled in this pass (allocated by nextEpoch)
	epoch uint32
	top   []TokenLogprob
}

// pcgStream is the second PCG seed word; the user's seed is the first.
const pcgStream = 0x9e3779b97f4a7c15

// NewSampler makes a sampler for a model whose real vocabulary has vocab
// tokens; logits beyond vocab (padding rows) are ignored.
func NewSampler(p SamplerParams, vocab int) (*Sampler, error) {
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("sampler: %w", err)
	}
	if vocab <= 0 {
		return nil, fmt.Errorf("sampler: vocabulary size %d: must be > 0", vocab)
	}
	pcg := rand.NewPCG(p.Seed, pcgStream)
	return &Sampler{
		p:     p,
		vocab: vocab,
		pcg:   pcg,
		rng:   rand.New(pcg),
		work:  make([]float32, vocab),
		top:   make([]TokenLogprob, 0, p.TopLogprobs+1),
	}, nil
}

// Reset readies the sampler for a new sequence with params p, keeping its
// buffers (a server reuses one sampler per slot instead of allocating
// vocabulary-sized buffers per request). Bans are kept.
func (s *Sampler) Reset(p SamplerParams) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("sampler: %w", err)
	}
	s.p = p
	s.pcg.Seed(p.Seed, pcgStream)
	s.history = s.history[:0]
	s.genStart = 0
	if cap(s.top) < p.TopLogprobs {
		s.top = make([]TokenLogprob, 0, p.TopLogprobs)
	}
	return nil
}

// Params returns the sampler's parameters.
func (s *Sampler) Params() SamplerParams { return s.p }

// Ban makes ids impossible to sample (they also leave the logprob
// distribution). Ids outside the vocabulary are an error.
func (s *Sampler) Ban(ids ...int) error {
	for _, id := range ids {
		if id < 0 || id >= s.vocab {
			return fmt.Errorf("sampler: ban id %d: outside vocabulary [0, %d)", id, s.vocab)
		}
	}
	s.banned = append(s.banned, ids...)
	return nil
}

// SetPrompt resets the history to the prompt ids (the repetition penalty
// sees them; presence and frequency penalties only see generated tokens).
func (s *Sampler) SetPrompt(ids []int) {
	s.history = append(s.history[:0], ids...)
	s.genStart = len(s.history)
}

// Accept records a generated token for the penalties.
func (s *Sampler) Accept(id int) { s.history = append(s.history, id) }

// Sample picks the next token from logits (len >= the vocabulary size given
// to NewSampler; extra entries are ignored). logits is not modified.
func (s *Sampler) Sample(logits []float32) (Choice, error) {
	if len(logits) < s.vocab {
		return Choice{}, fmt.Errorf("sampler: %d logits for a vocabulary of %d", len(logits), s.vocab)
	}
	wantLogprobs := s.p.Logprobs || s.p.TopLogprobs > 0
	w := logits[:s.vocab]
	if len(s.banned) > 0 || s.penalized() || wantLogprobs || s.p.Temperature >= minTemperature {
		// w is changed below, or read past the maximum: a copy. Greedy decoding with
		// none of that reads the logits in place. BenchmarkSample/greedy (151936 logits,
		// Xeon model 207): 295 µs with a scalar scan, 31 with kernels.ArgMax, 17 without
		// the copy; a speculative step samples every row it verifies.
		w = s.work
		copy(w, logits[:s.vocab])
	}
	negInf := float32(math.Inf(-1))
	for _, id := range s.banned {
		w[id] = negInf
	}
	// One pass to reject NaN (a broken forward pass must not turn into a
	// plausible-looking token) and to find the maximum (kernels.ArgMax: SIMD, as it runs
	// for every logits row of every step).
	best, nan := kernels.ArgMax(w)
	if nan {
		i := slices.IndexFunc(w, func(v float32) bool { return v != v })
		return Choice{}, fmt.Errorf("sampler: logit of token %d is NaN", i)
	}
	if best < 0 {
		return Choice{}, fmt.Errorf("sampler: every token is masked or has -Inf logit")
	}
	bestV := w[best]
	var ch Choice
	var lse float32
	if wantLogprobs {
		lse = logSumExp(w, bestV)
		s.topLogprobs(w, lse)
	}

	if s.applyPenalties(w) {
		best, bestV = argmax(w)
	}
	if s.p.Temperature < minTemperature {
		ch.ID = best
	} else {
		ch.ID = s.draw(w, bestV)
	}
	if wantLogprobs {
		ch.Logprob = logits[ch.ID] - lse
		ch.TopLogprobs = s.top
	}
	return ch, nil
}

// logSumExp is log Σ exp(w) given max(w).
func logSumExp(w []float32, max float32) float32 {
	var sum float64
	for _, v := range w {
		sum += float64(exp32(v - max))
	}
	return max + float32(math.Log(sum))
}

// topLogprobs fills s.top with the TopLogprobs largest entries of w as
// logprobs, by insertion into a short sorted list (K <= 20, so this is one
// linear pass in practice).
func (s *Sampler) topLogprobs(w []float32, lse float32) {
	k := s.p.TopLogprobs
	top := s.top[:0]
	if k == 0 {
		s.top = top
		return
	}
	for i, v := range w {
		if len(top) == k && v <= top[k-1].Logprob {
			continue
		}
		j := len(top)
		if j < k {
			top = append(top, TokenLogprob{})
		} else {
			j = k - 1
		}
		// Shift smaller entries down; ties keep the lower id first.
		for j > 0 && top[j-1].Logprob < v {
			top[j] = top[j-1]
			j--
		}
		top[j] = TokenLogprob{ID: i, Logprob: v}
	}
	for i := range top {
		top[i].Logprob -= lse
	}
	s.top = top
}

// applyPenalties applies repetition, presence and frequency penalties to w
// in place and reports whether it changed anything.
// penalized reports whether applyPenalties may change logits (a penalty is set).
func (s *Sampler) penalized() bool {
	r := s.p.RepeatPenalty
	return r != 0 && r != 1 || s.p.PresencePenalty != 0 || s.p.FrequencyPenalty != 0
}

func (s *Sampler) applyPenalties(w []float32) bool {
	changed := false
	if r := s.p.RepeatPenalty; r != 0 && r != 1 {
		from := 0
		if n := s.p.RepeatLastN; n > 0 && len(s.history) > n {
			from = len(s.history) - n
		}
		e := s.nextEpoch()
		for _, id := range s.history[from:] {
			if id < 0 || id >= s.vocab || s.stamp[id] == e {
				continue
			}
			s.stamp[id] = e
			if w[id] > 0 {
				w[id] /= r
			} else {
				w[id] *= r
			}
			changed = true
		}
	}
	pres, freq := s.p.PresencePenalty, s.p.FrequencyPenalty
	if pres != 0 || freq != 0 {
		e := s.nextEpoch()
		for _, id := range s.history[s.genStart:] {
			if id < 0 || id >= s.vocab {
				continue
			}
			w[id] -= freq
			if s.stamp[id] != e {
				s.stamp[id] = e
				w[id] -= pres
			}
			changed = true
		}
	}
	return changed
}

func (s *Sampler) nextEpoch() uint32 {
	if s.stamp == nil {
		s.stamp = make([]uint32, s.vocab)
	}
	s.epoch++
	if s.epoch == 0 { // wrapped: old stamps could collide
		clear(s.stamp)
		s.epoch = 1
	}
	return s.epoch
}

// argmax is the first largest of w after penalties: no NaN (Sample rejected it, and the
// penalties are finite, checked by NewSampler).
func argmax(w []float32) (int, float32) {
	best, _ := kernels.ArgMax(w)
	if best < 0 { // penalties cannot make every logit -Inf unless all were
		return 0, float32(math.Inf(-1))
	}
	return best, w[best]
}

// draw samples from softmax(w/T) truncated by top-k, top-p and min-p.
func (s *Sampler) draw(w []float32, max float32) int {
	c := s.truncate(w, max)
	var sum float64
	for _, id := range c {
		sum += s.prob[id]
	}
	r := s.rng.Float64() * sum
	for _, id := range c {
		r -= s.prob[id]
		if r < 0 {
			return int(id)
		}
	}
	return int(c[len(c)-1]) // rounding left r >= 0 at the end
}

// truncate returns the ids that top-k, top-p and min-p keep (never empty: the
// most likely token always stays), with s.prob[id] = exp((w_id - max)/T).
func (s *Sampler) truncate(w []float32, max float32) []int32 {
	invT := 1 / s.p.Temperature
	if s.prob == nil {
		s.prob, s.cand = make([]float64, s.vocab), make([]int32, 0, s.vocab)
	}

	// Candidates: everything not -Inf, cut to the top K.
	var c []int32
	if k := s.p.TopK; k > 0 && k <= heapTopKMax {
		c = topKHeap(s.cand[:0], w, k)
	} else {
		c = s.cand[:0]
		for i, v := range w {
			if v > float32(math.Inf(-1)) {
				c = append(c, int32(i))
			}
		}
		if k > 0 && k < len(c) {
			selectTopK(c, w, k)
			c = c[:k]
		}
	}

	// Unnormalized probabilities e_i = exp((w_i - max)/T), so e_max = 1.
	// z is their sum over the post-top-k set, the set HF's top-p normalizes over.
	var z float64
	for _, id := range c {
		e := float64(exp32((w[id] - max) * invT))
		s.prob[id] = e
		z += e
	}

	// Drop before sorting what top-p and min-p drop anyway, so a 150k
	// vocabulary is never sorted in full:
	//   min-p keeps p_i >= MinP·p_max, i.e. e_i >= MinP;
	//   top-p keeps a prefix of the sorted tokens, inside any set of the most
	//   likely tokens that already holds mass P. Binning e_i by binary exponent
	//   (64 bins, one pass) finds such a set: the bins down to where the mass
	//   reaches P, plus one bin of margin for rounding.
	topP := float64(s.p.TopP)
	useTopP := topP > 0 && topP < 1
	floor := float64(s.p.MinP)
	if useTopP {
		var mass [65]float64
		for _, id := range c {
			mass[expBin(s.prob[id])] += s.prob[id]
		}
		var cum float64
		for b := range mass {
			cum += mass[b]
			if cum >= topP*z {
				if b+1 < 64 {
					floor = math.Max(floor, math.Ldexp(1, -(b+2)))
				}
				break
			}
		}
	}
	if floor > 0 {
		kept := c[:0]
		for _, id := range c {
			if s.prob[id] >= floor || w[id] == max {
				kept = append(kept, id)
			}
		}
		c = kept
	}

	if useTopP {
		// Sort by probability, ties to the lower id, and keep while the mass
		// before a token is < P (HF removes a token when the ascending
		// cumulative sum up to it is <= 1-P).
		slices.SortFunc(c, func(a, b int32) int {
			if w[a] != w[b] {
				if w[a] > w[b] {
					return -1
				}
				return 1
			}
			return int(a - b)
		})
		var before float64
		for i, id := range c {
			if before >= topP*z {
				c = c[:i]
				break
			}
			before += s.prob[id]
		}
	}
	return c
}

// expBin is the bin of e in (0, 1] by binary exponent: bin b holds
// [2^-(b+1), 2^-b), e = 1 is in bin 0, and bin 64 holds everything below 2^-64.
func expBin(e float64) int {
	b := 1022 - int(math.Float64bits(e)>>52&0x7ff) // exponent field 1022 is [0.5, 1)
	return min(max(b, 0), 64)
}

// heapTopKMax is the largest K taken by the heap scan; beyond it quickselect
// over all candidates is cheaper than log K work per displaced entry.
const heapTopKMax = 1024

// topKHeap appends to dst the ids of the k largest finite entries of w (ties:
// lower id) in no particular order. It keeps a min-heap of the k best so far,
// so most entries cost one comparison with the root: O(n) for small k.
func topKHeap(dst []int32, w []float32, k int) []int32 {
	h := dst[:0]
	// worse reports whether a ranks after b.
	worse := func(a, b int32) bool {
		if w[a] != w[b] {
			return w[a] < w[b]
		}
		return a > b
	}
	down := func(i int) {
		for {
			l := 2*i + 1
			if l >= len(h) {
				return
			}
			m := l
			if r := l + 1; r < len(h) && worse(h[r], h[l]) {
				m = r
			}
			if !worse(h[m], h[i]) {
				return
			}
			h[i], h[m] = h[m], h[i]
			i = m
		}
	}
	for i, v := range w {
		if v == float32(math.Inf(-1)) {
			continue
		}
		if len(h) < k {
			h = append(h, int32(i))
			for j := len(h) - 1; j > 0; { // sift up
				p := (j - 1) / 2
				if !worse(h[j], h[p]) {
					break
				}
				h[j], h[p] = h[p], h[j]
				j = p
			}
			continue
		}
		// Ids arrive in increasing order, so an equal value ranks after the root.
		if v > w[h[0]] {
			h[0] = int32(i)
			down(0)
		}
	}
	return h
}

// exp32 returns e^x for x <= 0 with a relative error below 1e-7; every caller
// passes logit - max. math.Exp costs several times more, and the sampler
// calls this once per vocabulary entry per step.
func exp32(x float32) float32 {
	const (
		log2e = 1.44269504088896341
		ln2hi = 0.693359375 // ln2 split so n*ln2hi is exact
		ln2lo = -2.12194440e-4
	)
	if x < -87 { // below float32's normal range; such a token's share is < 1e-37
		return 0
	}
	// x = n·ln2 + r with |r| <= ln2/2; e^x = 2^n · e^r.
	n := float32(int32(x*log2e - 0.5)) // round to nearest for x <= 0
	r := x - n*ln2hi - n*ln2lo
	// Taylor series of e^r to degree 7: error < 0.35^8/8! ≈ 6e-9.
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float32frombits(uint32(int32(n)+127)<<23)
}

// selectTopK reorders c so its first k entries are the k largest by w
// (ties: lower id), in no particular order. Quickselect: O(len(c)).
func selectTopK(c []int32, w []float32, k int) {
	less := func(a, b int32) bool { // a ranks before b
		if w[a] != w[b] {
			return w[a] > w[b]
		}
		return a < b
	}
	lo, hi := 0, len(c)-1
	for lo < hi {
		// Median of three as pivot keeps sorted input linear.
		mid := lo + (hi-lo)/2
		if less(c[mid], c[lo]) {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if less(c[hi], c[lo]) {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if less(c[hi], c[mid]) {
			c[hi], c[mid] = c[mid], c[hi]
		}
		pivot := c[mid]
		i, j := lo, hi
		for i <= j {
			for less(c[i], pivot) {
				i++
			}
			for less(pivot, c[j]) {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}
