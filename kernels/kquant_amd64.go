//go:build amd64

package kernels

import (
	"golang.org/x/sys/cpu"

	"github.com/tokenwise/tokenwise/tensor"
)

// The k-quant row kernels (kquant_amd64.s), AVX2: a block of rows times up to kqTokens
// tokens per call, accumulating in acc (16 float32 per row and token) what asmKQuantRows
// finishes (the lane sums of ggml's order).

//go:noescape
func q4KRowAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)

//go:noescape
func q5KRowAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)

//go:noescape
func q6KRowAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)

// Where useVNNI is on (AVX-512 BW, VL and VNNI): the same in 512-bit vectors, two runs of 32
// in each (kquant_amd64.s says why and what they measured against the 256-bit VPDPWSSD
// kernels they replaced). The same bits as the AVX2 kernels.

//go:noescape
func q4KRowZMM(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)

//go:noescape
func q6KRowZMM(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)

//go:noescape
func q5KRowZMM(w *byte, nb int, q *int8, d *float32, bs *int16, nt int, acc *float32, rows, rowBytes int)

// q4KDecodeZMM is the decode (one-token) Q4_K product where useVNNI is on
// (kquant_dec_amd64.s): pairs pairs of rows, each row's result to out, over the token's
// activations as prepDecode lays them out (q permuted, ps the bsums' pair sums). The same
// bits as q4KRowZMM.
//
//go:noescape
func q4KDecodeZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)

// q6KDecodeZMM is the decode Q6_K product where useVNNI is on (kquant_dec_amd64.s): pairs
// pairs of rows, each row's result to out, over one token's Q8_K activations as quantize
// leaves them. The same bits as q6KRowZMM and kqRowsOut.
//
//go:noescape
func q6KDecodeZMM(w *byte, nb int, q *int8, d *float32, bs *int16, out *float32, pairs, rowBytes int)

// q5KDecodeZMM is q4KDecodeZMM for Q5_K (kquant_dec_amd64.s): the same activations, the
// bits of q5KRowZMM and kqRowsOut.
//
//go:noescape
func q5KDecodeZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)

// q4KDecodeAVX2 is q4KDecodeZMM in 256-bit registers (kquant_dec_amd64.s), where useAsmQ8
// is on and useVNNI is not, over the activations in quantize's order (q) and prepDecode's
// pair sums (ps). The same bits as q4KRowAVX2.
//
//go:noescape
func q4KDecodeAVX2(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)

// q6KDecodeAVX2 is q6KDecodeZMM in 256-bit registers (kquant_dec_amd64.s), where useAsmQ8
// is on and useVNNI is not. The same bits as q6KRowAVX2 and kqRowsOut.
//
//go:noescape
func q6KDecodeAVX2(w *byte, nb int, q *int8, d *float32, bs *int16, out *float32, pairs, rowBytes int)

// q5KDecodeAVX2 is q5KDecodeZMM in 256-bit registers (kquant_dec_amd64.s), over the same
// activations as q4KDecodeAVX2. The same bits as q5KRowAVX2 and kqRowsOut.
//
//go:noescape
func q5KDecodeAVX2(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes int)

// q4KFewZMM is q4KDecodeZMM for nt tokens (1 to 8) at once (kquant_dec_amd64.s): token t's
// activations as prepDecode lays them out at t·nb super-blocks, its results at out[t·stride].
// Each token gets the bits q4KDecodeZMM gives it alone.
//
//go:noescape
func q4KFewZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes, nt, stride int)

// q6KFewZMM is q6KDecodeZMM for nt tokens (1 to 8) at once (kquant_dec_amd64.s), over
// quantize's activations; each token gets the bits q6KDecodeZMM gives it alone.
//
//go:noescape
func q6KFewZMM(w *byte, nb int, q *int8, d *float32, bs *int16, out *float32, pairs, rowBytes, nt, stride int)

// q5KFewZMM is q5KDecodeZMM for nt tokens (1 to 8) at once (kquant_dec_amd64.s), over
// prepDecode's activations; each token gets the bits q5KDecodeZMM gives it alone.
//
//go:noescape
func q5KFewZMM(w *byte, nb int, q *int8, d *float32, ps *int16, out *float32, pairs, rowBytes, nt, stride int)

// kqTokens is how many tokens a kernel call multiplies: a prefill chunk's activations for
// them (8·nb·256 bytes: 24 KiB at 3072 columns) stay in L1 while the call's rows run over
// them. A call takes kqAcc/(16·tokens) rows: 128 for one token (a decode product where the
// decode kernels do not run, or its odd last row), 16 in a prefill.
const (
	kqTokens = 8
	kqAcc    = 2048
)

