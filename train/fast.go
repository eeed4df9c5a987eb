package train

import (
	"fmt"
	"math"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/model"
)

// The training pass the trainer runs: the same arithmetic as core's (pass.go), which stays
// as the reference the tests hold this one to (and, in float64, the one the finite
// differences check), with every product of a whole sequence done by the kernels:
//
//   - a linear layer's Y = X·Wᵀ by kernels.MatMul (q, k, v and gate, up fused with
//     MatMulMany), dX = dY·W by kernels.GemmNN and dW += dYᵀ·X by kernels.GemmTN, each split
//     across the pool's workers (so one sequence uses every core);
//   - attention per head as products too (scores Q·Kᵀ, P·V; in the backward pass dP = dO·Vᵀ,
//     dV = Pᵀ·dO, dQ = dS·K, dK = dSᵀ·Q), in stripes of 64 queries that stop at the causal
//     diagonal, the heads spread over the workers;
//   - the LM head over all target positions of a chunk at once: logits, softmax and
//     cross-entropy, dH = dlogits·E and dE += dlogitsᵀ·H.
//
// Frozen tensors get no weight gradient (their gradient slices are nil), and the backward
// pass stops at the lowest block with a trainable tensor, unless the embeddings train, when
// dX has to reach the bottom (frozen blocks on the way get dX only).

// headChunk is how many target positions the LM head takes at a time: their logits are
// headChunk × vocab floats (48 MiB for SmolLM2's 49152). The head's weight gradient
// dE += dlogitsᵀ·H reads and writes all of dE (113 MiB for SmolLM2) once per chunk for
// 2·vocab·d·chunk flops, so a short chunk makes it bound by memory: at 64 targets it moved
// 226 MiB per 3.6 GFLOP, at 256 the same bytes per 14.5 GFLOP.
var headChunk = 256 // a variable so a test can cut short sequences into several chunks

// attnStripe is how many queries an attention product takes at a time: each stripe's keys
// end at its last query, so the products skip most of the masked upper triangle.
const attnStripe = 64

// fastPass runs training passes of a net on the kernels.
type fastPass struct {
	cfg   *model.Config
	w     weights[float32]
	freqs []float64
	pool  *kernels.Pool
	s     *kernels.Scratch
	a     acts[float32]
	// attention scratch per worker: a head's K or V transposed, and its scores (or their
	// gradient); per head: its share of dK and dV before the heads of a group are summed
	kt, sc   [][]float32
	dkh, dvh []float32
	// LM head scratch: the chunk's final hidden rows, logits, dH and per-row losses
	hc, lg, dhc []float32
	rowLoss     []float64
	// linear's transposes; per layer, the gate's sigmoid kept for the backward pass
	xt, yt []float32
	sig    [][]float32
	// gradient scratch for frozen norm scales, whose dX the backward pass still needs
	dwNorm []float32
}

func newFastPass(n *Net, pool *kernels.Pool) *fastPass {
	return &fastPass{cfg: n.Cfg, w: bind(n.Cfg, n.Specs, n.W), freqs: n.freqs, pool: pool, s: kernels.NewScratch(pool.Threads())}
}

// par runs fn over [0,n) split across the pool in pieces of at least 1024.
func (f *fastPass) par(n int, fn func(lo, hi int)) {
	f.pool.Run(n, 1024, func(_, lo, hi int) { fn(lo, hi) })
}

// linear writes out = in·Wᵀ (+ b) for n rows, as outᵀ = W·inᵀ: GemmNN's broadcast tile
// with W as A (BenchmarkLinear compares it with kernels.MatMul's dot-product tiles). in is
// transposed into f.xt first unless tin is set (f.xt already holds inᵀ: q, k and v share
// one input, as do gate and up). The transposes move n·(rows+cols) floats for
// n·rows·cols multiply-adds.
func (f *fastPass) linear(out, in, w, b []float32, n, rows, cols int, tin bool) {
	f.xt = growF(f.xt, n*cols)
	f.yt = growF(f.yt, n*rows)
	if !tin {
		f.transpose(f.xt, in, n, cols)
	}
	kernels.GemmNN(f.pool, rows, n, cols, w, cols, f.xt, n, f.yt, n, false)
	f.transpose(out, f.yt, rows, n)
	addBias(out, b, n, rows)
}

