package specialize

import (
	"os"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/domain/debian"
	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/internal/testref"
	"github.com/tokenwise/tokenwise/tokenizer"
)

// TestAddedTokensTravel: on the Qwen3 essay domain, no new token (added or merge) is longer
// than MaxTokenBytes, the default (llama-cpp-python's 32-byte piece buffer) or a tighter one;
// with Portable every added token is printable ASCII without spaces. It logs what the
// restrictions cost on the held-out split (the numbers quoted at Options.Portable).
func TestAddedTokensTravel(t *testing.T) {
	data, err := os.ReadFile(testref.Tokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	train, held := domainDocs(1, 300), domainDocs(2, 200)
	for _, o := range []Options{
		{Prune: true, Add: 256, MaxTokenBytes: 1 << 20},
		{Prune: true, Add: 256},
		{Prune: true, Add: 256, MaxTokenBytes: 12},
		{Prune: true, Add: 256, Portable: true},
	} {
		p, err := Build(data, train, o)
		if err != nil {
			t.Fatal(err)
		}
		o.defaults()
		longest := 0
		for _, nt := range p.NewTokens {
			longest = max(longest, len(nt.Text))
			if len(nt.Text) > o.MaxTokenBytes {
				t.Errorf("max %d: new token %q is %d bytes", o.MaxTokenBytes, nt.Text, len(nt.Text))
			}
			if o.Portable && nt.Added && !portable(nt.Text) {
				t.Errorf("portable: added token %q holds a space or a non-ASCII byte", nt.Text)
			}
		}
		ev := p.Evaluate(held)
		if ev.After.Longer != 0 || ev.RoundTrip != 0 {
			t.Errorf("max %d portable %v: held-out %d texts longer, %d round-trip failures", o.MaxTokenBytes, o.Portable, ev.After.Longer, ev.RoundTrip)
		}
		t.Logf("max-token-bytes %d, portable %v: %d new tokens, longest %d bytes; held-out output %d -> %d (%.1f%%), input %d -> %d",
			o.MaxTokenBytes, o.Portable, len(p.NewTokens), longest, ev.Before.Output, ev.After.Output,
			-100*(1-float64(ev.After.Output)/float64(ev.Before.Output)), ev.Before.Input, ev.After.Input)
	}
}

// TestMinDocsAndSupport: a string that recurs in only one record, however much it would save,
// is not chosen under MinDocs; one that never occurs in the validation records is passed over
// (and counted) under MinSupport.
func TestMinDocsAndSupport(t *testing.T) {
	data, err := os.ReadFile(testref.Tokenizer(t, "qwen3"))
	if err != nil {
		t.Fatal(err)
	}
	// One record repeated in a single group: its long value saves a lot but recurs in one
	// record. The key structure recurs in every record.
	memo := `"product": "Pebble kettle, brushed steel, 1.7 litres"`
	var docs []Doc
	for i := 0; i < 40; i++ {
		docs = append(docs, Doc{Text: `{"id": ` + strings.Repeat("7", 1+i%5) + `, "status": "shipped"}`, Side: Output, Group: i + 1})
	}
	for k := 0; k < 6; k++ {
		docs = append(docs, Doc{Text: `{` + memo + `}`, Side: Output, Group: 1000})
	}
	has := func(p *Plan, sub string) bool {
		for _, nt := range p.NewTokens {
			if nt.Added && strings.Contains(nt.Text, sub) {
				return true
			}
		}
		return false
	}
	loose, err := Build(data, docs, Options{Prune: true, Add: 24, MinDocs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if !has(loose, "Pebble") {
		t.Fatalf("MinDocs 1: no added token from the repeated record (the case the check is for): %v", loose.NewTokens)
	}
	strict, err := Build(data, docs, Options{Prune: true, Add: 24})
	if err != nil {
		t.Fatal(err)
	}
	if has(strict, "Pebble") {
		t.Fatal("MinDocs 3: an added token from a string that recurs in one record")
	}
	if !has(strict, `"status": "shipped"`) && !has(strict, `status`) {
		t.Fatalf("MinDocs 3: the shared structure is not chosen either: %v", strict.NewTokens)
	}
	// Validation records that never say "shipped": tokens with it are passed over.
	var valid []Doc
	for i := 0; i < 20; i++ {
		valid = append(valid, Doc{Text: `{"id": 3, "status": "pending"}`, Side: Output, Group: i + 1})
	}
	vp, err := Build(data, docs, Options{Prune: true, Add: 24, Validation: valid})
	if err != nil {
		t.Fatal(err)
	}
	if has(vp, "shipped") || vp.Unsupported == 0 {
		t.Fatalf("validation without \"shipped\": still chosen %v, %d passed over", has(vp, "shipped"), vp.Unsupported)
	}
	if !has(vp, `"status": "`) && !has(vp, `status`) {
		t.Fatalf("validation: the shared structure is not chosen: %v", vp.NewTokens)
	}
}

func TestUnportableAdded(t *testing.T) {
	js := `{"added_tokens": [{"content": "<|endoftext|>", "special": true}, {"content": "{\"name\":", "special": false},
		{"content": "\", \"email\":", "special": false}, {"content": "caf\u00e9", "special": false}, {"content": "a\nb", "special": false}]}`
	n, total, err := UnportableAdded([]byte(js))
	if err != nil || n != 3 || total != 4 {
		t.Fatalf("UnportableAdded: %d of %d (%v), want 3 of 4", n, total, err)
	}
	if _, _, err := UnportableAdded([]byte("{")); err == nil {
		t.Fatal("no error for a broken tokenizer.json")
	}
}

// TestDebianTaskSelection: SmolLM2's vocabulary specialized to this machine's Debian package
// records (domain/debian, the status file), checked independently of the selection's own
// bookkeeping: every added token occurs in at least MinDocs training records and in at least
// MinSupport of the validation records, and no new token is longer than the byte cap.
func TestDebianTaskSelection(t *testing.T) {
	if testing.Short() {
		t.Skip("specializes on hundreds of records")
	}
	if _, err := os.Stat(debian.StatusFile); err != nil {
		t.Skipf("not a Debian system: %v", err)
	}
	recs, err := debian.System(false)
	if err != nil {
		t.Fatal(err)
	}
	sp := debian.Splits(recs, 1)
	docs := func(xs []debian.Example) ([]Doc, []string) {
		var ds []Doc
		var joined []string
		for i, x := range xs {
			ds = append(ds, Doc{Text: x.Prompt, Side: Input, Group: i + 1}, Doc{Text: x.Completion, Side: Output, Group: i + 1})
			joined = append(joined, x.Prompt+"\x00"+x.Completion)
		}
		return ds, joined
	}
	train, trainRecs := docs(sp[debian.Train])
	valid, validRecs := docs(sp[debian.Validation])
	f, err := gguf.Open(testref.Path(t, "smollm2", "smollm2-135m-instruct-q4_1.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tokJSON, _, _, _, err := tokenizer.GGUFToHF(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, err := Build(tokJSON, train, Options{Prune: true, Add: 200, Validation: valid})
	if err != nil {
		t.Fatal(err)
	}
	count := func(s string, in []string) int {
		n := 0
		for _, r := range in {
			if strings.Contains(r, s) {
				n++
			}
		}
		return n
	}
	added := 0
	for _, nt := range p.NewTokens {
		if len(nt.Text) > DefaultMaxTokenBytes {
			t.Errorf("new token %q: %d bytes", nt.Text, len(nt.Text))
		}
		if !nt.Added {
			continue
		}
		added++
		if n := count(nt.Text, trainRecs); n < 3 {
			t.Errorf("added token %q occurs in %d training records", nt.Text, n)
		}
		if n := count(nt.Text, validRecs); float64(n) < 0.01*float64(len(validRecs)) {
			t.Errorf("added token %q occurs in %d of %d validation records", nt.Text, n, len(validRecs))
		}
	}
	if added == 0 {
		t.Fatal("no added tokens")
	}
	t.Logf("%d train / %d validation records: %d new tokens (%d added), %d candidates passed over for validation support",
		len(trainRecs), len(validRecs), len(p.NewTokens), added, p.Unsupported)
}
