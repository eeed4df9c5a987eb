package kernels

import "math"

// MatVecSubset computes the matrix×vector product only for the rows ids (ascending, inside
// w): out[r] = w[r,:]·x for r in ids, -Inf for every other row. It is the LM head of a
// position where a grammar allows few tokens: their logits are all the sampler can use
// (the others are masked to -Inf anyway), and on a CPU the head is a large share of a small
// model's step (SmolLM2-135M: 49,152×576 of its ~135M weights, a fifth of a decode step).
//
// Every computed row has the bits MatVec gives it: the rows are computed by the same row
// kernel, over the same four-row groups that MatMulMany hands out (a group holding an
// allowed row is computed whole, then its other rows are set to -Inf), and every product
// kernel computes each row on its own (batch-invariant: TestMatVecSubsetEqualsMatVec).
// Groups are split over the pool's workers when there are enough of them to be worth it.
func MatVecSubset(p *Pool, out []float32, w *Mat, x []float32, ids []int32, s *Scratch) {
	out = out[:w.Rows]
	x = x[:w.Cols]
	inf := float32(math.Inf(-1))
	if len(ids) == 0 {
		for i := range out {
			out[i] = inf
		}
		return
	}
	// The distinct four-row groups holding an allowed row, ascending; sixteen-row ones where
	// the AMX-arithmetic kernels take the product (they compute a group of 16 rows whole).
	gs := 4
	if amxArithmetic(w) {
		gs = 16
	}
	groups := s.groups[:0]
	for _, id := range ids {
		g := id / int32(gs)
		if n := len(groups); n == 0 || groups[n-1] != g {
			groups = append(groups, g)
		}
	}
	s.groups = groups
	rows := prepare(w, x, 1, s)
	fn := func(worker, lo, hi int) {
		for _, g := range groups[lo:hi] {
			a := int(g) * gs
			rows(worker, out, w, a, min(a+gs, w.Rows))
		}
	}
	// A group costs about four row products: below ~64 groups a hand-over costs more
	// than it saves.
	if len(groups) < 64 {
		fn(0, 0, len(groups))
	} else {
		p.Run(len(groups), 16, fn)
	}
	// -Inf everywhere else: between the groups, and the group rows that are not allowed.
	next := 0 // the next row not yet set
	k := 0    // the next allowed id
	for _, g := range groups {
		a := int(g) * gs
		for ; next < a; next++ {
			out[next] = inf
		}
		for r := a; r < min(a+gs, w.Rows); r++ {
			if k < len(ids) && int(ids[k]) == r {
				k++
			} else {
				out[r] = inf
			}
		}
		next = min(a+gs, w.Rows)
	}
	for ; next < w.Rows; next++ {
		out[next] = inf
	}
}