// transpose writes the r×c matrix x as c×r into dst, in 16×16 blocks, the column blocks
// split over the pool.
func (f *fastPass) transpose(dst, x []float32, r, c int) {
	const bs = 16
	f.pool.Run(c, bs*8, func(_, lo, hi int) {
		for i0 := 0; i0 < r; i0 += bs {
			for j0 := lo; j0 < hi; j0 += bs {
				for i := i0; i < min(r, i0+bs); i++ {
					row := x[i*c : i*c+c]
					for j := j0; j < min(hi, j0+bs); j++ {
						dst[j*r+i] = row[j]
					}
				}
			}
		}
	})
}

func addBias(out, b []float32, n, rows int) {
	if b == nil {
		return
	}
	for t := range n {
		r := out[t*rows : (t+1)*rows]
		for o, bv := range b {
			r[o] += bv
		}
	}
}

// linearBack does din (+)= dout·W (din nil: skipped), dw += doutᵀ·in (dw nil: skipped) and
// db += Σ dout (db nil: skipped) for n rows.
func (f *fastPass) linearBack(din []float32, accIn bool, dw, db, dout, in, w []float32, n, rows, cols int) {
	if din != nil {
		kernels.GemmNN(f.pool, n, cols, rows, dout, rows, w, cols, din, cols, accIn)
	}
	if dw != nil {
		kernels.GemmTN(f.pool, rows, cols, n, dout, rows, in, cols, dw, cols, true)
	}
	if db != nil {
		for t := range n {
			for o, g := range dout[t*rows : (t+1)*rows] {
				db[o] += g
			}
		}
	}
}

