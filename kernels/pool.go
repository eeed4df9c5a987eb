// Package kernels holds the compute kernels of the forward pass: matrix×vector (decode) and
// matrix×matrix (prefill) products for every weight dtype the model loads, RMSNorm, RoPE,
// softmax and SwiGLU, plus the worker pool that splits rows across cores.
//
// Everything here is plain Go: loops unrolled four ways and re-sliced so the compiler drops
// bounds checks. SIMD versions belong behind the same functions.
package kernels

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Pool is a fixed set of worker goroutines. A decode step calls it about eight times per
// layer, each call a few microseconds of work per worker on a small model, so the cost of
// handing work over decides how close decode gets to the memory bandwidth. A goroutine
// parked on a channel takes tens of microseconds to be woken and rescheduled, which on
// SmolLM2-135M added up to a third of the step. So, like ggml's thread pool, workers spin on
// an atomic sequence number between calls and the caller spins until they are done; a
// worker that sees no work for spinFor parks on its channel, so an idle model costs no CPU.
// Spinning does not yield to the scheduler (runtime.Gosched takes its locks, which showed
// as a tenth of a decode step); the worker's bounded spin and the caller's yielding after
// a long wait keep other goroutines of the process — an HTTP server, the GC — from being
// starved of a processor.
type Pool struct {
	n       int       // set by NewPool only: Run reads it before taking mu
	workers []*worker // workers[0] is unused: the caller is worker 0
	pending atomic.Int32
	_       [60]byte     // next is taken once per chunk by every worker: its own cache line
	next    atomic.Int64 // RunChunks: the start of the next chunk to hand out
	_       [56]byte
	mu      sync.Mutex // one Run at a time; the workers' scratch buffers are not shared
	closed  bool       // under mu
}

// worker is one goroutine's mailbox, padded so that two workers' counters do not share a
// cache line.
type worker struct {
	seq    atomic.Uint64 // incremented once per task posted
	parked atomic.Uint64 // while the goroutine waits on wake: the seq of the post to wake it; else 0
	wake   chan struct{}
	t      task
	_      [64]byte
}

type task struct {
	fn     func(worker, lo, hi int)
	lo, hi int
	chunk  int // > 0: [lo,hi) is taken chunk by chunk from Pool.next (RunChunks)
	quit   bool
}

// exec runs t on worker w.
func (p *Pool) exec(w int, t task) {
	if t.chunk <= 0 {
		t.fn(w, t.lo, t.hi)
		return
	}
	for {
		lo := int(p.next.Add(int64(t.chunk))) - t.chunk
		if lo >= t.hi {
			return
		}
		t.fn(w, lo, min(t.hi, lo+t.chunk))
	}
}

// spinFor is how long an idle worker keeps polling before it parks: longer than the gaps
// between the calls of one forward pass (microseconds), much shorter than a human-visible
// pause.
const spinFor = 200 * time.Microsecond

// NewPool starts threads workers (threads <= 0: one per CPU). The caller's goroutine does
// the first share of every Run itself, so threads-1 goroutines are started.
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: threads, workers: make([]*worker, threads)}
	for w := 1; w < threads; w++ {
		wk := &worker{wake: make(chan struct{}, 1)}
		p.workers[w] = wk
		go p.loop(w, wk)
	}
	return p
}

// loop runs worker w's tasks until Close.
func (p *Pool) loop(w int, wk *worker) {
	var seen uint64
	for {
		seen = wk.await(seen)
		t := wk.t
		if t.quit {
			return
		}
		p.exec(w, t)
		p.pending.Add(-1)
	}
}

