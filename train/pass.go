package train

import (
	"fmt"
	"math"

	"github.com/tokenwise/tokenwise/model"
)

// Float is the element type of a pass: float32 to train, float64 to check gradients.
type Float interface{ ~float32 | ~float64 }

// layerW is one decoder block's weights (or their gradients): slices of a flat buffer.
type layerW[T Float] struct {
	attnNorm, wq, wk, wv, bq, bk, bv, qNorm, kNorm, wo []T
	mlpNorm, wg, wu, wd                                []T
}

// weights is a whole net's weights (or gradients) as slices of one flat buffer.
type weights[T Float] struct {
	embed, norm, head []T // head aliases embed when embeddings are tied
	layers            []layerW[T]
}

// bind cuts buf into the tensors of specs.
func bind[T Float](cfg *model.Config, specs []Spec, buf []T) weights[T] {
	by := make(map[string][]T, len(specs))
	for _, s := range specs {
		by[s.Name] = buf[s.Off : s.Off+s.N : s.Off+s.N]
	}
	w := weights[T]{embed: by["model.embed_tokens.weight"], norm: by["model.norm.weight"], head: by["lm_head.weight"]}
	if cfg.TieEmbeddings {
		w.head = w.embed
	}
	w.layers = make([]layerW[T], cfg.NumLayers)
	for l := range w.layers {
		p := fmt.Sprintf("model.layers.%d.", l)
		w.layers[l] = layerW[T]{
			attnNorm: by[p+"input_layernorm.weight"],
			wq:       by[p+"self_attn.q_proj.weight"], wk: by[p+"self_attn.k_proj.weight"], wv: by[p+"self_attn.v_proj.weight"],
			bq: by[p+"self_attn.q_proj.bias"], bk: by[p+"self_attn.k_proj.bias"], bv: by[p+"self_attn.v_proj.bias"],
			qNorm: by[p+"self_attn.q_norm.weight"], kNorm: by[p+"self_attn.k_norm.weight"],
			wo:      by[p+"self_attn.o_proj.weight"],
			mlpNorm: by[p+"post_attention_layernorm.weight"],
			wg:      by[p+"mlp.gate_proj.weight"], wu: by[p+"mlp.up_proj.weight"], wd: by[p+"mlp.down_proj.weight"],
		}
	}
	return w
}

// core runs passes of one net in element type T.
type core[T Float] struct {
	cfg   *model.Config
	w     weights[T]
	freqs []float64
}

// acts holds one sequence's activations from the forward pass, kept for the backward pass,
// plus the backward pass's scratch. Buffers grow to the longest sequence and are reused.
type acts[T Float] struct {
	n  int
	xs [][]T // residual stream before each sublayer: xs[2l] before attention, xs[2l+1] before the MLP, xs[2L] at the end
	// per layer
	hA, rA, q, k, v, qRaw, kRaw, rq, rk, p, ctx, hM, rM, g, u, s [][]T
	hF, rF, cos, sin                                             []T
	// backward scratch
	dx, dh, dq, dk, dv, dctx, dg, du, dS, dp, dqr, dkr, probs []T
}

func grow[T Float](b []T, n int) []T {
	if cap(b) < n {
		return make([]T, n)
	}
	b = b[:n]
	clear(b)
	return b
}

func (a *acts[T]) reset(cfg *model.Config, n int) { a.resize(cfg, n, true) }