// asmKQuantRows is kQuantRows in assembly, where useAsmQ8 is on (AVX2 and FMA, F16C for
// the block scales); it reports whether it ran. Q4_K passes of amxMinTokens or more go to
// the AMX tile where it runs (amx_amd64.go: whole blocks of 16 rows and 16 tokens), and
// the rest of a pass of eight tokens or more to the 512-bit or AVX2 prefill tile
// (kquant_tile.go) in whole groups of eight, the rest to the row kernels.
func asmKQuantRows(out []float32, w *Mat, a *qactK, n, lo, hi int) bool {
	if !useAsmQ8 || hi <= lo || n <= 0 {
		return false
	}
	switch w.DType {
	case tensor.Q4_K, tensor.Q5_K, tensor.Q6_K:
	default:
		return false
	}
	if w.DType == tensor.Q4_K && a.amx.n > 0 {
		// The AMX tile takes whole blocks of 16 rows times the first a.amx.n tokens; the
		// rows after them, and the tokens after a.amx.n, go the 512-bit way below.
		r := q4KAMXRows(out, w, &a.amx, lo, hi)
		if r > lo && a.amx.n < n {
			asmKQuantRowsFrom(out, w, a, n, a.amx.n, lo, r)
		}
		if r < hi {
			asmKQuantRowsFrom(out, w, a, n, 0, r, hi)
		}
		return true
	}
	return asmKQuantRowsFrom(out, w, a, n, 0, lo, hi)
}

// asmKQuantRowsFrom is asmKQuantRows without the AMX tile, for tokens [t0, n).
func asmKQuantRowsFrom(out []float32, w *Mat, a *qactK, n, t0, lo, hi int) bool {
	if lo = kqDecodeRows(out, w, a, n, lo, hi); lo == hi {
		return true
	}
	t1 := t0 // tokens [t0,t1) go to the Q4_K tile
	if w.DType == tensor.Q4_K && kqTile != kqTileOff && n-t0 >= 8 {
		t1 = t0 + (n-t0)/8*8
		q4KTileRows(out, w, a, t0, t1, lo, hi)
		if t1 == n {
			return true
		}
	}
	rows, nb := w.Rows, w.Cols/256
	var acc [kqAcc]float32
	block := kqAcc / (16 * min(n-t1, kqTokens))
	for r0 := lo; r0 < hi; r0 += block {
		nr := min(block, hi-r0)
		for t0 := t1; t0 < n; t0 += kqTokens {
			nt := min(kqTokens, n-t0)
			// Called directly, not through a func value: that would lose //go:noescape and
			// put acc on the heap, 8 KiB per call (the garbage collector then took half of a
			// Qwen3-0.6B Q4_K_M decode step).
			row, q, d, bs := &w.Data[r0*w.rowBytes], &a.q[t0*nb*256], &a.d[t0*nb], &a.bsums[t0*nb*16]
			if useVNNI && kqDecode && nr%2 == 0 {
				// A prompt's Q6_K and Q5_K products (no 512-bit tile for them): the
				// few-token kernels, eight tokens at a time, write out themselves.
				switch {
				case w.DType == tensor.Q6_K:
					q6KFewZMM(row, nb, q, d, bs, &out[t0*rows+r0], nr/2, w.rowBytes, nt, rows)
					continue
				case w.DType == tensor.Q5_K && a.dec:
					q5KFewZMM(row, nb, &a.dq[t0*nb*256], d, &a.dp[t0*nb*8], &out[t0*rows+r0], nr/2, w.rowBytes, nt, rows)
					continue
				}
			}
			switch {
			case w.DType == tensor.Q4_K && useVNNI:
				q4KRowZMM(row, nb, q, d, bs, nt, &acc[0], nr, w.rowBytes)
			case w.DType == tensor.Q4_K:
				q4KRowAVX2(row, nb, q, d, bs, nt, &acc[0], nr, w.rowBytes)
			case w.DType == tensor.Q5_K && useVNNI:
				q5KRowZMM(row, nb, q, d, bs, nt, &acc[0], nr, w.rowBytes)
			case w.DType == tensor.Q5_K:
				q5KRowAVX2(row, nb, q, d, bs, nt, &acc[0], nr, w.rowBytes)
			case useVNNI:
				q6KRowZMM(row, nb, q, d, bs, nt, &acc[0], nr, w.rowBytes)
			default:
				q6KRowAVX2(row, nb, q, d, bs, nt, &acc[0], nr, w.rowBytes)
			}
			kqRowsOut(out[t0*rows+r0:], rows, acc[:nr*nt*16], w.DType, nr, nt)
		}
	}
	return true
}

