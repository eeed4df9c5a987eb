package kernels

//go:generate go run smalln_gen.go

import (
	"os"

	"github.com/tokenwise/tokenwise/tensor"
)

// smallN selects the small-n quantized products (smalln_amd64.s) for passes of 2 to
// smallNMax tokens; TOKENWISE_SMALLN=0 turns them off, to measure one against the other.
var smallN = os.Getenv("TOKENWISE_SMALLN") != "0"

// SetSmallN turns the small-n products on or off and returns the setting before, for
// benchmarks that compare them with the paths they replace in one process (results are the
// same bits either way). Like SetISA it must not run concurrently with a kernel call.
func SetSmallN(on bool) (prev bool) { return setSmallN(on) }

func setSmallN(on bool) (prev bool) {
	prev, smallN = smallN, on
	return prev
}

// smallNMax is the most tokens of a Q8_0 product the small-n kernels take (longer passes go
// to the Q8_0 prefill tiles), and the most a Q4_0/Q4_1 product takes with every row of a
// worker's band in each call (see asmSmallN).
const smallNMax = 16

// smallNChunkBytes is the weight bytes asmSmallN takes through all token groups at a time
// in a long pass: a third of a core's L1 data cache (48 KiB here), beside the group's
// activations, so only the first group reads them from memory. (8 to 128 KiB measured on
// SmolLM2-135M Q4_1 prefill at 128 tokens: 257-369 tok/s over all of them, within this
// VM's drift.)
const smallNChunkBytes = 16 << 10

// maxSmallNBlocks bounds the rows the small-n products take (16,384 columns): the tokens'
// transposed scales are kept on the stack.
const maxSmallNBlocks = 512

// smallNAct is what the small-n kernels take of a pass's quantized activations besides
// qact's quants, made once per product (prepare) rather than by every worker.
type smallNAct struct {
	n  int          // tokens it was made for; 0: not made
	dt tensor.DType // and the weights' dtype
	// xo: Q8_0 weights' activations, the quants + 128 as unsigned bytes (VPDPBUSD takes
	// unsigned by signed bytes). e: Q4_0's, −8·Σ of each four quants (the nibbles are
	// q+8). Empty for the other dtypes.
	xo []int8
	e  []int32
	// dT, sT: the blocks' scales (and Q4_1's d·Σq) of each group of eight tokens,
	// transposed: dT[g·nb·8 + 8b + t] is token 8g+t's block b, so a weight block's scale
	// products for the group are one vector product.
	dT, sT []float32
}

func grow[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// byTokenGroups writes src (n tokens' nb per-block values, token after token) into dst by
// groups of eight tokens, block after block within a group: dst[g·nb·8 + 8b + j] =
// src[(8g+j)·nb + b], the layout in which the kernels take a block's scales for all the
// tokens of a call (smallNAct.dT, the AMX-arithmetic kernels' d).
func byTokenGroups(dst, src []float32, n, nb int) {
	for t := range n {
		g, j := t/8, t%8
		for b, v := range src[t*nb : (t+1)*nb] {
			dst[g*nb*8+8*b+j] = v
		}
	}
}
