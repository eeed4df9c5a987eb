package kernels

//go:generate go run smalln_gen.go

import "os"

// smallN selects the small-n quantized products (smalln_amd64.s) for passes of 2 to
// smallNMax tokens; TOKENWISE_SMALLN=0 turns them off, to measure one against the other.
var smallN = os.Getenv("TOKENWISE_SMALLN") != "0"

// setSmallN sets smallN and returns its value before (benchmarks and tests).
func setSmallN(on bool) (prev bool) {
	prev, smallN = smallN, on
	return prev
}

// smallNMax is the most tokens the small-n products take; longer passes (prefill) go to the
// 4×4 tiles, which reuse each token's blocks across four rows as well.
const smallNMax = 16

// maxSmallNBlocks bounds the rows the small-n products take (16,384 columns): the tokens'
// transposed scales are kept on the stack.
const maxSmallNBlocks = 512
