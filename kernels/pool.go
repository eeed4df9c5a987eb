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
)

// Pool is a fixed set of worker goroutines. A forward pass calls it hundreds of times per
// token, so the workers are started once and fed over channels: spawning goroutines per call
// costs more than a small matvec.
type Pool struct {
	n     int
	tasks []chan task
	wg    sync.WaitGroup
	mu    sync.Mutex // one Run at a time; the workers' scratch buffers are not shared
}

type task struct {
	fn     func(worker, lo, hi int)
	lo, hi int
}

// NewPool starts threads workers (threads <= 0: one per CPU). The caller's goroutine does
// the first share of every Run itself, so threads-1 goroutines are started.
func NewPool(threads int) *Pool {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: threads, tasks: make([]chan task, threads)}
	for w := 1; w < threads; w++ {
		ch := make(chan task, 1)
		p.tasks[w] = ch
		go func(w int) {
			for t := range ch {
				t.fn(w, t.lo, t.hi)
				p.wg.Done()
			}
		}(w)
	}
	return p
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
	per, extra := units/workers, units%workers
	lo := 0
	var first task
	for w := range workers {
		u := per
		if w < extra {
			u++
		}
		hi := min(n, lo+u*align)
		t := task{fn, lo, hi}
		if w == 0 {
			first = t
		} else {
			p.wg.Add(1)
			p.tasks[w] <- t
		}
		lo = hi
	}
	first.fn(0, first.lo, first.hi)
	p.wg.Wait()
}

// Close stops the workers. The pool must not be used afterwards.
func (p *Pool) Close() {
	for _, ch := range p.tasks[1:] {
		close(ch)
	}
	p.tasks = p.tasks[:1]
	p.n = 1
}