// resize is reset without zeroing the buffers when clean is false: the kernel pass writes
// every activation before reading it and zeroes the two gradients it accumulates into.
func (a *acts[T]) resize(cfg *model.Config, n int, clean bool) {
	grow := func(b []T, n int) []T {
		if cap(b) < n {
			return make([]T, n)
		}
		b = b[:n]
		if clean {
			clear(b)
		}
		return b
	}
	L, d, f := cfg.NumLayers, cfg.HiddenSize, cfg.IntermediateSize
	qd, kvd := cfg.NumHeads*cfg.HeadDim, cfg.NumKVHeads*cfg.HeadDim
	if len(a.xs) != 2*L+1 {
		a.xs = make([][]T, 2*L+1)
		for _, p := range []*[][]T{&a.hA, &a.rA, &a.q, &a.k, &a.v, &a.qRaw, &a.kRaw, &a.rq, &a.rk, &a.p, &a.ctx, &a.hM, &a.rM, &a.g, &a.u, &a.s} {
			*p = make([][]T, L)
		}
	}
	a.n = n
	for i := range a.xs {
		a.xs[i] = grow(a.xs[i], n*d)
	}
	for l := range L {
		a.hA[l], a.rA[l] = grow(a.hA[l], n*d), grow(a.rA[l], n)
		a.q[l], a.k[l], a.v[l] = grow(a.q[l], n*qd), grow(a.k[l], n*kvd), grow(a.v[l], n*kvd)
		if cfg.Arch().QKNorm {
			a.qRaw[l], a.kRaw[l] = grow(a.qRaw[l], n*qd), grow(a.kRaw[l], n*kvd)
			a.rq[l], a.rk[l] = grow(a.rq[l], n*cfg.NumHeads), grow(a.rk[l], n*cfg.NumKVHeads)
		}
		a.p[l] = grow(a.p[l], cfg.NumHeads*n*n)
		a.ctx[l] = grow(a.ctx[l], n*qd)
		a.hM[l], a.rM[l] = grow(a.hM[l], n*d), grow(a.rM[l], n)
		a.g[l], a.u[l], a.s[l] = grow(a.g[l], n*f), grow(a.u[l], n*f), grow(a.s[l], n*f)
	}
	a.hF, a.rF = grow(a.hF, n*d), grow(a.rF, n)
	half := cfg.HeadDim / 2
	a.cos, a.sin = grow(a.cos, n*half), grow(a.sin, n*half)
	a.dx, a.dh = grow(a.dx, n*d), grow(a.dh, n*d)
	a.dq, a.dk, a.dv, a.dctx = grow(a.dq, n*qd), grow(a.dk, n*kvd), grow(a.dv, n*kvd), grow(a.dctx, n*qd)
	a.dg, a.du, a.dS = grow(a.dg, n*f), grow(a.du, n*f), grow(a.dS, n*f)
	a.dp, a.probs = grow(a.dp, n), grow(a.probs, cfg.VocabSize)
	a.dqr, a.dkr = grow(a.dqr, n*qd), grow(a.dkr, n*kvd)
}

// dot is Σ a[i]·b[i] with four accumulators (independent add chains run in parallel).
func dot[T Float](a, b []T) T {
	b = b[:len(a)]
	var s0, s1, s2, s3 T
	i := 0
	for ; i+4 <= len(a); i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < len(a); i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpy does y += a·x.
func axpy[T Float](y []T, a T, x []T) {
	x = x[:len(y)]
	i := 0
	for ; i+4 <= len(y); i += 4 {
		y[i] += a * x[i]
		y[i+1] += a * x[i+1]
		y[i+2] += a * x[i+2]
		y[i+3] += a * x[i+3]
	}
	for ; i < len(y); i++ {
		y[i] += a * x[i]
	}
}

// dot4 returns the dot products of x with four rows at once: x is loaded once for four
// products, and the four sums are independent add chains.
func dot4[T Float](x, w0, w1, w2, w3 []T) (s0, s1, s2, s3 T) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	for i, xv := range x {
		s0 += xv * w0[i]
		s1 += xv * w1[i]
		s2 += xv * w2[i]
		s3 += xv * w3[i]
	}
	return
}

// axpy4 does y += a0·x0 + a1·x1 + a2·x2 + a3·x3: y is loaded and stored once for four terms.
func axpy4[T Float](y []T, a0, a1, a2, a3 T, x0, x1, x2, x3 []T) {
	n := len(y)
	x0, x1, x2, x3 = x0[:n], x1[:n], x2[:n], x3[:n]
	for i := range y {
		y[i] += a0*x0[i] + a1*x1[i] + a2*x2[i] + a3*x3[i]
	}
}

