package parity

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Specials are added/special token strings of the four reference tokenizers (and a few
// non-special added tokens): each tokenizer must match its own and treat the others as text.
var Specials = []string{
	// Qwen3
	"<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|vision_pad|>", "<think>", "</think>",
	"<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>", "<|repo_name|>",
	// Llama-3
	"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
	"<|eot_id|>", "<|reserved_special_token_0|>", "<|reserved_special_token_247|>",
	// Gemma-3 (special and non-special added tokens, some normalized=false runs)
	"<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>",
	"<start_of_image>", "<image_soft_token>", "<unused0>", "<unused98>", "<table>", "</td>",
	"<h3>", "</strong>", "<iframe>", "▁▁", "▁▁▁▁▁", "\n\n", "\n\n\n\n\n", "\t\t\t",
	// GPT-4o
	"<|endofprompt|>",
}

// Adversarial returns hand-written and generated edge cases: whitespace runs of every kind,
// CRLF, combining marks, emoji sequences, long digit runs, upper-case contractions, very long
// words, text around, inside and partly matching added/special tokens, control characters
// and many scripts. Deterministic.
func Adversarial() []Text {
	var out []Text
	add := func(group string, texts ...string) {
		for _, s := range texts {
			out = append(out, Text{Source: "adversarial", Name: fmt.Sprintf("adversarial/%s/%d", group, len(out)), Text: s})
		}
	}

	add("basic", "", " ", "  ", "\n", "\t", "a", " a", "a ", " a ", "  leading", "trailing  ",
		"Hello world", " Hello world", "Hello  world", "Hello\u00a0world", "{\"status\": \"approved\"}",
		"ied 4 ½ months", "Äpfel", "w048 7tuijk dsdfhu", "нещо на Български", "this is 🦙.cpp")

	// Whitespace: every kind, alone, in runs, between and around words, mixed.
	ws := []string{" ", "\u00a0", "\u3000", "\v", "\f", "\t", "\n", "\r", "\r\n", "\u2009", "\u200b",
		"\u2028", "\u2029", "\u0085", "\u1680", "\u202f", "\u205f", "\u180e", "\ufeff"}
	for _, w := range ws {
		for _, n := range []int{1, 2, 3, 7} {
			run := strings.Repeat(w, n)
			add("ws", run, "a"+run+"b", run+"word", "word"+run, "x."+run+"Y", "1"+run+"2", run+"<|im_start|>"+run)
		}
	}
	for i, a := range ws {
		for j, b := range ws {
			if (i+j)%3 == 0 {
				add("ws-mix", "x"+a+b+"y", a+" "+b+"z", "z "+a+b+" ")
			}
		}
	}
	add("ws-long", strings.Repeat(" ", 10000), strings.Repeat("\n", 5000), strings.Repeat(" \n", 3000),
		strings.Repeat("\t ", 2000)+"x", "a"+strings.Repeat("\u00a0", 1000)+"b", strings.Repeat("\u3000", 3000))
	for _, ch := range []string{"\n", "\t", "▁", " "} {
		for n := 1; n <= 33; n += 2 {
			add("runs", strings.Repeat(ch, n), "x"+strings.Repeat(ch, n)+"y", strings.Repeat(ch, n)+"end")
		}
	}

	// Line ends.
	add("crlf", "line one\r\nline two\r\n", "a\r\n\r\n\r\nb", "\r\n", "\r\r\n\n", "x\r", "mixed\nline\r\nends\rhere\n\r",
		"  \r\n  indented\r\n\ttab\r\n", "{\r\n  \"a\": 1,\r\n  \"b\": [\r\n    2\r\n  ]\r\n}\r\n")

	// Combining marks, normalization forms, scripts.
	add("marks", "e\u0301", "cafe\u0301 vs café", "a\u0300\u0316\u0317\u0318\u0319", "Z\u0351\u0352\u0353\u0354a\u0355\u0356l\u0357\u0358g\u0359o",
		"Tie\u0302\u0301ng Vie\u0323\u0302t", "\u1112\u1161\u11ab\u1100\u1173\u11af", "한국어 텍스트", "\u0301 leading mark",
		"\u0915\u094d\u0937 \u0924\u094d\u0930 \u091c\u094d\u091e", "हिन्दी देवनागरी लिपि", "ภาษาไทยไม่มีช่องว่างระหว่างคำ",
		"العربية مع التشكيل: بِسْمِ اللَّهِ", "עברית עם ניקוד: שָׁלוֹם", "mixed עברית and English 123 and عربى",
		"\u202eRTL override\u202c", "\u200e\u200fmarks", "日本語のテキストと漢字、ひらがな、カタカナ。", "中文文本，没有空格。",
		"ཀ་ཁ་ག", "ᚠᛇᚻ᛫ᛒᛦᚦ", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝐁𝐨𝐥𝐝", "𠀀𠀁𠀂 CJK Ext B", "Ελληνικά Κείμενο", "Кириллица ЗАГЛАВНЫЕ",
		"ǅungla ǈj ǋ titlecase", "ﬁﬂ ligatures ＦＵＬＬＷＩＤＴＨ", "Ⅻ ⅻ ① ⑳ ½ ¾ ² ³", "ᄀᄁᄂ jamo ᅡᅢᅣ ᆨᆩ")

	// Emoji.
	add("emoji", "👩‍👩‍👧‍👦", "👨🏽‍💻 coding", "🇰🇷🇺🇸🇯🇵", "👍🏻👍🏼👍🏽👍🏾👍🏿", "1️⃣2️⃣#️⃣", "🏴󠁧󠁢󠁥󠁮󠁧󠁿 England",
		"❤️‍🔥", "🧑‍🤝‍🧑", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ (only emoji that has its own token)",
		strings.Repeat("😀", 2000), "text😀text", " 😀 ", "\u200d", "a\u200db", "\ufe0f")

	// Digits.
	digits := "31415926535897932384626433832795028841971693993751058209749445923078164062862089986280348253421170679"
	add("digits", "1", "12", "123", "1234", "12345", "1234567", strings.Repeat(digits, 10), "3.14159", "-0.5e-10",
		"1,234,567.89", "2026-11-29T18:25:12Z", "٣٤٥٦ Arabic-Indic", "１２３４ fullwidth", "१२३४ Devanagari",
		"v1.2.3-rc.4+build.567", "0x7fffffff 0b1010 0o777", "$1,000,000", "12:30pm", "a1b2c3d4", "１２３abc４５６")

	// Contractions, all cases and apostrophes.
	add("contractions", "IT'S", "WE'LL", "THEY'VE", "I'M", "YOU'D", "DON'T", "THEY'RE", "'S", "'LL'VE'RE",
		"it's we'll they've I'm you'd don't", "It'S We'Ll", " 's", "'s", "'", "''", "it’s (curly)", "x's'", "'sa 'llama",
		"ALL CAPS SENTENCE WITH JOHN'S AND MARY'LL", "'S'T'RE'VE'M'LL'D")

	// Very long words.
	r := rand.New(rand.NewPCG(11, 13))
	letters := func(alphabet string, n int) string {
		rs := []rune(alphabet)
		var b strings.Builder
		for range n {
			b.WriteRune(rs[r.IntN(len(rs))])
		}
		return b.String()
	}
	add("long", strings.Repeat("a", 10000), strings.Repeat("abc", 3400), letters("abcdefghijklmnopqrstuvwxyz", 10000),
		letters("абвгдеёжзийклмнопрстуфхцчшщъыьэюя", 5000), letters("가나다라마바사아자차카타파하", 4000),
		strings.Repeat("=", 10000), strings.Repeat("-_", 3000), strings.Repeat("é", 5000), strings.Repeat("ab ", 3000),
		"Supercalifragilisticexpialidocious"+strings.Repeat("s", 500), strings.Repeat("\u0301", 500),
		strings.Repeat("<|", 1000), strings.Repeat("▁", 3000))

	// Added and special tokens: alone, glued to words and spaces, doubled, partial, case-changed.
	for _, s := range Specials {
		rs := []rune(s)
		partial := string(rs[:len(rs)*2/3])
		add("special", s, "a"+s+"b", " "+s+" ", "  "+s+"  ", "word"+s+" word", s+s, "\n"+s+"\n",
			"ab"+s+"cd", "\u00a0"+s+"\u00a0", partial, partial+"x", "x"+partial, strings.ToUpper(s),
			s+"user\nHello!"+s, "<"+s+">", string(rs[1:]), "\t"+s)
	}
	add("chat", "<|im_start|>system\nYou are a grader.<|im_end|>\n<|im_start|>user\n{\"essay\": \"...\"}<|im_end|>\n<|im_start|>assistant\n",
		"<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
		"<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", "<|endoftext|><|endoftext|> <|endoftext|>",
		"<|im_start|><|im_end|>", "<|im_sta", "rt|>", "<|im_start", "im_start|>", "<|IM_START|>", "< |im_start| >",
		"<think>\nreasoning\n</think>\n\nanswer")

	// Control characters.
	var ctl strings.Builder
	for c := rune(0); c < 0x20; c++ {
		ctl.WriteRune(c)
		ctl.WriteString("x")
	}
	add("control", ctl.String(), "\x00", "a\x00b", "\x7f", "\u0080\u0081\u009f", "\ufffd", "\uffff", "\U0010ffff",
		"\ue000 private use", "\x1b[31mred\x1b[0m", "bell\a", "\x08backspace")

	// Random strings over an alphabet of troublesome pieces, to hit combinations nobody
	// thought of. Deterministic (fixed seed).
	pieces := []string{" ", "  ", "\n", "\t", "\r\n", "\u00a0", "\u3000", "\v", "\f", "a", "Z", "é", "e\u0301",
		"ß", "İ", "ı", "ǅ", "한", "ᄀ", "中", "ไ", "क्ष", "ع", "ש", "0", "7", "٣", "１", "½", "'", "'s", "'LL", "’",
		".", ",", "!", "?", "\"", "{", "}", ":", "/", "\\", "-", "_", "=", "<", ">", "|", "😀", "👍🏽", "🇰🇷", "\u200d",
		"\u0301", "\x00", "\x1b", "▁", "<|im_start|>", "<|endoftext|>", "<start_of_turn>", "<|begin_of_text|>", "<bos>",
		"<|im_sta", "rt|>", "<|", "|>", "hello", "WORLD", "123", "4567", "\n\n", "\t\t\t", "▁▁"}
	for range 3000 {
		var b strings.Builder
		for range 1 + r.IntN(24) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		add("random", b.String())
	}
	return out
}