// await returns once wk.seq has moved past seen: spinning first, then parked on wk.wake.
func (wk *worker) await(seen uint64) uint64 {
	start := time.Now()
	for i := 1; ; i++ {
		if s := wk.seq.Load(); s != seen {
			return s
		}
		if i%1024 == 0 && time.Since(start) > spinFor {
			break
		}
	}
	// Park. parked names the post that is to wake this park, seen+1; post increments seq to
	// s and then, if parked is s, swaps it to 0 and sends one wake-up. Re-checking seq after
	// setting parked closes the window between the two (both sides write one variable and
	// then read the other, and sync/atomic is sequentially consistent).
	//
	// parked is a post's number, not a 0/1 flag, because a poster can stall between its seq
	// increment and its look at parked (the OS taking its thread for a time slice) while
	// this worker, still spinning, takes the task, runs it, spins spinFor and parks again. A
	// flag let the late poster wake that new park; taken for the next task, the wake-up made
	// the worker run the old task again and decrement pending twice, so that Run could
	// return before another worker's share was done, or miss pending's 0 and spin forever
	// with every worker parked (TestPoolLateWakeup). With numbers the late poster sees
	// seen+1, one past its own seq, and leaves the park alone: every wake-up is sent to the
	// park that is waiting for that post, after the post, so a plain receive needs no
	// timeout. The loop re-checks seq after a wake-up all the same, as any condition wait
	// should, rather than return without a new task.
	want := seen + 1
	for {
		wk.parked.Store(want)
		if s := wk.seq.Load(); s != seen {
			if !wk.parked.CompareAndSwap(want, 0) {
				<-wk.wake // post want saw us parked and has sent (or will send) its wake-up
			}
			return s
		}
		<-wk.wake // post want cleared parked
		if s := wk.seq.Load(); s != seen {
			return s
		}
	}
}

// testHookPosted, set only by tests, runs in post between publishing the task and looking
// at parked, to widen that window (see TestPoolLateWakeup).
var testHookPosted func(*worker)

// post hands t to wk and wakes it if it is parked waiting for this post (see await).
func (wk *worker) post(t task) {
	wk.t = t
	s := wk.seq.Add(1)
	if testHookPosted != nil {
		testHookPosted(wk)
	}
	if wk.parked.Load() == s && wk.parked.CompareAndSwap(s, 0) {
		wk.wake <- struct{}{}
	}
}

// Threads is the number of workers, including the calling goroutine.
func (p *Pool) Threads() int { return p.n }

// Run splits [0,n) into contiguous chunks, one per worker, each a multiple of align (except
// the last), and calls fn(worker, lo, hi) on them in parallel; it returns when all are done.
// worker is in [0, Threads()), so fn can index per-worker scratch space.
func (p *Pool) Run(n, align int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	if align < 1 {
		align = 1
	}
	units := (n + align - 1) / align
	workers := min(p.n, units)
	if workers <= 1 {
		fn(0, 0, n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		fn(0, 0, n)
		return
	}
	per, extra := units/workers, units%workers
	p.pending.Store(int32(workers - 1))
	lo := 0
	var first task
	for w := range workers {
		u := per
		if w < extra {
			u++
		}
		hi := min(n, lo+u*align)
		t := task{fn: fn, lo: lo, hi: hi}
		if w == 0 {
			first = t
		} else {
			p.workers[w].post(t)
		}
		lo = hi
	}
	first.fn(0, first.lo, first.hi)
	p.wait()
}

// wait returns once every posted task is done. The others are running (or being woken):
// poll without yielding, which would take the scheduler's locks, unless they take long —
// then their goroutines may be waiting for a processor that this loop holds.
func (p *Pool) wait() {
	for i := 1; p.pending.Load() != 0; i++ {
		if i > 1<<14 && i%256 == 0 {
			runtime.Gosched()
		}
	}
}

// RunChunks is Run with the work handed out dynamically, as ggml's thread pool does for a
// matrix×vector product: every worker takes [lo, lo+chunk) ranges from a shared counter
// until [0,n) is done, so a worker slowed by something else on its core (another process,
// an interrupt) takes fewer and the others are not left waiting for it at the end.
// fn must not depend on which worker runs a range.
func (p *Pool) RunChunks(n, chunk int, fn func(worker, lo, hi int)) {
	if n <= 0 {
		return
	}
	chunk = max(1, chunk)
	workers := min(p.n, (n+chunk-1)/chunk)
	if workers <= 1 {
		fn(0, 0, n)
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		fn(0, 0, n)
		return
	}
	p.next.Store(0)
	p.pending.Store(int32(workers - 1))
	t := task{fn: fn, lo: 0, hi: n, chunk: chunk}
	for w := 1; w < workers; w++ {
		p.workers[w].post(t)
	}
	p.exec(0, t)
	p.wait()
}

// Close stops the workers, after the Run in progress if there is one. A Run or RunChunks
// after Close (or one that loses the race to it) does all the work on its caller's
// goroutine.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	p.closed = true
	for _, wk := range p.workers[1:] {
		wk.post(task{quit: true})
	}
}