func growF(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func (f *fastPass) reserve(n int) {
	cfg := f.cfg
	th := f.pool.Threads()
	hd := cfg.HeadDim
	if len(f.kt) != th {
		f.kt, f.sc = make([][]float32, th), make([][]float32, th)
	}
	for w := range th {
		f.kt[w], f.sc[w] = growF(f.kt[w], hd*n), growF(f.sc[w], n*n)
	}
	f.dkh, f.dvh = growF(f.dkh, cfg.NumHeads*n*hd), growF(f.dvh, cfg.NumHeads*n*hd)
	c := min(n, headChunk)
	f.hc, f.lg, f.dhc = growF(f.hc, c*cfg.HiddenSize), growF(f.lg, c*cfg.VocabSize), growF(f.dhc, c*cfg.HiddenSize)
	if cap(f.rowLoss) < c {
		f.rowLoss = make([]float64, c)
	}
	f.rowLoss = f.rowLoss[:c]
	f.dwNorm = growF(f.dwNorm, max(cfg.HiddenSize, hd))
	if len(f.sig) != cfg.NumLayers {
		f.sig = make([][]float32, cfg.NumLayers)
	}
	for l := range f.sig {
		f.sig[l] = growF(f.sig[l], n*cfg.IntermediateSize)
	}
}

// window returns the first position token t may attend to.
func (f *fastPass) window(t int) int {
	if w := f.cfg.SlidingWindow; w > 0 && t-w+1 > 0 {
		return t - w + 1
	}
	return 0
}

// transposeHead writes head column block x[:, off:off+hd] (rows of stride ld) as hd×n.
func transposeHead(dst, x []float32, n, ld, off, hd int) {
	for t := range n {
		row := x[t*ld+off : t*ld+off+hd]
		for i, v := range row {
			dst[i*n+t] = v
		}
	}
}

// forward runs ids through the net, keeping what the backward pass needs in f.a.
func (f *fastPass) forward(ids []int) error {
	cfg := f.cfg
	n := len(ids)
	if n > cfg.MaxPositions {
		return fmt.Errorf("sequence of %d tokens: longer than max_position_embeddings %d", n, cfg.MaxPositions)
	}
	a := &f.a
	a.resize(cfg, n, false)
	clear(a.dx)
	clear(a.dh)
	f.reserve(n)
	d, fd, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim
	nh, nkv := cfg.NumHeads, cfg.NumKVHeads
	qd, kvd := nh*hd, nkv*hd
	half := hd / 2
	for t, id := range ids {
		if id < 0 || id >= cfg.VocabSize {
			return fmt.Errorf("token %d at position %d: outside the vocabulary (size %d)", id, t, cfg.VocabSize)
		}
		copy(a.xs[0][t*d:(t+1)*d], f.w.embed[id*d:(id+1)*d])
		for i, fr := range f.freqs {
			s, co := math.Sincos(float64(t) * fr)
			a.cos[t*half+i], a.sin[t*half+i] = float32(co), float32(s)
		}
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	group := nh / nkv
	for l := range cfg.NumLayers {
		w := &f.w.layers[l]
		x := a.xs[2*l]
		rmsFwd(a.hA[l], a.rA[l], x, w.attnNorm, n, d, cfg.RMSNormEps)
		q, k, v := a.q[l], a.k[l], a.v[l]
		f.linear(q, a.hA[l], w.wq, w.bq, n, qd, d, false)
		f.linear(k, a.hA[l], w.wk, w.bk, n, kvd, d, true)
		f.linear(v, a.hA[l], w.wv, w.bv, n, kvd, d, true)
		if w.qNorm != nil {
			copy(a.qRaw[l], q)
			copy(a.kRaw[l], k)
			rmsFwd(q, a.rq[l], a.qRaw[l], w.qNorm, n*nh, hd, cfg.RMSNormEps)
			rmsFwd(k, a.rk[l], a.kRaw[l], w.kNorm, n*nkv, hd, cfg.RMSNormEps)
		}
		for t := range n {
			cs, sn := a.cos[t*half:(t+1)*half], a.sin[t*half:(t+1)*half]
			for h := range nh {
				ropeFwd(q[(t*nh+h)*hd:(t*nh+h+1)*hd], cs, sn)
			}
			for h := range nkv {
				ropeFwd(k[(t*nkv+h)*hd:(t*nkv+h+1)*hd], cs, sn)
			}
		}
		ctx, p := a.ctx[l], a.p[l]
		f.pool.Run(nh, 1, func(wk, lo, hi int) {
			kt := f.kt[wk]
			for h := lo; h < hi; h++ {
				g := h / group
				transposeHead(kt, k, n, kvd, g*hd, hd)
				ph := p[h*n*n : (h+1)*n*n]
				for r0 := 0; r0 < n; r0 += attnStripe {
					r1 := min(n, r0+attnStripe)
					kernels.GemmNN(nil, r1-r0, r1, hd, q[r0*qd+h*hd:], qd, kt, n, ph[r0*n:], n, false)
					for t := r0; t < r1; t++ {
						row := ph[t*n : t*n+r1]
						first := f.window(t)
						mx := float32(math.Inf(-1))
						for j := first; j <= t; j++ {
							row[j] *= scale
							mx = max(mx, row[j])
						}
						var sum float64
						for j := first; j <= t; j++ {
							e := expNeg(row[j] - mx)
							row[j] = e
							sum += float64(e)
						}
						inv := float32(1 / sum)
						for j := range row {
							if j < first || j > t {
								row[j] = 0
							} else {
								row[j] *= inv
							}
						}
					}
					kernels.GemmNN(nil, r1-r0, hd, r1, ph[r0*n:], n, v[g*hd:], kvd, ctx[r0*qd+h*hd:], qd, false)
				}
			}
		})
		xm := a.xs[2*l+1]
		f.linear(xm, ctx, w.wo, nil, n, d, qd, false)
		for i := range xm {
			xm[i] += x[i]
		}
		rmsFwd(a.hM[l], a.rM[l], xm, w.mlpNorm, n, d, cfg.RMSNormEps)
		f.linear(a.g[l], a.hM[l], w.wg, nil, n, fd, d, false)
		f.linear(a.u[l], a.hM[l], w.wu, nil, n, fd, d, true)
		gl, ul, sl, sig := a.g[l], a.u[l], a.s[l], f.sig[l]
		f.par(n*fd, func(lo, hi int) {
			for i := lo; i < hi; i++ {
				gv := gl[i]
				sg := float32(sigmoid(float64(gv)))
				sig[i] = sg
				sl[i] = gv * sg * ul[i]
			}
		})
		xo := a.xs[2*l+2]
		f.linear(xo, a.s[l], w.wd, nil, n, d, fd, false)
		for i := range xo {
			xo[i] += xm[i]
		}
	}
	rmsFwd(a.hF, a.rF, a.xs[2*cfg.NumLayers], f.w.norm, n, d, cfg.RMSNormEps)
	return nil
}

// logitsAt writes the LM head's output for the nc positions pos into f.lg (nc × vocab).
func (f *fastPass) logitsAt(pos []int) {
	d, V := f.cfg.HiddenSize, f.cfg.VocabSize
	for i, t := range pos {
		copy(f.hc[i*d:(i+1)*d], f.a.hF[t*d:(t+1)*d])
	}
	m := kernels.F32Mat(V, d, f.w.head)
	kernels.MatMul(f.pool, f.lg[:len(pos)*V], &m, f.hc[:len(pos)*d], len(pos), f.s)
}

// lossGrad is core.lossGrad on the kernels: the summed cross-entropy of the targets of ids
// (mask nil: every next token) and its target count, accumulating the gradient into g's
// non-nil tensors. A nil g computes the loss only.
func (f *fastPass) lossGrad(ids []int, mask []bool, g *weights[float32]) (float64, int, error) {
	if mask != nil && len(mask) != len(ids) {
		return 0, 0, fmt.Errorf("loss mask of %d entries for %d tokens", len(mask), len(ids))
	}
	if err := f.forward(ids); err != nil {
		return 0, 0, err
	}
	cfg := f.cfg
	a := &f.a
	n := len(ids)
	d, V := cfg.HiddenSize, cfg.VocabSize
	var pos []int
	for t := 0; t+1 < n; t++ {
		if mask == nil || mask[t+1] {
			pos = append(pos, t)
		}
	}
	lowest := f.lowest(g)
	// dH is needed where anything below the head trains: the final norm or a block.
	wantDH := g != nil && (g.norm != nil || lowest < cfg.NumLayers)
	var loss float64
	for c0 := 0; c0 < len(pos); c0 += headChunk {
		pc := pos[c0:min(len(pos), c0+headChunk)]
		nc := len(pc)
		f.logitsAt(pc)
		lg := f.lg[:nc*V]
		f.pool.Run(nc, 1, func(_, lo, hi int) {
			for i := lo; i < hi; i++ {
				row := lg[i*V : (i+1)*V]
				target := ids[pc[i]+1]
				mx, tl := row[0], row[target]
				for _, v := range row {
					mx = max(mx, v)
				}
				var sum float64
				for j, v := range row {
					e := expNeg(v - mx)
					row[j] = e
					sum += float64(e)
				}
				f.rowLoss[i] = math.Log(sum) + float64(mx) - float64(tl)
				if g == nil {
					continue
				}
				// d loss/d logits = softmax − onehot(target).
				inv := 1 / sum
				for j, e := range row {
					row[j] = float32(float64(e) * inv)
				}
				row[target]--
			}
		})
		for i := range nc {
			loss += f.rowLoss[i]
		}
		if g == nil {
			continue
		}
		hc := f.hc[:nc*d]
		if wantDH {
			dhc := f.dhc[:nc*d]
			kernels.GemmNN(f.pool, nc, d, V, lg, V, f.w.head, d, dhc, d, false)
			for i, t := range pc {
				copy(a.dh[t*d:(t+1)*d], dhc[i*d:(i+1)*d])
			}
		}
		if g.head != nil {
			kernels.GemmTN(f.pool, V, d, nc, lg, V, hc, d, g.head, d, true)
		}
	}
	count := len(pos)
	if count == 0 || g == nil || !wantDH {
		return loss, count, nil
	}
	dx := a.dx
	rmsBwd(dx, f.normGrad(g.norm, d), a.dh, a.xs[cfg.NumLayers*2], a.rF, f.w.norm, n, d)
	for l := cfg.NumLayers - 1; l >= lowest; l-- {
		// Below the lowest trainable block, dX is needed only for the embeddings.
		f.layerBack(l, ids, &g.layers[l], l > lowest || g.embed != nil)
	}
	if g.embed != nil {
		for t, id := range ids {
			axpy(g.embed[id*d:(id+1)*d], 1, dx[t*d:(t+1)*d])
		}
	}
	return loss, count, nil
}

// lowest is the lowest block the backward pass has to reach: 0 when the embeddings train,
// else the lowest block with a trainable tensor (NumLayers: none).
func (f *fastPass) lowest(g *weights[float32]) int {
	L := f.cfg.NumLayers
	if g == nil {
		return L
	}
	if g.embed != nil {
		return 0
	}
	for l := range L {
		gw := &g.layers[l]
		for _, t := range [][]float32{gw.attnNorm, gw.wq, gw.wk, gw.wv, gw.bq, gw.bk, gw.bv, gw.qNorm, gw.kNorm, gw.wo, gw.mlpNorm, gw.wg, gw.wu, gw.wd} {
			if t != nil {
				return l
			}
		}
	}
	return L
}

// normGrad is dw, or a scratch buffer to throw the gradient of a frozen norm into.
func (f *fastPass) normGrad(dw []float32, size int) []float32 {
	if dw != nil {
		return dw
	}
	b := f.dwNorm[:size]
	clear(b)
	return b
}

// layerBack maps dx (the gradient at block l's output) to the gradient at its input,
// accumulating block l's weight gradients into gw's non-nil tensors. Without needIn the
// input gradient is not finished (the products that only feed it are skipped).
func (f *fastPass) layerBack(l int, ids []int, gw *layerW[float32], needIn bool) {
	cfg := f.cfg
	a := &f.a
	n := len(ids)
	d, fd, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim
	nh, nkv := cfg.NumHeads, cfg.NumKVHeads
	qd, kvd := nh*hd, nkv*hd
	half := hd / 2
	w := &f.w.layers[l]
	dx, dh := a.dx, a.dh

	// MLP: x_out = x_mid + down(silu(gate(h)) ⊙ up(h)), h = norm(x_mid).
	dS := a.dS
	f.linearBack(dS, false, gw.wd, nil, dx, a.s[l], w.wd, n, d, fd)
	gl, ul, du, dg, sig := a.g[l], a.u[l], a.du, a.dg, f.sig[l]
	f.par(n*fd, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			gv, sg := gl[i], sig[i]
			du[i] = dS[i] * gv * sg
			dg[i] = dS[i] * ul[i] * sg * (1 + gv*(1-sg))
		}
	})
	f.linearBack(dh, false, gw.wg, nil, dg, a.hM[l], w.wg, n, fd, d)
	f.linearBack(dh, true, gw.wu, nil, du, a.hM[l], w.wu, n, fd, d)
	rmsBwd(dx, f.normGrad(gw.mlpNorm, d), dh, a.xs[2*l+1], a.rM[l], w.mlpNorm, n, d)

	// Attention: x_mid = x_in + o(softmax(q·kᵀ/√d)·v).
	dctx := a.dctx
	f.linearBack(dctx, false, gw.wo, nil, dx, a.ctx[l], w.wo, n, d, qd)
	q, k, v, p := a.q[l], a.k[l], a.v[l], a.p[l]
	dq, dk, dv := a.dq, a.dk, a.dv
	scale := float32(1 / math.Sqrt(float64(hd)))
	group := nh / nkv
	f.pool.Run(nh, 1, func(wk, lo, hi int) {
		vt, ds := f.kt[wk], f.sc[wk]
		for h := lo; h < hi; h++ {
			g := h / group
			ph := p[h*n*n : (h+1)*n*n]
			transposeHead(vt, v, n, kvd, g*hd, hd)
			for r0 := 0; r0 < n; r0 += attnStripe {
				r1 := min(n, r0+attnStripe)
				// dP = dO·Vᵀ, then dS = P ⊙ (dP − Σ P⊙dP)·scale in place.
				kernels.GemmNN(nil, r1-r0, r1, hd, dctx[r0*qd+h*hd:], qd, vt, n, ds[r0*n:], n, false)
				for t := r0; t < r1; t++ {
					row, pr := ds[t*n:t*n+r1], ph[t*n:t*n+r1]
					first := f.window(t)
					var sum float32
					for j := first; j <= t; j++ {
						sum += pr[j] * row[j]
					}
					for j := range row {
						if j < first || j > t {
							row[j] = 0
						} else {
							row[j] = pr[j] * (row[j] - sum) * scale
						}
					}
				}
				// dQ = dS·K for the stripe's queries.
				kernels.GemmNN(nil, r1-r0, hd, r1, ds[r0*n:], n, k[g*hd:], kvd, dq[r0*qd+h*hd:], qd, false)
			}
			dkh, dvh := f.dkh[h*n*hd:(h+1)*n*hd], f.dvh[h*n*hd:(h+1)*n*hd]
			for j0 := 0; j0 < n; j0 += attnStripe {
				j1 := min(n, j0+attnStripe)
				// Keys j0..j1-1 are seen by queries j0..n-1: dK = dSᵀ·Q, dV = Pᵀ·dO.
				kernels.GemmTN(nil, j1-j0, hd, n-j0, ds[j0*n+j0:], n, q[j0*qd+h*hd:], qd, dkh[j0*hd:], hd, false)
				kernels.GemmTN(nil, j1-j0, hd, n-j0, ph[j0*n+j0:], n, dctx[j0*qd+h*hd:], qd, dvh[j0*hd:], hd, false)
			}
		}
	})
	// The heads of a KV group add up, in head order.
	for t := range n {
		for g := range nkv {
			dkr, dvr := dk[(t*nkv+g)*hd:(t*nkv+g+1)*hd], dv[(t*nkv+g)*hd:(t*nkv+g+1)*hd]
			copy(dkr, f.dkh[(g*group*n+t)*hd:][:hd])
			copy(dvr, f.dvh[(g*group*n+t)*hd:][:hd])
			for h := g*group + 1; h < (g+1)*group; h++ {
				axpy(dkr, 1, f.dkh[(h*n+t)*hd:][:hd])
				axpy(dvr, 1, f.dvh[(h*n+t)*hd:][:hd])
			}
		}
	}
	for t := range n {
		cs, sn := a.cos[t*half:(t+1)*half], a.sin[t*half:(t+1)*half]
		for h := range nh {
			ropeBwd(dq[(t*nh+h)*hd:(t*nh+h+1)*hd], cs, sn)
		}
		for h := range nkv {
			ropeBwd(dk[(t*nkv+h)*hd:(t*nkv+h+1)*hd], cs, sn)
		}
	}
	if w.qNorm != nil {
		dqr, dkr := a.dqr, a.dkr
		clear(dqr)
		clear(dkr)
		rmsBwd(dqr, f.normGrad(gw.qNorm, hd), dq, a.qRaw[l], a.rq[l], w.qNorm, n*nh, hd)
		rmsBwd(dkr, f.normGrad(gw.kNorm, hd), dk, a.kRaw[l], a.rk[l], w.kNorm, n*nkv, hd)
		copy(dq, dqr)
		copy(dk, dkr)
	}
	var din []float32
	if needIn || gw.attnNorm != nil {
		din = dh
	}
	f.linearBack(din, false, gw.wq, gw.bq, dq, a.hA[l], w.wq, n, qd, d)
	f.linearBack(din, true, gw.wk, gw.bk, dk, a.hA[l], w.wk, n, kvd, d)
	f.linearBack(din, true, gw.wv, gw.bv, dv, a.hA[l], w.wv, n, kvd, d)
	if din != nil {
		rmsBwd(dx, f.normGrad(gw.attnNorm, d), dh, a.xs[2*l], a.rA[l], w.attnNorm, n, d)
	}
}
