package engine

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenwise/tokenwise/engine/spec"
)

func TestTmpSources(t *testing.T) {
	dir := filepath.Join(repoRoot(), ".cache", "bench-speculate")
	_, tk := smolTokenizer(t)
	for _, kind := range []string{"extraction", "code-edit", "free"} {
		var prompts, answers []string
		for i, name := range []string{"prompts-" + kind + ".json", "ref-tokenwise-" + kind + "-1.json"} {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil && i == 1 {
				data, err = os.ReadFile(filepath.Join(dir, "ref-tokenwise-"+kind+"-16.json"))
			}
			if err != nil {
				t.Skip(err)
			}
			json.Unmarshal(data, []*[]string{&prompts, &answers}[i])
		}
		idx := spec.NewIndex(3, 1<<18)
		c, _ := spec.Proposers("prompt,domain", idx)
		var drafted, kept [3][5]int // source, position: drafted at pos, kept at pos
		var steps [3]int
		for i := range min(len(prompts), len(answers)) {
			seq := tk.Encode(prompts[i], false)
			a := tk.Encode(answers[i], false)
			for g := 0; g < len(a); {
				var d []int
				src := -1
				for si, p := range c {
					if d = p.Propose(seq, min(4, len(a)-g-1)); len(d) > 0 {
						src = si
						break
					}
				}
				n := 0
				for n < len(d) && d[n] == a[g+n] {
					n++
				}
				if src >= 0 {
					steps[src]++
					for j := range d {
						if j <= n { // reached
							drafted[src][j]++
							if j < n {
								kept[src][j]++
							}
						}
					}
				}
				seq = append(seq, a[g:g+n+1]...)
				g += n + 1
			}
			idx.Add(a)
		}
		for s := range 3 {
			line := fmt.Sprintf("%s src %d steps %d:", kind, s, steps[s])
			for j := range 4 {
				line += fmt.Sprintf(" p%d=%.2f(%d)", j, float64(kept[s][j])/float64(max(drafted[s][j], 1)), drafted[s][j])
			}
			t.Log(line)
		}
	}
}
