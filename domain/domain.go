// Package domain generates a synthetic but structured domain corpus: essay-grading prompts
// and the JSON verdicts a grader model writes for them, always with the same schema. It is
// deterministic for a seed, so train and held-out splits are reproducible (different seeds),
// and it is the corpus the vocabulary specialization and the adaptation training measure on.
package domain

import (
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// Verdict is the fixed schema of a completion; Completion is its JSON in this key order.
type Verdict struct {
	Score      int    `json:"score"`
	Grammar    int    `json:"grammar"`
	Coherence  int    `json:"coherence"`
	Vocabulary int    `json:"vocabulary"`
	Verdict    string `json:"verdict"`
	Strengths  string `json:"strengths"`
	Weaknesses string `json:"weaknesses"`
	Feedback   string `json:"feedback"`
}

// Schema is the JSON Schema of a Verdict, in Completion's key order: what structured output
// (response_format json_schema, tokenwise generate --json-schema) constrains a grader to.
const Schema = `{"type":"object","properties":{` +
	`"score":{"type":"integer","minimum":1,"maximum":5},"grammar":{"type":"integer","minimum":1,"maximum":5},` +
	`"coherence":{"type":"integer","minimum":1,"maximum":5},"vocabulary":{"type":"integer","minimum":1,"maximum":5},` +
	`"verdict":{"enum":["pass","fail"]},"strengths":{"type":"string"},"weaknesses":{"type":"string"},"feedback":{"type":"string"}},` +
	`"required":["score","grammar","coherence","vocabulary","verdict","strengths","weaknesses","feedback"],"additionalProperties":false}`

// Example is one grading request: the prompt (instructions + essay) and the verdict.
type Example struct {
	Prompt     string
	Completion string
	Fields     Verdict
	Topic      string // what the essay is about ("school uniforms"), one of Topics
}

// Topics are the subjects essays are written on, as verdicts name them.
func Topics() []string {
	var names []string
	for _, t := range topics {
		names = append(names, t.name)
	}
	return names
}

// Instruction is the fixed grading instruction that opens every prompt.
const Instruction = `You are an essay grader. Read the student's essay and grade it with the rubric.
Rubric: score, grammar, coherence and vocabulary are integers from 1 to 5; verdict is "pass" when score >= 3, else "fail".
Answer with one JSON object with the keys score, grammar, coherence, vocabulary, verdict, strengths, weaknesses, feedback.`

// BestScoreAccuracy is the score accuracy a perfect grader can expect on these examples.
// The essay depends on its score only through whether it is weak (1-2: writeEssay drops
// capitals and runs sentences on) or not (3-5), and within each group the score is drawn
// uniformly, so the best guess is right 1/2 of the time for a weak essay (2 of the 5
// levels) and 1/3 for the others: 2/5 × 1/2 + 3/5 × 1/3 = 40%, a little less for the few
// weak essays that happen to show no sign of it. The verdict (pass from 3 up) is what the
// essay does decide.
const BestScoreAccuracy = 2.0/5*(1.0/2) + 3.0/5*(1.0/3)

// Generate returns n examples drawn from seed. The same seed always gives the same examples.
func Generate(seed uint64, n int) []Example {
	r := rand.New(rand.NewPCG(seed, 0x7e55a7))
	out := make([]Example, 0, max(n, 0))
	for i := 0; i < n; i++ {
		out = append(out, generateOne(r))
	}
	return out
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func generateOne(r *rand.Rand) Example {
	topic := pick(r, topics)
	quality := 1 + r.IntN(5) // the essay's true level drives both the essay and the verdict
	essay := writeEssay(r, topic, quality)
	clamp := func(v int) int { return min(5, max(1, v)) }
	v := Verdict{
		Score:      quality,
		Grammar:    clamp(quality + r.IntN(3) - 1),
		Coherence:  clamp(quality + r.IntN(3) - 1),
		Vocabulary: clamp(quality + r.IntN(3) - 1),
	}
	v.Verdict = "fail"
	if v.Score >= 3 {
		v.Verdict = "pass"
	}
	fill := func(s string) string {
		s = strings.ReplaceAll(s, "{topic}", topic.name)
		s = strings.ReplaceAll(s, "{aspect}", pick(r, aspects))
		return s
	}
	level := (quality - 1) / 2 // 0: weak (1-2), 1: fair (3-4), 2: strong (5)
	v.Strengths = fill(pick(r, strengths[level]))
	v.Weaknesses = fill(pick(r, weaknesses[level]))
	fb := []string{fill(pick(r, feedbackOpen[level])), fill(pick(r, feedbackAdvice))}
	if r.IntN(2) == 0 {
		fb = append(fb, fill(pick(r, feedbackClose)))
	}
	v.Feedback = strings.Join(fb, " ")
	completion, err := json.Marshal(v)
	if err != nil { // a struct of strings and ints always marshals
		panic(fmt.Sprintf("domain: %v", err))
	}
	// json.Marshal writes no spaces; graders (and chat models) write `"key": value`.
	prompt := fmt.Sprintf("%s\n\nTopic: %s\n\nEssay:\n%s", Instruction, topic.title, essay)
	return Example{Prompt: prompt, Completion: spaced(string(completion)), Fields: v, Topic: topic.name}
}

// spaced re-renders compact JSON with a space after each key colon and comma, the way
// Python's json.dumps (and most chat models) write it.
func spaced(compact string) string {
	var b strings.Builder
	inStr, esc := false, false
	for i := 0; i < len(compact); i++ {
		c := compact[i]
		b.WriteByte(c)
		switch {
		case esc:
			esc = false
		case inStr && c == '\\':
			esc = true
		case c == '"':
			inStr = !inStr
		case !inStr && (c == ':' || c == ','):
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func writeEssay(r *rand.Rand, t topic, quality int) string {
	nPara := 2 + r.IntN(2)
	var paras []string
	for p := 0; p < nPara; p++ {
		nSent := 3 + r.IntN(3)
		var sents []string
		for s := 0; s < nSent; s++ {
			tmpl := pick(r, sentenceTemplates)
			s := tmpl
			for strings.Contains(s, "{") {
				s = strings.Replace(s, "{noun}", pick(r, t.nouns), 1)
				s = strings.Replace(s, "{verb}", pick(r, verbs), 1)
				s = strings.Replace(s, "{adj}", pick(r, adjectives), 1)
				s = strings.Replace(s, "{link}", pick(r, linkers), 1)
				s = strings.Replace(s, "{topic}", t.name, 1)
			}
			if quality <= 2 && r.IntN(3) == 0 {
				s = strings.ToLower(s) // weak essays: missing capitals and run-ons
				s = strings.Replace(s, ". ", " and ", 1)
			}
			sents = append(sents, s)
		}
		paras = append(paras, strings.Join(sents, " "))
	}
	return strings.Join(paras, "\n\n")
}

// WriteJSONL writes examples as {"prompt": ..., "completion": ...} lines, the corpus format
// `tokenwise analyze` and `tokenwise specialize` read.
func WriteJSONL(w io.Writer, examples []Example) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i, ex := range examples {
		if err := enc.Encode(struct {
			Prompt     string `json:"prompt"`
			Completion string `json:"completion"`
		}{ex.Prompt, ex.Completion}); err != nil {
			return fmt.Errorf("example %d: %w", i, err)
		}
	}
	return nil
}
