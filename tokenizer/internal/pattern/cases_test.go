package pattern

import (
	"math/rand/v2"
	"strings"
)

var knownExprs = []struct{ name, expr string }{
	{"gpt2", exprGPT2},
	{"llama3", exprLlama3},
	{"qwen2", exprQwen2},
	{"o200k", exprO200k},
	{"tekken", exprTekken},
}

// trickyInputs are the strings where the patterns' alternatives compete:
// whitespace that is not ASCII, line breaks, marks, digits of every kind,
// contractions in any case, and letters of every category.
var trickyInputs = []string{
	"",
	" ",
	"Hello world",
	"Hello, world! How's it going? I'M FINE, THEY'LL SEE, we'd've.",
	"don't DON'T Don'T 'S 'T 'RE 'VE 'M 'LL 'D 'll'll''s '",
	"it\u2019s the cat\u2019S toy \u2018quoted\u2019",
	"'ſ 'ſt 'K 'k 'ǅ",
	"a  b   c    d\t\te \t f",
	"  leading and trailing  ",
	"x\u00a0y \u00a0 z\u00a0\u00a0",
	"word\u3000word \u3000\u3000 end\u3000",
	"v\vf\fv \v\f x",
	"n\u0085e\u2028l\u2029p \u2028 q",
	"\u1680\u2000\u2001\u200a\u202f\u205f x\u200by\ufeffz",
	"line one\r\nline two\r\n\r\n  \r\n\tindented\n\n\nend\r",
	"a\r\n\r\n   b\n \n c \n",
	"{\n  \"key\": \"value\",\n  \"n\": [1, 2, 3]\n}\n",
	"func main() {\n\tfmt.Println(\"hi\") // comment\n\tx := a/b + c*d\n}\n",
	"path/to/file.go:12:3: http://example.com/a/b?c=d&e=f//g\n/\n//\r\n",
	"e\u0301te\u0301 cafe\u0301 \u0301\u0301x n\u0303 \u0301 a\u20dd",
	"\u0928\u092e\u0938\u094d\u0924\u0947 \u0939\u093f\u0928\u094d\u0926\u0940",
	"\U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F44D\U0001F3FD family\U0001F600\U0001F600",
	"1 12 123 1234 12345 123456 1234567 12345678 123456789 1234567890",
	"\u0661\u0662\u0663\u0664\u0665 \uff11\uff12\uff13\uff14 \u00b2\u00b3\u00b9 \u2167\u2168 \u00bd\u00bc x\u00b2",
	"\u0967\u0968\u0969\u096a a1b22c333d4444 3.14159 1,000,000 -42 +7",
	"\u4f60\u597d\u4e16\u754c\uff0c\u4f60\u597d\u3002\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
	"\uc548\ub155\ud558\uc138\uc694 \u0645\u0631\u062d\u0628\u0627 \u05e9\u05dc\u05d5\u05dd \u041f\u0440\u0438\u0432\u0435\u0442",
	"\u01c5a \u01c8b \u1f88c HelloWorld camelCase XMLHttpRequest iPhone \u02b0\u02b1 \u3005\u3005",
	"ABC'S abc's ABC'll Abc'LL \u00c9cole'S \u01c5'd",
	"!!! ??? ... --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]]",
	" !\n !\r\n ?? \r\n\r\n x !/ !// !/\n",
	"tab\there\ttab\t\t\nnl",
	strings.Repeat("a", 300) + " " + strings.Repeat("\u00e9", 200),
	strings.Repeat(" ", 100) + "x" + strings.Repeat(" ", 100),
	strings.Repeat("9", 50),
	"\xff\xfe invalid \xc3 utf8 \xe2\x82 here\x80 's\xff 1\xff2",
	"\x00\x01\x1f\x7f control \u200e\u200f",
	// Assigned in Unicode 15.1/16.0, which Oniguruma knows and Go 1.26 does
	// not: CJK Ext-I (Lo), Myanmar Ext-C digits (Nd), Garay letters and marks.
	"\U0002EBF0\U0002EBF1 x\U0002EBF2 \U000116D0\U000116D1\U000116D2\U000116D3 \U00010D50\U00010D70\U00010D69a",
	"\U0001CCF0\U0001CCF1 \U00016D40\U00016D41 \U000105C0'S",
}

// randomText builds adversarial strings from a small alphabet in which every
// character class the patterns distinguish is represented.
func randomText(r *rand.Rand, n int) string {
	atoms := []string{
		"a", "b", "Z", "s", "t", "S", "T", "l", "L", "d", "m", "r", "e", "v", "'", "\u2019",
		" ", " ", "  ", "\t", "\n", "\r", "\r\n", "\v", "\f", "\u00a0", "\u3000", "\u0085", "\u2028",
		"0", "7", "\u0663", "\uff15", "\u00b2", "\u2167", "\u00bd",
		"\u0301", "\u0903", "\u20dd", "\u00e9", "\u00c9", "\u01c5", "\u02b0", "\u4e2d", "\u0915",
		".", ",", "!", "/", "//", "-", "_", "\"", "{", "}", "$", "\u00a7", "\U0001F600", "\u200d",
		"\u017f", "\u212a", "\xff", "\xc3", "\x00", "\U0002EBF0", "\U000116D0", "\U00010D69",
	}
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(atoms[r.IntN(len(atoms))])
	}
	return b.String()
}

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)) }
