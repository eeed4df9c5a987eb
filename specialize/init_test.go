package specialize

import (
	"encoding/binary"
	"math"
	"path/filepath"
	"testing"

	"github.com/tokenwise/tokenwise/formats/safetensors"
)

func f32Rows(t *testing.T, dir, name string) ([][]float32, int) {
	t.Helper()
	m, err := safetensors.OpenModel(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ti, ok := m.Tensor(name)
	if !ok {
		t.Fatalf("%s: no %s", dir, name)
	}
	rows, h := ti.Shape[0], ti.Shape[1]
	out := make([][]float32, rows)
	for r := range out {
		out[r] = make([]float32, h)
		for k := range h {
			out[r][k] = math.Float32frombits(binary.LittleEndian.Uint32(ti.Data[4*(r*h+k):]))
		}
	}
	return out, rows
}

// TestNewRowInit: kept rows are copied exactly; new rows follow --init (mean of a merge's or
// added token's parts, FVT's mean over the old tokenization, AdaptiVocab's exponential
// weights toward the last token for inputs and the first for outputs); padding rows are zero.
func TestNewRowInit(t *testing.T) {
	src := synthQwen3(t, false)
	oldE, _ := f32Rows(t, src, embedName)
	oldH, _ := f32Rows(t, src, headName)
	for _, init := range []string{InitMean, InitFVT, InitExp} {
		out := t.TempDir()
		if _, err := Run(src, domainDocs(1, 40), out, RunOptions{Options: Options{Prune: true, Add: 48}, Init: init}); err != nil {
			t.Fatal(err)
		}
		p, vm := planOf(t, out), readVocabMap(t, out)
		newE, rows := f32Rows(t, out, embedName)
		newH, _ := f32Rows(t, filepath.Join(out), headName)
		for n, o := range vm {
			if o >= 0 && !equalRow(newE[n], oldE[o]) {
				t.Fatalf("%s: kept row %d (old %d) differs", init, n, o)
			}
		}
		for n := len(vm); n < rows; n++ {
			for _, x := range newE[n] {
				if x != 0 {
					t.Fatalf("%s: padding row %d is not zero", init, n)
				}
			}
		}
		checked := 0
		for _, nt := range p {
			if nt.OldID >= 0 {
				continue
			}
			var wantE, wantH []float32
			switch init {
			case InitMean:
				wantE, wantH = avg(newE, nt.Parts, nil), avg(newH, nt.Parts, nil)
			case InitFVT:
				wantE, wantH = avg(oldE, nt.OldParts, nil), avg(oldH, nt.OldParts, nil)
			case InitExp:
				in, outw := make([]float64, len(nt.OldParts)), make([]float64, len(nt.OldParts))
				for i := range in {
					in[i], outw[i] = math.Exp(float64(i)), math.Exp(-float64(i))
				}
				wantE, wantH = avg(oldE, nt.OldParts, in), avg(oldH, nt.OldParts, outw)
			}
			if !closeRow(newE[nt.ID], wantE) || !closeRow(newH[nt.ID], wantH) {
				t.Fatalf("%s: new token %d %q: row is not the %s of its parts", init, nt.ID, nt.Text, init)
			}
			checked++
		}
		if checked == 0 {
			t.Fatalf("%s: no new tokens to check", init)
		}
	}
}

func planOf(t *testing.T, dir string) []NewToken {
	t.Helper()
	m, err := readJSONObject(filepath.Join(dir, "vocab_map.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []NewToken
	list, _ := m["new_tokens"].([]any)
	num := func(v any) int {
		n, _ := v.(interface{ Int64() (int64, error) })
		x, _ := n.Int64()
		return int(x)
	}
	ints := func(v any) []int {
		var r []int
		l, _ := v.([]any)
		for _, x := range l {
			r = append(r, num(x))
		}
		return r
	}
	for _, e := range list {
		o := e.(map[string]any)
		txt, _ := o["text"].(string)
		out = append(out, NewToken{ID: num(o["id"]), Text: txt, OldID: num(o["old_id"]), Parts: ints(o["parts"]), OldParts: ints(o["old_parts"])})
	}
	return out
}

func avg(rows [][]float32, ids []int, w []float64) []float32 {
	v := make([]float32, len(rows[0]))
	var sum float64
	for i := range ids {
		if w == nil {
			sum++
		} else {
			sum += w[i]
		}
	}
	for i, id := range ids {
		wi := 1.0
		if w != nil {
			wi = w[i]
		}
		for k := range v {
			v[k] += float32(wi/sum) * rows[id][k]
		}
	}
	return v
}

func equalRow(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func closeRow(a, b []float32) bool {
	for i := range a {
		if math.Abs(float64(a[i]-b[i])) > 1e-6 {
			return false
		}
	}
	return true
}
