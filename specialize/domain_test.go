package specialize

import (
	"os"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/internal/testref"
)

func domainDocs(seed uint64, n int) []Doc {
	var docs []Doc
	for i, ex := range domain.Generate(seed, n) {
		docs = append(docs, Doc{ex.Prompt, Input, i + 1}, Doc{ex.Completion, Output, i + 1})
	}
	return docs
}

// TestQwen3DomainGoals measures the goals on the held-out split of the JSON-verdict
// domain with the Qwen3 tokenizer.
func TestQwen3DomainGoals(t *testing.T) {
	data, err := os.ReadFile(testref.Tokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	train, held := domainDocs(1, 300), domainDocs(2, 200)
	p, err := Build(data, train, Options{Prune: true, Add: 256})
	if err != nil {
		t.Fatal(err)
	}
	ev := p.Evaluate(held)
	t.Logf("vocab %d -> %d; held-out %+v", p.VocabBefore(), p.VocabAfter(), ev)
	if out := 1 - float64(ev.After.Output)/float64(ev.Before.Output); out < 0.40 {
		t.Errorf("held-out output tokens %d -> %d: %.1f%% fewer, goal >= 40%%", ev.Before.Output, ev.After.Output, 100*out)
	}
	if rows := 1 - float64(p.VocabAfter())/float64(p.VocabBefore()); rows < 0.80 {
		t.Errorf("vocabulary %d -> %d: %.1f%% fewer rows, goal >= 80%%", p.VocabBefore(), p.VocabAfter(), 100*rows)
	}
	if ev.After.Longer != 0 || ev.RoundTrip != 0 {
		t.Errorf("held-out: %d texts longer, %d round-trip failures; goal 0 and 0", ev.After.Longer, ev.RoundTrip)
	}
	if p.After.Longer != 0 {
		t.Errorf("corpus: %d texts longer", p.After.Longer)
	}
}