// linFwd writes out[t] = W·in[t] (+ b) for n rows; W is [rows, cols] row-major.
func linFwd[T Float](out, in, w, b []T, n, rows, cols int) {
	o := 0
	for ; o+4 <= rows; o += 4 {
		w0, w1, w2, w3 := w[o*cols:(o+1)*cols], w[(o+1)*cols:(o+2)*cols], w[(o+2)*cols:(o+3)*cols], w[(o+3)*cols:(o+4)*cols]
		for t := range n {
			s0, s1, s2, s3 := dot4(in[t*cols:(t+1)*cols], w0, w1, w2, w3)
			r := out[t*rows+o : t*rows+o+4]
			r[0], r[1], r[2], r[3] = s0, s1, s2, s3
		}
	}
	for ; o < rows; o++ {
		wr := w[o*cols : (o+1)*cols]
		for t := range n {
			out[t*rows+o] = dot(in[t*cols:(t+1)*cols], wr)
		}
	}
	if b != nil {
		for t := range n {
			r := out[t*rows : (t+1)*rows]
			for o, bv := range b {
				r[o] += bv
			}
		}
	}
}

// linBwd accumulates din += dout·W, dW += doutᵀ·in and db += Σ dout over n rows. A nil din
// skips the input gradient.
func linBwd[T Float](din, dw, db, dout, in, w []T, n, rows, cols int) {
	if din != nil {
		for t := range n {
			d, g := din[t*cols:(t+1)*cols], dout[t*rows:(t+1)*rows]
			o := 0
			for ; o+4 <= rows; o += 4 {
				if g[o] == 0 && g[o+1] == 0 && g[o+2] == 0 && g[o+3] == 0 {
					continue
				}
				axpy4(d, g[o], g[o+1], g[o+2], g[o+3], w[o*cols:(o+1)*cols], w[(o+1)*cols:(o+2)*cols], w[(o+2)*cols:(o+3)*cols], w[(o+3)*cols:(o+4)*cols])
			}
			for ; o < rows; o++ {
				axpy(d, g[o], w[o*cols:(o+1)*cols])
			}
		}
	}
	for o := range rows {
		dwr := dw[o*cols : (o+1)*cols]
		t := 0
		for ; t+4 <= n; t += 4 {
			g0, g1, g2, g3 := dout[t*rows+o], dout[(t+1)*rows+o], dout[(t+2)*rows+o], dout[(t+3)*rows+o]
			if g0 == 0 && g1 == 0 && g2 == 0 && g3 == 0 {
				continue
			}
			axpy4(dwr, g0, g1, g2, g3, in[t*cols:(t+1)*cols], in[(t+1)*cols:(t+2)*cols], in[(t+2)*cols:(t+3)*cols], in[(t+3)*cols:(t+4)*cols])
		}
		for ; t < n; t++ {
			axpy(dwr, dout[t*rows+o], in[t*cols:(t+1)*cols])
		}
		if db != nil {
			for t := range n {
				db[o] += dout[t*rows+o]
			}
		}
	}
}

// rmsFwd writes out = x·r·w per row of size d and r = 1/sqrt(mean(x²)+eps) into rs.
func rmsFwd[T Float](out, rs, x, w []T, n, d int, eps float64) {
	for t := range n {
		xr := x[t*d : (t+1)*d]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		r := T(1 / math.Sqrt(ss/float64(d)+eps))
		rs[t] = r
		or := out[t*d : (t+1)*d]
		for i, v := range xr {
			or[i] = v * r * w[i]
		}
	}
}

