package engine

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tokenwise/tokenwise/engine/spec"
)

// BenchmarkDraftReplay replays the greedy answers that scripts/bench-speculate.sh saved
// (.cache/bench-speculate: prompts-KIND.json, the chat-templated prompts its LLAMA=1 part
// writes, and ref-tokenwise-KIND-1.json, the plain server's answers) through the draft
// proposers, four drafts a step, the domain index learning each answer after it as serve's
// does, and reports decode steps per output token and the share of drafts kept. Greedy
// output does not depend on the drafts, so this is what a proposer would save on those
// answers, without the timing noise of a served run (the engine's cost rule, which shortens
// drafts where they do not pay, is left out). Answers are re-tokenized from their text. For
// prompt,domain it also reports how often each member's first draft is kept (the engine
// judges each source by its own rate: Engine.acceptance).
//
//	go test ./engine -run '^$' -bench DraftReplay -benchtime 1x
func BenchmarkDraftReplay(b *testing.B) {
	dir := filepath.Join(repoRoot(), ".cache", "bench-speculate")
	_, tk := smolTokenizer(b)
	for _, kind := range []string{"extraction", "code-edit", "free"} {
		var prompts, answers []string
		for i, name := range []string{"prompts-" + kind + ".json", "ref-tokenwise-" + kind + "-1.json"} {
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil && i == 1 { // the 16-stream run's answers: the same text
				data, err = os.ReadFile(filepath.Join(dir, "ref-tokenwise-"+kind+"-16.json"))
			}
			if err != nil {
				b.Skipf("run scripts/bench-speculate.sh first: %v", err)
			}
			if err := json.Unmarshal(data, []*[]string{&prompts, &answers}[i]); err != nil {
				b.Fatalf("%s: %v", name, err)
			}
		}
		// "chain": prompt lookup first and the index after, what prompt,domain was before
		// spec.Proposers ordered them by the evidence.
		for _, list := range []string{"prompt", "domain", "prompt,domain", "chain"} {
			b.Run(kind+"/"+list, func(b *testing.B) {
				var steps, tokens, drafted, kept int
				var first, firstKept [3]int // per member of the chain: first drafts, kept
				for b.Loop() {
					steps, tokens, drafted, kept = 0, 0, 0, 0
					first, firstKept = [3]int{}, [3]int{}
					idx := spec.NewIndex(3, 1<<18) // serve's empty index (cli.newDraftIndex)
					c, err := spec.Proposers(list, idx)
					if list == "chain" {
						c, err = spec.Chain{spec.PromptLookup{}, idx}, nil
					}
					if err != nil {
						b.Fatal(err)
					}
					for i := range min(len(prompts), len(answers)) {
						seq := tk.Encode(prompts[i], false)
						a := tk.Encode(answers[i], false)
						for g := 0; g < len(a); {
							d, src := c.ProposeSource(seq, min(4, len(a)-g-1))
							n := 0
							for n < len(d) && d[n] == a[g+n] {
								n++
							}
							if len(d) > 0 && src < len(first) {
								first[src]++
								firstKept[src] += min(n, 1)
							}
							drafted, kept = drafted+len(d), kept+n
							seq = append(seq, a[g:g+n+1]...)
							g += n + 1
							steps++
						}
						tokens += len(a)
						idx.Add(a)
					}
				}
				b.ReportMetric(float64(steps)/float64(tokens), "steps/token")
				b.ReportMetric(float64(kept)/float64(max(drafted, 1)), "kept/drafted")
				if list == "prompt,domain" { // its members: prompt 2-3, the index, prompt 1
					for i, name := range []string{"prompt23", "index", "prompt1"} {
						b.ReportMetric(float64(firstKept[i])/float64(max(first[i], 1)), "first-kept-"+name)
					}
				}
			})
		}
	}
}
