package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tokenwise/tokenwise/domain/debian"
	"github.com/tokenwise/tokenwise/experiment"
	"github.com/tokenwise/tokenwise/train"
)

// TestExperimentEndToEnd runs `tokenwise experiment` on a tiny random-weight model (synth,
// with a tokenizer trained on this machine's Debian records, exported to GGUF as SmolLM2 is
// shipped) and checks that the report is what tokenwise measured: per-arm averages are the
// per-record ones, a record's output tokens are what `tokenwise generate` gives for the
// same prompt, the specialized arm's LM head is its vocabulary; that a rerun skips every
// finished step and a changed generation cap redoes only the evaluations; that a cut
// evaluation resumes where it stopped; and that a second run with the same seed gives the
// same accuracy table.
func TestExperimentEndToEnd(t *testing.T) {
	tmp := t.TempDir()
	synthDir := tinyDebianModel(t, tmp)
	gguf := filepath.Join(tmp, "tiny.gguf")
	mustRunErr(t, "export", "--model", synthDir, "--format", "gguf", "--out", gguf)

	args := func(work string, more ...string) []string {
		return append([]string{"experiment", "--model", gguf, "--work", work, "--train", "24", "--held-out", "3", "--apt=false",
			"--steps", "2", "--batch", "2", "--seq-len", "1200", "--eval-max", "2", "--add", "24", "--shots", "1",
			"--max-tokens", "40", "--threads", "2", "--profile", "epyc-zen3-2core", "--price", "cpu=0.10,h100-sxm=2.5", "--dtype", "f32"}, more...)
	}
	w1 := filepath.Join(tmp, "w1")
	out, stderr := mustRunErr(t, args(w1)...)
	if !strings.Contains(out, "report: ") || !strings.Contains(stderr, "[10/10] write the report: done") {
		t.Fatalf("experiment output:\n%s\nstderr:\n%s", out, stderr)
	}
	var rep experiment.Report
	readJSON(t, filepath.Join(w1, "report.json"), &rep)
	t.Logf("accuracy table:\n%s", rep.Accuracy)
	if len(rep.Arms) != 3 {
		t.Fatalf("report has %d arms", len(rep.Arms))
	}
	held := readPairs(t, filepath.Join(w1, "data", "held-out.jsonl"))
	for _, a := range rep.Arms {
		recs := readRecords(t, filepath.Join(w1, "eval", "arm"+strconv.Itoa(a.Arm)+".jsonl"))
		if a.Prompts != len(held) || len(recs) != len(held) || len(a.FieldAcc) != len(experiment.Fields) {
			t.Fatalf("arm %d: %d prompts, %d records, %d held out, %d field accuracies", a.Arm, a.Prompts, len(recs), len(held), len(a.FieldAcc))
		}
		var outTok, steps, exact int
		for _, r := range recs {
			outTok += r.OutputTokens
			steps += r.DecodeSteps
			if r.Exact() {
				exact++
			}
			if valid, right := experiment.Grade(r.Text, held[r.Index].Completion); valid != r.Valid || !slices.Equal(right, r.Right) {
				t.Errorf("arm %d record %d: graded %v %v, recorded %v %v", a.Arm, r.Index, valid, right, r.Valid, r.Right)
			}
		}
		n := float64(len(recs))
		if a.OutputTokens != float64(outTok)/n || a.DecodeSteps != float64(steps)/n || a.Exact != float64(exact)/n {
			t.Errorf("arm %d: report says %.3f output tokens, %.3f steps, %.3f exact; the records %.3f, %.3f, %.3f",
				a.Arm, a.OutputTokens, a.DecodeSteps, a.Exact, float64(outTok)/n, float64(steps)/n, float64(exact)/n)
		}
		if len(a.Costs) < 2 || a.Costs[0].Profile != "epyc-zen3-2core" || !a.Costs[0].Priced || a.Costs[0].Seconds <= 0 {
			t.Errorf("arm %d costs: %+v", a.Arm, a.Costs)
		}
		for _, f := range experiment.Fields {
			if !strings.Contains(rep.Accuracy, " "+f+" |") {
				t.Errorf("accuracy table lacks the field %s:\n%s", f, rep.Accuracy)
			}
		}
	}
	// The measured times are the interleaved pass's: every record through every arm once.
	if !rep.InterleavedTimes {
		t.Error("report does not use the interleaved timing pass")
	}
	timings := readTimings(t, filepath.Join(w1, "eval", "timing.jsonl"))
	if len(timings) != 3*len(held) {
		t.Fatalf("%d timings for %d records × 3 arms", len(timings), len(held))
	}
	for _, a := range rep.Arms {
		var pre, dec float64
		seen := map[int]bool{}
		for _, tm := range timings {
			if tm.Arm == a.Arm {
				pre += tm.PrefillMs
				dec += tm.DecodeMs
				seen[tm.Index] = true
			}
		}
		n := float64(len(held))
		if len(seen) != len(held) || math.Abs(a.PrefillMs-pre/n) > 1e-9 || math.Abs(a.DecodeMs-dec/n) > 1e-9 {
			t.Errorf("arm %d: report's %.3f / %.3f ms, the timing pass's %.3f / %.3f over %d records", a.Arm, a.PrefillMs, a.DecodeMs, pre/n, dec/n, len(seen))
		}
	}
	for i, tm := range timings { // record r starts at arm r mod 3
		if want := (tm.Index + i%3) % 3; tm.Arm != want {
			t.Errorf("timing %d: arm %d for record %d, want arm %d", i, tm.Arm, tm.Index, want)
		}
	}

	// The record's output tokens are what `tokenwise generate` gives the same prompt.
	recs := readRecords(t, filepath.Join(w1, "eval", "arm2.jsonl"))
	promptFile := writeFile(t, tmp, "p.txt", train.ChatPrompt(held[0].Prompt))
	genOut := mustRun(t, "", "generate", "--model", filepath.Join(w1, "arm2"), "--prompt-file", promptFile, "--max-tokens", "40", "--threads", "2",
		"--json-schema", repoPath("domain", "debian", "answer.schema.json"), "--whitespace", "spaced", "--json")
	var gen struct {
		PromptIDs []int  `json:"prompt_ids"`
		Text      string `json:"text"`
		Usage     struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(genOut), &gen); err != nil {
		t.Fatal(err)
	}
	if gen.Usage.CompletionTokens != recs[0].OutputTokens || len(gen.PromptIDs) != recs[0].PromptTokens || gen.Text != recs[0].Text {
		t.Errorf("generate: %d prompt, %d output tokens, %q; the experiment recorded %d, %d, %q",
			len(gen.PromptIDs), gen.Usage.CompletionTokens, gen.Text, recs[0].PromptTokens, recs[0].OutputTokens, recs[0].Text)
	}
	var specCfg struct {
		VocabSize int `json:"vocab_size"`
	}
	readJSON(t, filepath.Join(w1, "arm2", "config.json"), &specCfg)
	if rep.Arms[2].LMHeadRows != specCfg.VocabSize || rep.Arms[1].LMHeadRows != 1024 || specCfg.VocabSize >= 1024 {
		t.Errorf("LM-head rows %d, %d, %d; arm 2's config %d", rep.Arms[0].LMHeadRows, rep.Arms[1].LMHeadRows, rep.Arms[2].LMHeadRows, specCfg.VocabSize)
	}
	if rep.Arms[1].PromptTokens <= rep.Arms[2].PromptTokens || rep.Arms[0].PromptTokens <= rep.Arms[1].PromptTokens {
		t.Errorf("prompt tokens %.1f (few-shot), %.1f, %.1f (specialized): want the few-shot longest, the specialized shortest",
			rep.Arms[0].PromptTokens, rep.Arms[1].PromptTokens, rep.Arms[2].PromptTokens)
	}
	if len(rep.Savings) != len(rep.Arms[0].Costs) || len(rep.Goals) != 3 {
		t.Errorf("%d savings for %d profiles, %d goals", len(rep.Savings), len(rep.Arms[0].Costs), len(rep.Goals))
	}
	for _, s := range rep.Savings {
		if d := s.Total - (s.Steps + s.Prompt + s.Head); d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: saving %.4f is not its parts %.4f + %.4f + %.4f", s.Profile, s.Total, s.Steps, s.Prompt, s.Head)
		}
	}
	md, err := os.ReadFile(filepath.Join(w1, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{rep.Accuracy, "h100-sxm", "## Goals", "from smaller head"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q", want)
		}
	}
	if svg, err := os.ReadFile(filepath.Join(w1, "report.svg")); err != nil || !strings.HasPrefix(string(svg), "<svg") {
		t.Errorf("report.svg: %v", err)
	}

	// A rerun skips every finished step; a new generation cap redoes the evaluations only.
	_, stderr = mustRunErr(t, args(w1)...)
	if n := strings.Count(stderr, "done earlier, skipped"); n != 9 {
		t.Errorf("rerun skipped %d steps, want 9:\n%s", n, stderr)
	}
	_, stderr = mustRunErr(t, args(w1, "--max-tokens", "30")...)
	for _, s := range []string{"export", "build the Debian task", "fine-tune", "specialize the vocabulary", "adapt the specialized"} {
		if !hasLine(stderr, s, "done earlier, skipped") {
			t.Errorf("--max-tokens 30: %q not skipped:\n%s", s, stderr)
		}
	}
	if strings.Count(stderr, "options changed since it ran") != 4 {
		t.Errorf("--max-tokens 30: want the 3 evaluations and the timing pass redone:\n%s", stderr)
	}
	mustRunErr(t, args(w1)...) // back to 40

	// An evaluation killed after one record and half of the next resumes from the first.
	evalPath := filepath.Join(w1, "eval", "arm1.jsonl")
	data, err := os.ReadFile(evalPath)
	if err != nil {
		t.Fatal(err)
	}
	first := strings.Index(string(data), "\n") + 1
	if err := os.WriteFile(evalPath, data[:first+20], 0o644); err != nil {
		t.Fatal(err)
	}
	done := filepath.Join(w1, "steps", "eval-arm1.done")
	fp, err := os.ReadFile(done)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(done)
	if err := os.WriteFile(filepath.Join(w1, "steps", "eval-arm1.started"), fp, 0o644); err != nil {
		t.Fatal(err)
	}
	mustRunErr(t, args(w1)...)
	again, err := os.ReadFile(evalPath)
	if err != nil {
		t.Fatal(err)
	}
	if !sameRecords(t, data, again) {
		t.Errorf("resumed evaluation differs:\n%s\nwas:\n%s", again, data)
	}
	var rep1 experiment.Report
	readJSON(t, filepath.Join(w1, "report.json"), &rep1)
	if rep1.Accuracy != rep.Accuracy {
		t.Errorf("accuracy table after resuming:\n%s\nwas:\n%s", rep1.Accuracy, rep.Accuracy)
	}

	// An adapt cut after its first step continues from its trainer state to the weights the
	// unbroken run wrote.
	weights := filepath.Join(w1, "arm1", "model.safetensors")
	want, err := os.ReadFile(weights)
	if err != nil {
		t.Fatal(err)
	}
	logData, err := os.ReadFile(filepath.Join(w1, "logs", "04-train-arm1.log"))
	if err != nil {
		t.Fatal(err)
	}
	var adaptArgs []string
	for _, l := range strings.Split(string(logData), "\n") {
		if strings.HasPrefix(l, "$ tokenwise adapt ") {
			adaptArgs = strings.Fields(strings.TrimPrefix(l, "$ tokenwise "))
		}
	}
	if len(adaptArgs) == 0 {
		t.Fatalf("no adapt command in the arm 1 log:\n%s", logData)
	}
	mustRunErr(t, append(adaptArgs, "--stop-at", "1")...)
	if _, err := os.Stat(filepath.Join(w1, "arm1.tmp", trainerStateFile)); err != nil {
		t.Fatalf("the cut adapt left no trainer state: %v", err)
	}
	done = filepath.Join(w1, "steps", "train-arm1.done")
	if fp, err = os.ReadFile(done); err != nil {
		t.Fatal(err)
	}
	os.Remove(done)
	if err := os.WriteFile(filepath.Join(w1, "steps", "train-arm1.started"), fp, 0o644); err != nil {
		t.Fatal(err)
	}
	_, stderr = mustRunErr(t, args(w1)...)
	if !hasLine(stderr, "fine-tune", "done") || hasLine(stderr, "fine-tune", "skipped") || !hasLine(stderr, "arm 1: evaluate", "skipped") {
		t.Errorf("after a cut adapt:\n%s", stderr)
	}
	logData, _ = os.ReadFile(filepath.Join(w1, "logs", "04-train-arm1.log"))
	if !strings.Contains(string(logData), "continuing from the trainer state") || !strings.Contains(string(logData), "resuming at step 1/2") {
		t.Errorf("the rerun did not resume the cut adapt:\n%s", logData)
	}
	if got, err := os.ReadFile(weights); err != nil || !bytes.Equal(got, want) {
		t.Errorf("resumed adapt's weights differ from the unbroken run's (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(w1, "arm1", trainerStateFile)); err == nil {
		t.Errorf("the finished arm keeps its trainer state")
	}

	// The same seed in a fresh folder: the same accuracy table; also with the arms trained
	// by another process given adapt's flags (--adapt-with: this test binary as tokenwise,
	// its adapt), to the same weights, and with three records answered at once on one
	// thread each (--eval-workers), whose answers the timing pass, on two threads, checks.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TOKENWISE_CLI_MAIN", "1")
	w2 := filepath.Join(tmp, "w2")
	mustRunErr(t, args(w2, "--adapt-with", self+" adapt", "--eval-workers", "3", "--time-records", "2")...)
	var rep2 experiment.Report
	readJSON(t, filepath.Join(w2, "report.json"), &rep2)
	if n := len(readTimings(t, filepath.Join(w2, "eval", "timing.jsonl"))); n != 6 || rep2.TimedRecords != 2 {
		t.Errorf("--time-records 2: %d timings, the report says %d records timed", n, rep2.TimedRecords)
	}
	if rep2.Accuracy != rep.Accuracy {
		t.Errorf("second run's accuracy table:\n%s\nfirst:\n%s", rep2.Accuracy, rep.Accuracy)
	}
	if got, err := os.ReadFile(filepath.Join(w2, "arm1", "model.safetensors")); err != nil || !bytes.Equal(got, want) {
		t.Errorf("arm 1 trained by --adapt-with differs from tokenwise adapt's (%v)", err)
	}
	logData, _ = os.ReadFile(filepath.Join(w2, "logs", "07-train-arm2.log"))
	if !strings.Contains(string(logData), "$ "+self+" adapt --model ") {
		t.Errorf("arm 2 was not trained by the --adapt-with command:\n%s", logData)
	}
	for i := 0; i < 3; i++ {
		a, b := readRecords(t, filepath.Join(w1, "eval", "arm"+strconv.Itoa(i)+".jsonl")), readRecords(t, filepath.Join(w2, "eval", "arm"+strconv.Itoa(i)+".jsonl"))
		for j := range a {
			if j >= len(b) || a[j].Text != b[j].Text || a[j].Index != b[j].Index {
				t.Errorf("arm %d record %d: answered alone %+v, three at a time %+v", i, j, a[j], b)
			}
		}
	}

	// --arm2-steps retrains arm 2 alone, for that many steps.
	_, stderr = mustRunErr(t, args(w1, "--arm2-steps", "3")...)
	if !hasLine(stderr, "fine-tune", "skipped") || !hasLine(stderr, "arm 2: adapt", "done") || !hasLine(stderr, "arm 2: evaluate", "done") {
		t.Errorf("--arm2-steps 3:\n%s", stderr)
	}
	if a, err := os.ReadFile(filepath.Join(w1, "arm2", "adapt.txt")); err != nil || !strings.Contains(string(a), "adapt: 3 steps") {
		t.Errorf("arm 2 after --arm2-steps 3: %q (%v)", a, err)
	}
	if md, err := os.ReadFile(filepath.Join(w1, "report.md")); err != nil || !strings.Contains(string(md), "2 steps (arm 1), 3 (arm 2, --arm2-steps)") {
		t.Errorf("report does not give the arms' steps: %v", err)
	}

	if _, _, err := run(t, "", "experiment", "--model", gguf, "--work", filepath.Join(tmp, "w3"), "--dtype", "f16"); err == nil || !strings.Contains(err.Error(), "--dtype") {
		t.Errorf("--dtype f16: %v", err)
	}
	if _, _, err := run(t, "", "experiment", "--model", gguf, "--work", filepath.Join(tmp, "w3"), "--price", "h100"); err == nil || !strings.Contains(err.Error(), "--price") {
		t.Errorf("--price h100: %v", err)
	}
}

// tinyDebianModel writes, under tmp, the Debian task (deb/: 200 training and 10 held-out
// records of this machine's packages), a tokenizer trained on it (tok/) and a tiny
// random-weight llama on that tokenizer (synth/, f32, tied embeddings), and returns synth/.
func tinyDebianModel(t *testing.T, tmp string) string {
	t.Helper()
	if _, err := os.Stat(debian.StatusFile); err != nil {
		t.Skipf("no %s: the Debian task is made from this machine's package records", debian.StatusFile)
	}
	mustRunErr(t, "corpus", "--task", "debian", "--out", filepath.Join(tmp, "deb"), "--train", "200", "--held-out", "10")
	tok := filepath.Join(tmp, "tok")
	mustRun(t, "", "train-tokenizer", "--corpus", filepath.Join(tmp, "deb", "train.jsonl"), "--vocab-size", "420", "--out", tok)
	cfg := writeFile(t, tmp, "cfg.json", `{"model_type":"llama","vocab_size":1024,"hidden_size":32,"intermediate_size":64,"num_hidden_layers":2,
	"num_attention_heads":2,"num_key_value_heads":1,"head_dim":16,"max_position_embeddings":4096,"rms_norm_eps":1e-5,
	"rope_theta":10000,"tie_word_embeddings":true}`)
	synthDir := filepath.Join(tmp, "synth")
	mustRunErr(t, "synth", "--config", cfg, "--tokenizer", tok, "--dtype", "f32", "--seed", "3", "--out", synthDir)
	return synthDir
}

// hasLine says some line of text holds both a and b.
func hasLine(text, a, b string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, a) && strings.Contains(l, b) {
			return true
		}
	}
	return false
}