// rmsBwd accumulates dx += ∂/∂x and dw += ∂/∂w of y = x·r(x)·w given dy:
// dx = r·(dy⊙w) − x·r³·Σ(dy⊙w⊙x)/d.
func rmsBwd[T Float](dx, dw, dy, x, rs, w []T, n, d int) {
	for t := range n {
		xr, dyr, dxr := x[t*d:(t+1)*d], dy[t*d:(t+1)*d], dx[t*d:(t+1)*d]
		r := rs[t]
		var s T
		for i, v := range xr {
			a := dyr[i] * w[i]
			s += a * v
			dw[i] += dyr[i] * v * r
		}
		c := r * r * r * s / T(d)
		for i, v := range xr {
			dxr[i] += r*dyr[i]*w[i] - c*v
		}
	}
}

// ropeFwd rotates a head in place (rotate_half layout, as model and HF): element i with i+d/2.
func ropeFwd[T Float](x, cos, sin []T) {
	h := len(x) / 2
	for i := range h {
		x0, x1 := x[i], x[i+h]
		x[i] = x0*cos[i] - x1*sin[i]
		x[i+h] = x0*sin[i] + x1*cos[i]
	}
}

// ropeBwd maps a gradient through the rotation: the transpose, a rotation by −angle.
func ropeBwd[T Float](dx, cos, sin []T) {
	h := len(dx) / 2
	for i := range h {
		d0, d1 := dx[i], dx[i+h]
		dx[i] = d0*cos[i] + d1*sin[i]
		dx[i+h] = -d0*sin[i] + d1*cos[i]
	}
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }

// window returns the first position token t may attend to.
func (c *core[T]) window(t int) int {
	if w := c.cfg.SlidingWindow; w > 0 && t-w+1 > 0 {
		return t - w + 1
	}
	return 0
}

// forward runs ids through the net, keeping what the backward pass needs in a.
func (c *core[T]) forward(ids []int, a *acts[T]) error {
	cfg := c.cfg
	n := len(ids)
	if n > cfg.MaxPositions {
		return fmt.Errorf("sequence of %d tokens: longer than max_position_embeddings %d", n, cfg.MaxPositions)
	}
	a.reset(cfg, n)
	d, f, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim
	nh, nkv := cfg.NumHeads, cfg.NumKVHeads
	qd, kvd := nh*hd, nkv*hd
	half := hd / 2
	for t, id := range ids {
		if id < 0 || id >= cfg.VocabSize {
			return fmt.Errorf("token %d at position %d: outside the vocabulary (size %d)", id, t, cfg.VocabSize)
		}
		copy(a.xs[0][t*d:(t+1)*d], c.w.embed[id*d:(id+1)*d])
		for i, fr := range c.freqs {
			s, co := math.Sincos(float64(t) * fr)
			// The engine forms angles in float64 and rounds them to float32.
			a.cos[t*half+i], a.sin[t*half+i] = T(float32(co)), T(float32(s))
		}
	}
	scale := T(1 / math.Sqrt(float64(hd)))
	group := nh / nkv
	for l := range cfg.NumLayers {
		w := &c.w.layers[l]
		x := a.xs[2*l]
		rmsFwd(a.hA[l], a.rA[l], x, w.attnNorm, n, d, cfg.RMSNormEps)
		q, k, v := a.q[l], a.k[l], a.v[l]
		linFwd(q, a.hA[l], w.wq, w.bq, n, qd, d)
		linFwd(k, a.hA[l], w.wk, w.bk, n, kvd, d)
		linFwd(v, a.hA[l], w.wv, w.bv, n, kvd, d)
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
		for h := range nh {
			g := h / group
			for t := range n {
				qh := q[(t*nh+h)*hd : (t*nh+h+1)*hd]
				row := p[(h*n+t)*n : (h*n+t+1)*n]
				first := c.window(t)
				mx := T(math.Inf(-1))
				for j := first; j <= t; j++ {
					row[j] = dot(qh, k[(j*nkv+g)*hd:(j*nkv+g+1)*hd]) * scale
					mx = max(mx, row[j])
				}
				var sum float64
				for j := first; j <= t; j++ {
					e := T(math.Exp(float64(row[j] - mx)))
					row[j] = e
					sum += float64(e)
				}
				inv := T(1 / sum)
				out := ctx[(t*nh+h)*hd : (t*nh+h+1)*hd]
				for j := first; j <= t; j++ {
					row[j] *= inv
					axpy(out, row[j], v[(j*nkv+g)*hd:(j*nkv+g+1)*hd])
				}
			}
		}
		xm := a.xs[2*l+1]
		linFwd(xm, ctx, w.wo, nil, n, d, qd)
		for i := range xm {
			xm[i] += x[i]
		}
		rmsFwd(a.hM[l], a.rM[l], xm, w.mlpNorm, n, d, cfg.RMSNormEps)
		linFwd(a.g[l], a.hM[l], w.wg, nil, n, f, d)
		linFwd(a.u[l], a.hM[l], w.wu, nil, n, f, d)
		for i, gv := range a.g[l] {
			a.s[l][i] = gv * T(sigmoid(float64(gv))) * a.u[l][i]
		}
		xo := a.xs[2*l+2]
		linFwd(xo, a.s[l], w.wd, nil, n, d, f)
		for i := range xo {
			xo[i] += xm[i]
		}
	}
	rmsFwd(a.hF, a.rF, a.xs[2*cfg.NumLayers], c.w.norm, n, d, cfg.RMSNormEps)
	return nil
}

