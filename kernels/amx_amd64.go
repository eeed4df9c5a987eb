//go:build amd64

package kernels

import (
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/cpu"

	"github.com/tokenwise/tokenwise/tensor"
)

// The Q4_K prefill product on the CPU's AMX tile unit (Intel Sapphire Rapids and later):
// TDPBUSD multiplies a 16×64 tile of unsigned bytes by a 64×16 tile of signed bytes into
// 16×16 int32 sums, 16×16×64 multiply-adds per instruction, several times what the 512-bit
// VNNI tile does per cycle.
//
// The arithmetic is ggml's, to the bit: a Q4_K super-block's integer sum Σ_j sc_j·Σ q·x is
// exact in int32 whatever order it is added in, so only the float steps must be
// gemm_q4_K_8x8_q8_K's, and the tile's epilogue runs exactly those (acc += float(isum)·
// (d_w·d_x), accM += float(imin)·(dmin_w·d_x), fused; out = acc − accM), as the AVX2 and
// 512-bit tiles do. TestQ4KAMX checks every (row, token) against dotQ4_KAct bit for bit.
//
// The sub-block scales: TDPBUSD sums over 64 bytes, two sub-blocks of 32 with different
// 6-bit scales sc_j. Each weight is therefore expanded, per block of 16 rows, to
// v = sc_j·q (0..945) written as two byte planes, lo = v & 255 and hi = v >> 8, so that
// Σ v·x = Σ lo·x + 256·Σ hi·x: two full-width TDPBUSD per 64 columns and no per-sub-block
// stores. The expansion (16 rows × 512 bytes per super-block, q4KAMXExpand) is made once per
// block of rows and used by every 16-token tile of the product, so a prefill of n tokens
// pays it once for n/16 tiles. The activations are transposed once per product into the
// layout TDPBUSD reads its second operand in (four consecutive columns of a token side by
// side: amxVNNI).
//
// The operating-system side: Linux gives a process the AMX register state only after
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) (the state is 8 KiB per thread, so
// it is opt-in); without it the first tile instruction raises SIGILL. The request is made
// once, at start-up, where the CPU has AMX-TILE and AMX-INT8; if it fails the AMX path stays
// off. Tile state lives only inside one assembly call (q4KAMXTile2 configures the tiles,
// computes and releases them): Go does not preempt a goroutine inside assembly, and the
// kernel saves and restores the tiles with the thread on a signal or a context switch, so
// neither a goroutine's move to another thread nor a signal can see another call's tiles.
// (llama.cpp's AMX build loads the tile configuration once per thread and keeps it; on this
// Emerald Rapids VM its llama-bench dies with SIGILL at its first TILEZERO although the
// kernel granted it the tile state, while the same instructions in a small C program run.
// Why is not found.)

// amxReady reports whether this CPU has AMX-TILE and AMX-INT8 and the kernel granted the
// process the tile state.
var amxReady = func() bool {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXInt8 || !cpu.X86.HasAVX512BW {
		return false
	}
	const archReqXCompPerm, xfeatureXTileData = 0x1023, 18
	_, _, errno := syscall.RawSyscall(syscall.SYS_ARCH_PRCTL, archReqXCompPerm, xfeatureXTileData, 0)
	return errno == 0
}()

// noAMX is TOKENWISE_AMX=0: the AMX path stays off (to measure against the 512-bit tile).
var noAMX = os.Getenv("TOKENWISE_AMX") == "0"

// useAMX enables the AMX Q4_K prefill product; setISA turns it on under ISAAVX512 where
// amxReady, SetAMX turns it off and on again.
var useAMX bool

// SetAMX turns the AMX prefill products on (where the CPU and the kernel allow them and
// the ISA is ISAAVX512) or off, and returns whether they are now on. SetISA resets it to on
// where allowed.
func SetAMX(on bool) bool {
	useAMX = on && amxAllowed()
	return useAMX
}

// AMXAvailable reports whether this CPU and kernel run the AMX products.
func AMXAvailable() bool { return amxReady }

func amxAllowed() bool { return amxReady && kqTile == kqTileZMM && !noAMX }

// amxMinTokens: products of fewer tokens stay on the 512-bit tile (a 16-token tile would
// be mostly empty, and the expansion is paid per block of rows).
const amxMinTokens = 32 // one pair of 16-token tiles

// amxTileCfg is the 64-byte tile configuration LDTILECFG reads: palette 1, the eight tiles
// each 16 rows of 64 bytes (C lo, C hi, A lo, A hi, B; and for a second token tile C lo,
// C hi, B).
var amxTileCfg = func() *[64]byte {
	var c [64]byte
	c[0] = 1
	for t := range 8 {
		binary.LittleEndian.PutUint16(c[16+2*t:], 64)
		c[48+t] = 16
	}
	return &c
}()

//go:noescape
func q4KAMXExpand(w *byte, nb int, side *amxSideEntry, a *byte)

//go:noescape
func q4KAMXTile2(cfg *[64]byte, a *byte, aStride int, b *byte, bStride int, side *amxSideEntry, ts *q4KTileSB, tsStride int, nb int, acc *float32, buf *int32, out *float32, outStride, rowStride, pairs, fused int)

// amxSideEntry is what the tile's epilogue and the expansion read per row and super-block,
// 64 bytes: d_w and dmin_w, the eight 6-bit mins and the eight scales.
type amxSideEntry struct {
	d, dmin float32
	mn      [8]int16
	_       [8]byte
	sc      [8]int16
	_       [16]byte
}

// amxVNNI transposes the activations of tokens [t0,t0+16) (nb super-blocks each) into
// TDPBUSD's second-operand layout: per super-block and 64 columns c, 16 rows of 64 bytes,
// row k holding columns 4k..4k+3 of the 16 tokens side by side.
func amxVNNI(dst []byte, a *qactK, t0, nb int) {
	src := unsafe.Slice((*uint32)(unsafe.Pointer(&a.q[t0*nb*256])), 16*nb*64)
	d := unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), nb*64*16)
	for t := range 16 {
		row := src[t*nb*64 : (t+1)*nb*64]
		for wi, v := range row {
			d[(wi>>4)<<8|(wi&15)<<4|t] = v
		}
	}
}