func readPairs(t *testing.T, path string) []experiment.Example {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []experiment.Example
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var ex experiment.Example
		if err := json.Unmarshal([]byte(line), &ex); err != nil {
			t.Fatal(err)
		}
		out = append(out, ex)
	}
	return out
}

func readTimings(t *testing.T, path string) []experiment.Timing {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []experiment.Timing
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var tm experiment.Timing
		if err := json.Unmarshal([]byte(line), &tm); err != nil {
			t.Fatal(err)
		}
		out = append(out, tm)
	}
	return out
}

func readRecords(t *testing.T, path string) []experiment.Record {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []experiment.Record
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r experiment.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}

// sameRecords compares two evaluations' records but for their timings.
func sameRecords(t *testing.T, a, b []byte) bool {
	t.Helper()
	strip := func(data []byte) []experiment.Record {
		var out []experiment.Record
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			var r experiment.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			r.PrefillMs, r.DecodeMs = 0, 0
			out = append(out, r)
		}
		return out
	}
	ra, rb := strip(a), strip(b)
	if len(ra) != len(rb) {
		return false
	}
	for i := range ra {
		ja, _ := json.Marshal(ra[i])
		jb, _ := json.Marshal(rb[i])
		if string(ja) != string(jb) {
			return false
		}
	}
	return true
}
