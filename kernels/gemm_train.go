package kernels

import "fmt"

// The products of training. A linear layer over a sequence (tokens as rows) needs three:
// Y = X·Wᵀ (forward, MatMul), dX = dY·W (GemmNN) and dW += dYᵀ·X (GemmTN). The two
// backward ones are A·B with B's rows contiguous: the broadcast form, in AVX2 assembly
// (gemm_train_amd64.s, written by gemm_train_gen.go): per step along k, six A elements are
// broadcast against one 16-float row piece of B into twelve 8-lane accumulators held in
// registers for the whole k piece. NN and TN differ only in A's strides (A's row i, column
// kk at a[i·lda+kk] or a[kk·lda+i]), which the kernel takes as arguments. Plain Go
// (gemmGo) does the rest and everything under ISAGo.
//
// Blocking: k is cut into gemmKC-long pieces; the output is read and written once per piece
// (acc after the first). Within a piece the smaller operand's loop is the outer one: a B
// panel (gemmKC rows × 16 columns, 16 KiB) stays in L1 while every row block passes over
// it, or, when A has more rows than B has columns (a weight matrix times a sequence), a row
// block of A (6 × gemmKC) stays in L1 while the panels of B pass. Work is
// split across the pool's workers by row blocks of C, or by 64-column panels when C has too
// few rows for that: each output element is computed by the same calls in the same order
// whatever the thread count, so results do not depend on it.
//
// BenchmarkGemmTrain (gemm_train_test.go) measures both against the plain-Go path.

// gemmKC is the k-blocking of GemmNN and GemmTN.
const gemmKC = 256

// GemmNN sets C = A·B (or adds A·B to C when acc): C is m×n with row i at c[i·ldc:], A is
// m×k with row i at a[i·lda:], B is k×n with row kk at b[kk·ldb:]. p may be nil (run on the
// calling goroutine); it must not be a pool whose Run is in progress (a worker of one).
func GemmNN(p *Pool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	gemmCheck("GemmNN", m, n, k, len(a), m, k, lda, len(b), ldb, len(c), ldc)
	gemmBcast(p, m, n, k, a, lda, 1, b, ldb, c, ldc, acc)
}

// GemmTN sets C = Aᵀ·B (or adds it when acc): A is stored k×m (row kk at a[kk·lda:]), so
// C's row i is Σ_kk A[kk,i]·B[kk,:]; B and C as in GemmNN. With A = dY (tokens × outputs)
// and B = X (tokens × inputs) it is a linear layer's weight gradient dW += dYᵀ·X.
func GemmTN(p *Pool, m, n, k int, a []float32, lda int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	gemmCheck("GemmTN", m, n, k, len(a), k, m, lda, len(b), ldb, len(c), ldc)
	gemmBcast(p, m, n, k, a, 1, lda, b, ldb, c, ldc, acc)
}

// gemmCheck panics with the shapes when a slice is too short or a stride too small: a
// caller's bug, which would otherwise surface as an index panic deep in a kernel.
func gemmCheck(what string, m, n, k, la, ar, ac, lda, lb, ldb, lc, ldc int) {
	bad := m < 0 || n < 0 || k < 0 || lda < ac || ldb < n || ldc < n
	if !bad && m > 0 && n > 0 && k > 0 {
		bad = la < (ar-1)*lda+ac || lb < (k-1)*ldb+n
	}
	if !bad && m > 0 && n > 0 {
		bad = lc < (m-1)*ldc+n
	}
	if bad {
		panic(fmt.Sprintf("kernels.%s: m=%d n=%d k=%d with len(a)=%d lda=%d, len(b)=%d ldb=%d, len(c)=%d ldc=%d", what, m, n, k, la, lda, lb, ldb, lc, ldc))
	}
}