// amxPrep is a product's activations in the AMX layouts, made once (amxPrepare) and read by
// every worker: the transposed quants (amxVNNI) and the epilogue's d_x and pair sums
// (q4KTileSB) of each 16-token tile.
type amxPrep struct {
	n  int // tokens in whole 16-token tiles
	b  []byte
	ts []q4KTileSB
}

// prepareAMX lays out a's n tokens for the AMX product where w takes it (Q4_K, useAMX, at
// least amxMinTokens tokens), else marks a as having none (a.amx.n = 0).
func prepareAMX(w *Mat, a *qactK, n int) {
	a.amx.n = 0
	if useAMX && w.DType == tensor.Q4_K && n >= amxMinTokens {
		a.amx.amxPrepare(a, n, w.Cols/256)
	}
}

// amxPrepare fills p for the first n/32·32 of a's n tokens: the tile takes 16-token tiles
// in pairs, and the tokens after the last pair go to the 512-bit tile.
func (p *amxPrep) amxPrepare(a *qactK, n, nb int) {
	p.n = n / 32 * 32
	tiles := p.n / 16
	if need := tiles * nb * 64 * 64; cap(p.b) < need {
		p.b = make([]byte, need)
	}
	if need := tiles * nb; cap(p.ts) < need {
		p.ts = make([]q4KTileSB, need)
	}
	p.b, p.ts = p.b[:tiles*nb*4096], p.ts[:tiles*nb]
	for tile := range tiles {
		amxVNNI(p.b[tile*nb*4096:], a, tile*16, nb)
		fillQ4KTile(p.ts[tile*nb:(tile+1)*nb], a, tile*16, 16, nb, 0, nb)
	}
}

// amxScratch is one worker's expansion of a block of 16 rows: side entries, then the two
// byte planes per super-block and row; and the tile's accumulators and C stores.
type amxScratch struct {
	side []amxSideEntry       // nb × 16
	a    []byte               // 16 rows × nb × 512
	acc  [2 * 16 * 32]float32 // the pair's two tiles: 16 rows × (acc, accM) × 16 tokens each
	buf  [1024]int32
}

var amxScratchPool = sync.Pool{New: func() any { return new(amxScratch) }}

// amxBlocks counts the 16-row blocks the AMX tile has multiplied, for tests to see it ran.
var amxBlocks atomic.Int64

// AMXBlocks is how many blocks of 16 weight rows the AMX products have multiplied in this
// process (each times all of a product's whole 16-token tiles): a test's evidence that the
// path ran.
func AMXBlocks() int64 { return amxBlocks.Load() }

// q4KAMXRows computes rows [lo, lo+16·k) of the Q4_K matrix w (k whole 16-row blocks that
// fit in [lo,hi)) times the p.n tokens p holds (whole pairs of 16-token tiles) and returns where it stopped; the caller
// does the rows after that and the tokens after p.n.
func q4KAMXRows(out []float32, w *Mat, p *amxPrep, lo, hi int) int {
	nb := w.Cols / 256
	rows := w.Rows
	end := lo + (hi-lo)/16*16
	if end == lo || p.n == 0 {
		return lo
	}
	s := amxScratchPool.Get().(*amxScratch)
	defer amxScratchPool.Put(s)
	if need := nb * 16; cap(s.side) < need {
		s.side = make([]amxSideEntry, need)
	}
	if need := 16 * nb * 512; cap(s.a) < need {
		s.a = make([]byte, need)
	}
	side, a := s.side[:nb*16], s.a[:16*nb*512]
	amxBlocks.Add(int64(end-lo) / 16)
	tiles := p.n / 16
	fused := 0
	if amxArithmetic(w) {
		fused = 1 // llama.cpp's AMX backend's float steps (dotQ4_KAMX)
	}
	for r0 := lo; r0 < end; r0 += 16 {
		for m := range 16 {
			row := w.Data[(r0+m)*w.rowBytes:][:nb*144]
			for b := range nb {
				blk := (*[144]byte)(row[b*144:])
				e := &side[b*16+m]
				e.d = f16Table[uint16(blk[0])|uint16(blk[1])<<8]
				e.dmin = f16Table[uint16(blk[2])|uint16(blk[3])<<8]
				sc, mn := q4KScales((*[12]byte)(blk[4:16]))
				for j := range 8 {
					e.mn[j], e.sc[j] = int16(mn[j]), int16(sc[j])
				}
			}
			q4KAMXExpand(&row[0], nb, &side[m], &a[m*nb*512])
		}
		q4KAMXTile2(amxTileCfg, &a[0], nb*512, &p.b[0], nb*4096, &side[0], &p.ts[0], nb*int(unsafe.Sizeof(q4KTileSB{})),
			nb, &s.acc[0], &s.buf[0], &out[r0], 16*rows*4, rows*4, tiles/2, fused)
	}
	return end
}

// The assembly's strides: 64-byte side entries, 320-byte tile scales.
var (
	_ [unsafe.Sizeof(amxSideEntry{}) - 64]byte
	_ [64 - unsafe.Sizeof(amxSideEntry{})]byte
	_ [unsafe.Sizeof(q4KTileSB{}) - 320]byte
	_ [320 - unsafe.Sizeof(q4KTileSB{})]byte
)