// kqDecodeRows runs the decode and few-token kernels on the rows of [lo,hi) they take, two
// at a time, and returns the first row left to the rows kernels. They run where kqDecode and
// useAsmQ8 are on: for one token the 512-bit kernels where useVNNI is on, else the AVX2 ones;
// for 2 to kqFew tokens the 512-bit few-token kernels only. Q4_K and Q5_K take the
// activations prepDecode lays out (kqDecodeLayout says when prepare made them).
func kqDecodeRows(out []float32, w *Mat, a *qactK, n, lo, hi int) int {
	nb, pairs := w.Cols/256, (hi-lo)/2
	if n < 1 || n > kqFew || n > 1 && !useVNNI || !useAsmQ8 || !kqDecode || nb == 0 || pairs == 0 {
		return lo
	}
	if w.DType != tensor.Q6_K && !a.dec {
		return lo
	}
	row, o := &w.Data[lo*w.rowBytes], &out[lo]
	switch {
	case n > 1 && w.DType == tensor.Q4_K:
		q4KFewZMM(row, nb, &a.dq[0], &a.d[0], &a.dp[0], o, pairs, w.rowBytes, n, w.Rows)
	case n > 1 && w.DType == tensor.Q5_K:
		q5KFewZMM(row, nb, &a.dq[0], &a.d[0], &a.dp[0], o, pairs, w.rowBytes, n, w.Rows)
	case n > 1:
		q6KFewZMM(row, nb, &a.q[0], &a.d[0], &a.bsums[0], o, pairs, w.rowBytes, n, w.Rows)
	case useVNNI && w.DType == tensor.Q4_K:
		q4KDecodeZMM(row, nb, &a.dq[0], &a.d[0], &a.dp[0], o, pairs, w.rowBytes)
	case useVNNI && w.DType == tensor.Q5_K:
		q5KDecodeZMM(row, nb, &a.dq[0], &a.d[0], &a.dp[0], o, pairs, w.rowBytes)
	case useVNNI:
		q6KDecodeZMM(row, nb, &a.q[0], &a.d[0], &a.bsums[0], o, pairs, w.rowBytes)
	case w.DType == tensor.Q4_K:
		q4KDecodeAVX2(row, nb, &a.q[0], &a.d[0], &a.dp[0], o, pairs, w.rowBytes)
	case w.DType == tensor.Q5_K:
		q5KDecodeAVX2(row, nb, &a.q[0], &a.d[0], &a.dp[0], o, pairs, w.rowBytes)
	default:
		q6KDecodeAVX2(row, nb, &a.q[0], &a.d[0], &a.bsums[0], o, pairs, w.rowBytes)
	}
	return lo + 2*pairs
}

// kqRowsOut finishes the rows kernels' accumulators (16 floats per row and token, rows
// after rows, a row's tokens after each other) into out, token t's row r at out[t·rows+r]:
// Q4_K's acc − accM, Q6_K's eight lanes summed in dotQ6_KAct's order (hsum8), Q5_K's and
// its minimums. The dtype is switched on once a token, not per value: per value, this
// loop was 3.7% of a Qwen3-0.6B Q4_K_M decode in pprof (256 steps, Ice Lake).
func kqRowsOut(out []float32, rows int, acc []float32, dt tensor.DType, nr, nt int) {
	for t := range nt {
		o := out[t*rows:][:nr]
		switch dt {
		case tensor.Q4_K:
			for r := range o {
				c := (*[2]float32)(acc[(r*nt+t)*16:])
				o[r] = c[0] - c[1]
			}
		case tensor.Q5_K:
			for r := range o {
				c := (*[9]float32)(acc[(r*nt+t)*16:])
				o[r] = hsum8((*[8]float32)(c[:8])) + c[8]
			}
		default:
			for r := range o {
				o[r] = hsum8((*[8]float32)(acc[(r*nt+t)*16:]))
			}
		}
	}
}

//go:noescape
func q8KQuantZMM(x *float32, nb int, d *float32, q *int8, bsums *int16)

// asmQuantizeQ8K is qactK.quantize's loop in AVX-512 (q8KQuantZMM) where it runs (VNNI
// and BW: the 512-bit k-quant tile's switch), reporting whether it did; the bits are the
// Go loop's (TestQuantizeQ8KZMM) for finite inputs (a NaN's quant is -128 here and 0 there;
// ggml's nearest_int leaves it undefined). Measured: the Go loop was 10% of a Qwen3-0.6B
// Q4_K_M prefill with the AMX tile.
func asmQuantizeQ8K(a *qactK, x []float32, nb int) bool {
	if kqTile != kqTileZMM || nb == 0 || !cpu.X86.HasBMI1 {
		return false
	}
	q8KQuantZMM(&x[0], nb, &a.d[0], &a.q[0], &a.bsums[0])
	return true
}
