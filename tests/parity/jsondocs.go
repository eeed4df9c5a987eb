package parity

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"unicode/utf16"
)

// JSONDocs generates n JSON documents like those a narrow-task model reads and writes:
// receipts, essay grades, support tickets, contract clauses and nested configuration, in
// English and Korean, printed in several styles (compact, Python-style ", "/": " separators,
// indented with spaces or tabs, non-ASCII as \u escapes, JSONL). Deterministic.
func JSONDocs(n int) []Text {
	r := rand.New(rand.NewPCG(2, 7))
	out := make([]Text, 0, n)
	for i := range n {
		var v any
		switch i % 5 {
		case 0:
			v = receipt(r)
		case 1:
			v = essayGrade(r)
		case 2:
			v = ticket(r)
		case 3:
			v = contract(r)
		default:
			v = nested(r, 4)
		}
		st := styles[i%len(styles)]
		var b strings.Builder
		if st.jsonl {
			// Several compact records, one per line.
			for k := range 1 + r.IntN(5) {
				if k > 0 {
					v = essayGrade(r)
				}
				writeJSON(&b, v, st, 0)
				b.WriteByte('\n')
			}
		} else {
			writeJSON(&b, v, st, 0)
			if i%3 == 0 {
				b.WriteByte('\n')
			}
		}
		out = append(out, Text{Source: "json", Name: fmt.Sprintf("json/%d", i), Text: b.String()})
	}
	return out
}

// obj keeps key order, as model output does.
type obj []kv

type kv struct {
	k string
	v any
}

type jsonStyle struct {
	comma, colon string // separators
	indent       string // "" = one line
	ascii        bool   // non-ASCII as \uXXXX (surrogate pairs above U+FFFF)
	escapeHTML   bool   // <, >, & as \u003c... as Go's encoding/json does
	jsonl        bool
}

var styles = []jsonStyle{
	{comma: ",", colon: ":"},
	{comma: ", ", colon: ": "},
	{comma: ",", colon: ": ", indent: "  "},
	{comma: ",", colon: ": ", indent: "    ", ascii: true},
	{comma: ",", colon: ":", escapeHTML: true},
	{comma: ",", colon: ": ", indent: "\t"},
	{comma: ", ", colon: ": ", ascii: true},
	{comma: ",", colon: ":", jsonl: true},
}

func writeJSON(b *strings.Builder, v any, st jsonStyle, depth int) {
	nl := func(d int) {
		if st.indent != "" {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(st.indent, d))
		}
	}
	sep := st.comma
	if st.indent != "" {
		sep = "," // the line break follows
	}
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case int64:
		b.WriteString(strconv.FormatInt(x, 10))
	case int:
		b.WriteString(strconv.Itoa(x))
	case float64:
		b.WriteString(strconv.FormatFloat(x, 'g', -1, 64))
	case string:
		writeJSONString(b, x, st)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(sep)
			}
			nl(depth + 1)
			writeJSON(b, e, st, depth+1)
		}
		if len(x) > 0 {
			nl(depth)
		}
		b.WriteByte(']')
	case obj:
		b.WriteByte('{')
		for i, e := range x {
			if i > 0 {
				b.WriteString(sep)
			}
			nl(depth + 1)
			writeJSONString(b, e.k, st)
			b.WriteString(st.colon)
			writeJSON(b, e.v, st, depth+1)
		}
		if len(x) > 0 {
			nl(depth)
		}
		b.WriteByte('}')
	default:
		panic(fmt.Sprintf("parity: unexpected JSON value %T", v)) // generator bug, not input
	}
}

func writeJSONString(b *strings.Builder, s string, st jsonStyle) {
	b.WriteByte('"')
	for _, c := range s {
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20 || (st.escapeHTML && (c == '<' || c == '>' || c == '&')):
			fmt.Fprintf(b, `\u%04x`, c)
		case c > 0x7e && st.ascii:
			if c > 0xffff {
				r1, r2 := utf16.EncodeRune(c)
				fmt.Fprintf(b, `\u%04x\u%04x`, r1, r2)
			} else {
				fmt.Fprintf(b, `\u%04x`, c)
			}
		default:
			b.WriteRune(c)
		}
	}
	b.WriteByte('"')
}

