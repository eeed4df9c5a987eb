package kernels

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestPoolLateWakeup is a stress test for the hand-over between post and a worker that
// parks. The interleaving it is after needs the poster to stall between publishing a task
// (seq) and looking at the worker's parked word, for longer than the worker takes to see
// the task, run it, spin for spinFor and park again. With parked a 0/1 flag, as it was:
//
//	poster (Run, task N)              worker (spinning, seen = N-1)
//	wk.t = N; seq = N
//	  ... stalled ...                 sees seq N, runs task N, pending--
//	                                  spins spinFor, parks: parked = 1, seq is N, blocks
//	parked is 1: clear it, send
//	                                  wakes: a wake-up meant no task, seq is still N
//
// A worker that took every wake-up for a new task (as await did before the 5 ms re-check
// was added) returned with seq still N, ran task N a second time and decremented pending
// a second time; pending went to -1 and, unless the caller happened to look while it
// passed through 0, Run's wait (pending != 0) spun forever with every worker parked: the
// hang once seen, "caller waiting, worker parked". On a loaded machine the stall is the
// operating system taking the poster's thread away for a time slice; testHookPosted makes
// it happen at will, waiting inside post until a worker that was spinning has parked
// again (see await for how the pool keeps that late post from waking the new park).
//
// The test fails (a call does not return within 10 s) or reports indices done twice when
// a late wake-up is taken for a task, across GOMAXPROCS 1, 2 and 4, pools of 2 and 4
// threads, Run and RunChunks, back-to-back calls (workers spinning), calls after a pause
// (workers parked) and calls whose post stalls; and it checks that the stall was reached.
func TestPoolLateWakeup(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(0))
	var stall *worker   // the hook runs on the goroutine that calls Run, which sets stall
	late, total := 0, 0 // stalled posts whose worker parked again meanwhile
	testHookPosted = func(wk *worker) {
		if wk != stall {
			return
		}
		if wk.parked.Load() != 0 {
			return // parked already: this post wakes it
		}
		// Spinning: it takes the task now. Wait until it has parked again, or 20 ms.
		for deadline := time.Now().Add(20 * time.Millisecond); wk.parked.Load() == 0 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Microsecond)
		}
		if wk.parked.Load() != 0 {
			late++
		}
	}
	defer func() { testHookPosted = nil }()

	for _, procs := range []int{1, 2, 4} {
		for _, threads := range []int{2, 4} {
			runtime.GOMAXPROCS(procs)
			name := fmt.Sprintf("GOMAXPROCS=%d/threads=%d", procs, threads)
			p := NewPool(threads)
			done := make(chan struct{})
			var errs atomic.Int32
			go func() {
				defer close(done)
				for i := range 240 {
					// Two calls in three stall their post to one worker (which matters only
					// if it is still spinning), a different one each time; the workers
					// posted before it keep spinning meanwhile.
					stall = nil
					if i%3 != 2 {
						stall = p.workers[1+i/3%(threads-1)]
					}
					if i%16 == 5 {
						time.Sleep(2 * spinFor) // let the workers park
					}
					n := 8 + i%13
					hits := make([]atomic.Int32, n)
					count := func(_, lo, hi int) {
						for j := lo; j < hi; j++ {
							hits[j].Add(1)
						}
					}
					if i%2 == 0 {
						p.Run(n, 1, count)
					} else {
						p.RunChunks(n, 3, count)
					}
					for j := range hits {
						if h := hits[j].Load(); h != 1 && errs.Add(1) <= 3 {
							t.Errorf("%s call %d: index %d done %d times", name, i, j, h)
						}
					}
				}
				stall = nil
			}()
			select {
			case <-done:
				p.Close()
				t.Logf("%s: %d late posts", name, late)
				total += late
				late = 0
			case <-time.After(10 * time.Second):
				// The pool is left as it is: Close would wait for the Run that hangs.
				buf := make([]byte, 1<<20)
				stacks := string(buf[:runtime.Stack(buf, true)])
				var pool []string
				for _, g := range strings.Split(stacks, "\n\n") {
					if strings.Contains(g, "kernels.(*") {
						pool = append(pool, g)
					}
				}
				t.Fatalf("%s: call did not return within 10 s (%d wrong counts before); the pool's goroutines:\n%s",
					name, errs.Load(), strings.Join(pool, "\n\n"))
			}
		}
	}
	if total == 0 {
		t.Error("no post stalled until its worker had parked again: the test misses the interleaving")
	}
}

// BenchmarkPoolRun is the cost of one hand-over with the workers spinning: a Run whose
// tasks do nothing, as in the gaps between a decode step's products.
func BenchmarkPoolRun(b *testing.B) {
	p := NewPool(2)
	defer p.Close()
	nop := func(_, _, _ int) {}
	for b.Loop() {
		p.Run(2, 1, nop)
	}
}

// TestPoolCloseDuringRun: Close while other goroutines call Run and RunChunks waits for the
// call in progress, and the calls that come after it still cover their range (on the
// caller's goroutine). Under -race this also checks that Run's unlocked look at the thread
// count does not race with Close.
func TestPoolCloseDuringRun(t *testing.T) {
	p := NewPool(3)
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				n := 5 + i%7
				hits := make([]atomic.Int32, n)
				count := func(worker, lo, hi int) {
					if worker < 0 || worker >= p.Threads() {
						t.Errorf("worker %d", worker)
					}
					for j := lo; j < hi; j++ {
						hits[j].Add(1)
					}
				}
				if (g+i)%2 == 0 {
					p.Run(n, 1, count)
				} else {
					p.RunChunks(n, 2, count)
				}
				for j := range hits {
					if h := hits[j].Load(); h != 1 {
						t.Errorf("goroutine %d call %d: index %d done %d times", g, i, j, h)
						return
					}
				}
			}
		}()
	}
	time.Sleep(time.Millisecond)
	p.Close()
	wg.Wait()
	p.Close() // a second Close does nothing
}

// TestDecodeChunk: a decode product's chunks are whole 16-row groups of 64 to
// decodeChunkRows rows, and a product large enough gives every worker two chunks or more.
func TestDecodeChunk(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 8} {
		for rows := 1; rows < 70000; rows += 37 {
			c := 4 * decodeChunk(rows, workers)
			if c%16 != 0 || c < 64 || c > decodeChunkRows {
				t.Fatalf("%d rows, %d workers: chunks of %d rows", rows, workers, c)
			}
			if rows >= 2*workers*64 && rows/c < 2*workers {
				t.Fatalf("%d rows, %d workers: chunks of %d rows give a worker fewer than two", rows, workers, c)
			}
		}
	}
	if c := 4 * decodeChunk(49152, 2); c != decodeChunkRows {
		t.Errorf("SmolLM2's LM head on two workers: chunks of %d rows, want %d", c, decodeChunkRows)
	}
}
