package specialize

import (
	"os"
	"testing"

	"github.com/tokenwise/tokenwise/domain"
	"github.com/tokenwise/tokenwise/internal/testref"
)

func domainDocs(seed uint64, n int) []Doc {
	var docs []Doc
	for _, ex := range domain.Generate(seed, n) {
		docs = append(docs, Doc{ex.Prompt, Input}, Doc{ex.Completion, Output})
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
	p, err := Build(data, train, Options{Prune: true, Add: 256, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	ev := p.Evaluate(held)
	t.Logf("vocab %d -> %d; held-out %+v", p.VocabBefore(), p.VocabAfter(), ev)
}