func pick[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

var (
	stores   = []string{"Trader Joe's", "GS25 역삼점", "CU 강남대로점", "Starbucks Reserve", "이마트 성수점", "Café Müller", "7-Eleven #4471", "올리브영 명동본점", "Ａｍａｚｏｎ Ｆｒｅｓｈ"}
	items    = []string{"Organic bananas", "아메리카노 (L)", "Whole milk 1L", "삼각김밥 참치마요", "Croissant", "USB-C cable 2m", "바나나우유 240ml", "Eggs (12 pk)", "햇반 210g×3", "Crème brûlée", "Green tea 500mL", "라면 5입"}
	feedback = []string{
		"The thesis is clear, but the second paragraph lacks evidence.",
		"논지는 명확하지만 두 번째 문단의 근거가 부족합니다.",
		"Good structure; watch subject–verb agreement (e.g. \"the data shows\").",
		"서론과 결론이 잘 연결되어 있습니다. 다만 맞춤법 오류가 3건 있습니다.",
		"Excellent use of transitions — \"however\", \"moreover\" — throughout.",
		"주장에 대한 반론을 다루지 않았습니다; 반례를 추가하세요.",
		"Off-topic in parts.\nRevise paragraph 3.",
		"Score lowered for length (<150 words) & missing citations.",
		"표현이 자연스럽고 어휘 선택이 적절합니다 👍",
	}
	statuses = []string{"approved", "rejected", "pending", "needs_review", "escalated", "closed"}
	cats     = []string{"billing", "login", "배송", "환불", "bug", "feature_request", "account/security"}
	clauses  = []string{
		"The Licensee shall not sublicense, assign, or transfer the Software without prior written consent.",
		"본 계약은 대한민국 법률에 따라 해석되며, 분쟁은 서울중앙지방법원을 관할 법원으로 한다.",
		"Payment is due within thirty (30) days of the invoice date; late payments accrue 1.5% interest per month.",
		"Either party may terminate this Agreement upon 60 days' written notice.",
		"갑은 을에게 매월 말일까지 용역 대금을 지급한다.",
	}
)

func money(r *rand.Rand) float64 {
	return math.Round(r.Float64()*10000*100) / 100
}

func receipt(r *rand.Rand) obj {
	var lines []any
	total := 0.0
	for range 1 + r.IntN(6) {
		q := 1 + r.IntN(4)
		p := math.Round(r.Float64()*3000) / 100
		total += float64(q) * p
		lines = append(lines, obj{{"name", pick(r, items)}, {"qty", q}, {"unit_price", p}})
	}
	return obj{
		{"merchant", pick(r, stores)},
		{"date", fmt.Sprintf("2026-%02d-%02dT%02d:%02d:00+09:00", 1+r.IntN(12), 1+r.IntN(28), r.IntN(24), r.IntN(60))},
		{"items", lines},
		{"subtotal", math.Round(total*100) / 100},
		{"tax", math.Round(total*10) / 100},
		{"total_krw", int(total * 1000)},
		{"currency", pick(r, []string{"USD", "KRW", "EUR"})},
		{"card", fmt.Sprintf("**** **** **** %04d", r.IntN(10000))},
		{"approved", r.IntN(2) == 0},
		{"memo", nil},
	}
}

func essayGrade(r *rand.Rand) obj {
	return obj{
		{"score", r.IntN(6)},
		{"feedback", pick(r, feedback)},
		{"rubric", obj{{"content", r.IntN(5)}, {"organization", r.IntN(5)}, {"grammar", r.IntN(5)}}},
		{"confidence", math.Round(r.Float64()*1000) / 1000},
		{"status", pick(r, statuses)},
	}
}

func ticket(r *rand.Rand) obj {
	tags := []any{}
	for range r.IntN(4) {
		tags = append(tags, pick(r, cats))
	}
	return obj{
		{"id", fmt.Sprintf("TCK-%06d", r.IntN(1000000))},
		{"category", pick(r, cats)},
		{"priority", r.IntN(5) + 1},
		{"tags", tags},
		{"sentiment", -1 + 2*math.Round(r.Float64()*100)/100},
		{"summary", pick(r, feedback)},
		{"user", obj{{"id", r.Int64N(1 << 53)}, {"email", fmt.Sprintf("user%d@example.co.kr", r.IntN(9999))}, {"locale", pick(r, []string{"ko-KR", "en-US", "ja-JP"})}}},
	}
}

func contract(r *rand.Rand) obj {
	var parts []any
	for k := range 1 + r.IntN(4) {
		parts = append(parts, obj{{"section", fmt.Sprintf("%d.%d", 1+k, r.IntN(9))}, {"text", pick(r, clauses)}, {"risk", pick(r, []string{"low", "medium", "high"})}})
	}
	return obj{{"document", "Master Services Agreement"}, {"parties", []any{"ACME Corp.", "주식회사 한빛"}}, {"clauses", parts}, {"effective", "2026-01-01"}, {"amount", 1.25e6 * float64(1+r.IntN(9))}, {"ratio", 1e-7 * float64(r.IntN(100))}}
}

func nested(r *rand.Rand, depth int) any {
	if depth == 0 || r.IntN(4) == 0 {
		switch r.IntN(7) {
		case 0:
			return r.IntN(2000000) - 1000000
		case 1:
			return r.NormFloat64() * 1e3
		case 2:
			return pick(r, feedback)
		case 3:
			return nil
		case 4:
			return r.IntN(2) == 0
		case 5:
			return strings.Repeat("9", 1+r.IntN(40))
		default:
			return pick(r, []string{"", " ", "\\", "\"quoted\"", "tab\there", "😀👩‍💻🇰🇷", "<b>&amp;</b>", "C:\\Users\\me", "a/b/c?x=1&y=2"})
		}
	}
	if r.IntN(2) == 0 {
		var xs []any
		for range r.IntN(5) {
			xs = append(xs, nested(r, depth-1))
		}
		return xs
	}
	var o obj
	for k := range 1 + r.IntN(5) {
		o = append(o, kv{fmt.Sprintf("%s_%d", pick(r, []string{"key", "값", "data", "meta", "x"}), k), nested(r, depth-1)})
	}
	return o
}