// logits writes the LM head's output for position t into out (len vocab).
func (c *core[T]) logits(a *acts[T], t int, out []T) {
	d := c.cfg.HiddenSize
	h := a.hF[t*d : (t+1)*d]
	for v := range c.cfg.VocabSize {
		out[v] = dot(h, c.w.head[v*d:(v+1)*d])
	}
}

// lossGrad runs the forward and backward passes of one sequence and accumulates into g the
// gradient of the summed cross-entropy of every target: position t predicts ids[t+1], and
// counts when mask is nil or mask[t+1]. It returns the summed loss and the target count.
// A nil g computes the loss only.
func (c *core[T]) lossGrad(ids []int, mask []bool, g *weights[T], a *acts[T]) (float64, int, error) {
	if mask != nil && len(mask) != len(ids) {
		return 0, 0, fmt.Errorf("loss mask of %d entries for %d tokens", len(mask), len(ids))
	}
	if err := c.forward(ids, a); err != nil {
		return 0, 0, err
	}
	cfg := c.cfg
	n := len(ids)
	d, f, hd := cfg.HiddenSize, cfg.IntermediateSize, cfg.HeadDim
	nh, nkv := cfg.NumHeads, cfg.NumKVHeads
	qd, kvd := nh*hd, nkv*hd
	half := hd / 2
	V := cfg.VocabSize

	// Cross-entropy: d loss/d logits = softmax − onehot(target); only target rows get a gradient.
	var loss float64
	count := 0
	dh := a.dh
	for t := 0; t+1 < n; t++ {
		if mask != nil && !mask[t+1] {
			continue
		}
		count++
		target := ids[t+1]
		lg := a.probs
		c.logits(a, t, lg)
		mx, tl := lg[0], lg[target]
		for _, v := range lg {
			mx = max(mx, v)
		}
		var sum float64
		for i, v := range lg {
			e := math.Exp(float64(v - mx))
			lg[i] = T(e)
			sum += e
		}
		loss += math.Log(sum) + float64(mx) - float64(tl)
		inv := 1 / sum
		hF := a.hF[t*d : (t+1)*d]
		dhr := dh[t*d : (t+1)*d]
		for v := range V {
			gv := T(float64(lg[v]) * inv)
			if v == target {
				gv--
			}
			if g == nil {
				break
			}
			axpy(dhr, gv, c.w.head[v*d:(v+1)*d])
			axpy(g.head[v*d:(v+1)*d], gv, hF)
		}
	}
	if count == 0 || g == nil {
		return loss, count, nil
	}
	dx := a.dx
	rmsBwd(dx, g.norm, dh, a.xs[2*cfg.NumLayers], a.rF, c.w.norm, n, d)

	scale := T(1 / math.Sqrt(float64(hd)))
	group := nh / nkv
	for l := cfg.NumLayers - 1; l >= 0; l-- {
		w, gw := &c.w.layers[l], &g.layers[l]
		// MLP: x_out = x_mid + down(silu(gate(h)) ⊙ up(h)), h = norm(x_mid).
		dS := a.dS
		clear(dS)
		linBwd(dS, gw.wd, nil, dx, a.s[l], w.wd, n, d, f)
		for i, gv := range a.g[l] {
			sg := T(sigmoid(float64(gv)))
			silu := gv * sg
			a.du[i] = dS[i] * silu
			a.dg[i] = dS[i] * a.u[l][i] * sg * (1 + gv*(1-sg))
		}
		clear(dh)
		linBwd(dh, gw.wg, nil, a.dg, a.hM[l], w.wg, n, f, d)
		linBwd(dh, gw.wu, nil, a.du, a.hM[l], w.wu, n, f, d)
		rmsBwd(dx, gw.mlpNorm, dh, a.xs[2*l+1], a.rM[l], w.mlpNorm, n, d)

		// Attention: x_mid = x_in + o(softmax(q·kᵀ/√d)·v).
		dctx := a.dctx
		clear(dctx)
		linBwd(dctx, gw.wo, nil, dx, a.ctx[l], w.wo, n, d, qd)
		q, k, v, p := a.q[l], a.k[l], a.v[l], a.p[l]
		dq, dk, dv := a.dq, a.dk, a.dv
		clear(dq)
		clear(dk)
		clear(dv)
		for h := range nh {
			gi := h / group
			for t := range n {
				row := p[(h*n+t)*n : (h*n+t+1)*n]
				do := dctx[(t*nh+h)*hd : (t*nh+h+1)*hd]
				first := c.window(t)
				var sum T
				dp := a.dp // dL/dP for this row
				for j := first; j <= t; j++ {
					dp[j] = dot(do, v[(j*nkv+gi)*hd:(j*nkv+gi+1)*hd])
					sum += row[j] * dp[j]
					axpy(dv[(j*nkv+gi)*hd:(j*nkv+gi+1)*hd], row[j], do)
				}
				qh, dqh := q[(t*nh+h)*hd:(t*nh+h+1)*hd], dq[(t*nh+h)*hd:(t*nh+h+1)*hd]
				for j := first; j <= t; j++ {
					ds := row[j] * (dp[j] - sum) * scale
					if ds == 0 {
						continue
					}
					axpy(dqh, ds, k[(j*nkv+gi)*hd:(j*nkv+gi+1)*hd])
					axpy(dk[(j*nkv+gi)*hd:(j*nkv+gi+1)*hd], ds, qh)
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
			// Per-head RMSNorm of q and k before RoPE (Qwen3): dq, dk are w.r.t. its output.
			dqr, dkr := a.dqr, a.dkr
			clear(dqr)
			clear(dkr)
			rmsBwd(dqr, gw.qNorm, dq, a.qRaw[l], a.rq[l], w.qNorm, n*nh, hd)
			rmsBwd(dkr, gw.kNorm, dk, a.kRaw[l], a.rk[l], w.kNorm, n*nkv, hd)
			copy(dq, dqr)
			copy(dk, dkr)
		}
		clear(dh)
		linBwd(dh, gw.wq, gw.bq, dq, a.hA[l], w.wq, n, qd, d)
		linBwd(dh, gw.wk, gw.bk, dk, a.hA[l], w.wk, n, kvd, d)
		linBwd(dh, gw.wv, gw.bv, dv, a.hA[l], w.wv, n, kvd, d)
		rmsBwd(dx, gw.attnNorm, dh, a.xs[2*l], a.rA[l], w.attnNorm, n, d)
	}
	for t, id := range ids {
		axpy(g.embed[id*d:(id+1)*d], 1, dx[t*d:(t+1)*d])
	}
	return loss, count, nil
}
