package cost

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tokenwise/tokenwise/kernels"
	"github.com/tokenwise/tokenwise/tensor"
)

type xshape struct {
	name                                 string
	hidden, inter, layers, heads, kv, hd int
	vocab                                int
}

func TestExploreH14(t *testing.T) {
	if os.Getenv("H14") == "" {
		t.Skip()
	}
	shapes := []xshape{{"smol", 576, 1536, 30, 9, 3, 64, 49152}, {"qwen", 1024, 3072, 28, 16, 8, 128, 151936}, {"llama", 2048, 8192, 16, 32, 8, 64, 128256}}
	pool := kernels.NewPool(2)
	s := kernels.NewScratch(2)
	for _, dn := range strings.Fields(os.Getenv("H14")) {
		dt, _ := kernelDType(dn)
		for _, sh := range shapes {
			mk := func(rows, cols int) kernels.Mat {
				pr, err := randomRows(dt, 64, cols)
				if err != nil {
					t.Fatal(err)
				}
				raw := make([]byte, 0, len(pr)*(rows/64+1))
				for len(raw) < len(pr)*rows/64 {
					raw = append(raw, pr...)
				}
				rb, _ := dt.BytesFor(cols)
				raw = raw[:rows*rb]
				m, err := kernels.NewMat(dt, rows, cols, raw)
				if err != nil {
					t.Fatal(err)
				}
				return m
			}
			type lay struct{ q, k, v, o, g, u, d kernels.Mat }
			ls := make([]lay, sh.layers)
			var bytes float64
			for i := range ls {
				qd, kvd := sh.heads*sh.hd, sh.kv*sh.hd
				ls[i] = lay{mk(qd, sh.hidden), mk(kvd, sh.hidden), mk(kvd, sh.hidden), mk(sh.hidden, qd), mk(sh.inter, sh.hidden), mk(sh.inter, sh.hidden), mk(sh.hidden, sh.inter)}
				for _, m := range []kernels.Mat{ls[i].q, ls[i].k, ls[i].v, ls[i].o, ls[i].g, ls[i].u, ls[i].d} {
					b, _ := dt.BytesFor(m.Rows * m.Cols)
					bytes += float64(b)
				}
			}
			head := mk(sh.vocab, sh.hidden)
			hb, _ := dt.BytesFor(sh.vocab * sh.hidden)
			x := make([]float32, max(sh.inter, sh.heads*sh.hd))
			for i := range x {
				x[i] = float32(i%7) * 0.1
			}
			out := make([]float32, sh.vocab+3*sh.inter)
			step := func(withHead bool) {
				for _, l := range ls {
					kernels.MatMulMany(pool, []kernels.Product{{&l.q, out[:l.q.Rows]}, {&l.k, out[l.q.Rows : l.q.Rows+l.k.Rows]}, {&l.v, out[l.q.Rows+l.k.Rows : l.q.Rows+2*l.k.Rows]}}, x[:sh.hidden], 1, s)
					kernels.MatVec(pool, out[:sh.hidden], &l.o, x[:l.o.Cols], s)
					kernels.MatMulMany(pool, []kernels.Product{{&l.g, out[:sh.inter]}, {&l.u, out[sh.inter : 2*sh.inter]}}, x[:sh.hidden], 1, s)
					kernels.MatVec(pool, out[:sh.hidden], &l.d, x[:sh.inter], s)
				}
				if withHead {
					kernels.MatVec(pool, out[:sh.vocab], &head, x[:sh.hidden], s)
				}
			}
			step(true)
			var best, bestH float64 = 1e9, 1e9
			for range 7 {
				t0 := time.Now()
				step(false)
				best = min(best, time.Since(t0).Seconds())
				t0 = time.Now()
				step(true)
				bestH = min(bestH, time.Since(t0).Seconds())
			}
			fmt.Printf("%s %s: layers %.1f MB %.2f ms (%.1f GB/s); +head %.1f MB: %.2f ms (%.1f tok/s)\n", dn, sh.name, bytes/1e6, best*1e3, bytes/best/1e9, float64(hb)/1e6, bestH*1e3, 1/bestH)
		}
	}
	// tiny call
	dt := tensor.BF16
	raw, _ := randomRows(dt, 8, 576)
	m, _ := kernels.NewMat(dt, 8, 576, raw)
	x := make([]float32, 576)
	out := make([]float32, 8)
	t0 := time.Now()
	for range 10000 {
		kernels.MatVec(pool, out, &m, x, s)
	}
	fmt.Printf("tiny call %.2f us\n", time.Since(t0).Seconds()/10000*1e6)
	t0 = time.Now()
	for range 10000 {
		pool.Run(2, 1, func(w, lo, hi int) {})
	}
	fmt.Printf("empty run %.2f us\n", time.Since(t0).Seconds()/10000*1e6)
}