// gemmBcast is C[m×n] (+)= A·B with A element (i, kk) at a[i·ars+kk·aks], split over p.
func gemmBcast(p *Pool, m, n, k int, a []float32, ars, aks int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if m == 0 || n == 0 {
		return
	}
	if k == 0 {
		if !acc {
			for i := range m {
				clear(c[i*ldc : i*ldc+n])
			}
		}
		return
	}
	tile := func(r0, r1, c0, c1 int) { gemmTile(r0, r1, c0, c1, k, a, ars, aks, b, ldb, c, ldc, acc) }
	threads := 1
	if p != nil {
		threads = p.Threads()
	}
	switch {
	case threads == 1:
		tile(0, m, 0, n)
	case m/4 >= 4*threads || n < 64*threads:
		p.Run(m, 4, func(_, lo, hi int) { tile(lo, hi, 0, n) })
	default:
		p.Run(n, 64, func(_, lo, hi int) { tile(0, m, lo, hi) })
	}
}

// gemmTile computes rows [r0,r1) × columns [c0,c1) of C: 16-column panels in the
// assembly's 6×16 tiles (a last tile of fewer rows), the columns past them in plain Go.
func gemmTile(r0, r1, c0, c1, k int, a []float32, ars, aks int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	c16 := c0
	if gemmAsm() {
		c16 = c0 + (c1-c0)&^15
	}
	for k0 := 0; k0 < k; k0 += gemmKC {
		kn := min(gemmKC, k-k0)
		fresh := !acc && k0 == 0
		if r1-r0 > c1-c0 {
			// A's piece is the larger: each row block's (6×gemmKC, in L1) meets every panel
			// of B's piece (from L2), and A streams from memory once.
			for i := r0; i < r1; i += gemmTileRows {
				for j := c0; j < c16; j += 16 {
					asmGemmTile(min(gemmTileRows, r1-i), c[i*ldc+j:], ldc, a[i*ars+k0*aks:], ars, aks, b[k0*ldb+j:], ldb, kn, fresh)
				}
			}
		} else {
			for j := c0; j < c16; j += 16 {
				for i := r0; i < r1; i += gemmTileRows {
					asmGemmTile(min(gemmTileRows, r1-i), c[i*ldc+j:], ldc, a[i*ars+k0*aks:], ars, aks, b[k0*ldb+j:], ldb, kn, fresh)
				}
			}
		}
		if c16 < c1 {
			gemmGo(r0, r1, c16, c1, k0, kn, a, ars, aks, b, ldb, c, ldc, fresh)
		}
	}
}

// gemmGo is the plain-Go tile: rows [r0,r1) × columns [c0,c1) over the k piece
// [k0, k0+kn). It runs where the assembly does not (ISAGo, other architectures) and for
// the columns past the last 16-column panel. Separate multiplies and adds, not fma32 (a
// float64 fused multiply-add, ten times slower in plain Go): its sums differ from the
// assembly's in the last bits, as every float product's do between ISAs.
func gemmGo(r0, r1, c0, c1, k0, kn int, a []float32, ars, aks int, b []float32, ldb int, c []float32, ldc int, fresh bool) {
	for i := r0; i < r1; i++ {
		cr := c[i*ldc+c0 : i*ldc+c1]
		if fresh {
			clear(cr)
		}
		kk := k0
		for ; kk+4 <= k0+kn; kk += 4 {
			a0, a1, a2, a3 := a[i*ars+kk*aks], a[i*ars+(kk+1)*aks], a[i*ars+(kk+2)*aks], a[i*ars+(kk+3)*aks]
			b0 := b[kk*ldb+c0 : kk*ldb+c1]
			b1 := b[(kk+1)*ldb+c0 : (kk+1)*ldb+c1]
			b2 := b[(kk+2)*ldb+c0 : (kk+2)*ldb+c1]
			b3 := b[(kk+3)*ldb+c0 : (kk+3)*ldb+c1]
			b0, b1, b2, b3 = b0[:len(cr)], b1[:len(cr)], b2[:len(cr)], b3[:len(cr)]
			for j := range cr {
				cr[j] += a0*b0[j] + a1*b1[j] + a2*b2[j] + a3*b3[j]
			}
		}
		for ; kk < k0+kn; kk++ {
			av := a[i*ars+kk*aks]
			br := b[kk*ldb+c0 : kk*ldb+c1]
			br = br[:len(cr)]
			for j := range cr {
				cr[j] += av * br[j]
			}
		}
	}
}
