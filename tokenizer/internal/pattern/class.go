package pattern

import (
	"sync"
	"unicode"
	"unicode/utf8"
)

// Character classes the hand-written matchers test, as bits of one byte so a
// single table lookup answers every question the patterns ask about a rune.
const (
	cL     uint8 = 1 << iota // \p{L}
	cN                       // \p{N}
	cS                       // \s: Unicode White_Space, as Oniguruma defines it
	cUp                      // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] (o200k)
	cLw                      // [\p{Ll}\p{Lm}\p{Lo}\p{M}] (o200k)
	cMulti                   // in byteClass only: the byte starts no ASCII rune
)

// catTables returns Go's table of each general category followed by what
// the category gained in Oniguruma's newer Unicode (unicode_delta.go), so the
// classes mean what they mean in HF tokenizers.
func catTables(cats ...string) []*unicode.RangeTable {
	var ts []*unicode.RangeTable
	for _, c := range cats {
		ts = append(ts, unicode.Categories[c])
		if d, ok := unicodeDelta[c]; ok {
			ts = append(ts, d)
		}
	}
	return ts
}

// byteClass answers for ASCII without decoding (most bytes of most text) and
// marks every other byte cMulti; indexing by a whole byte needs no bounds check.
var byteClass [256]uint8

// Every other rune is covered by a two-level table: runeIndex maps r>>8 to one
// of the distinct 256-entry blocks in runeBlocks. Most blocks repeat (all of
// CJK is "letter, Lo"; most of the astral planes are unassigned), so the whole
// of Unicode takes ~45 KB and a scan in any one script touches a few blocks.
// A binary search of the unicode tables per rune would cost more than the
// rest of the matcher.
var (
	runeIndex  [(unicode.MaxRune + 1) >> 8]uint16
	runeBlocks []uint8
	tablesOnce sync.Once
)

func initTables() {
	tablesOnce.Do(func() {
		flat := make([]uint8, unicode.MaxRune+1)
		mark := func(bit uint8, tables []*unicode.RangeTable) {
			for _, t := range tables {
				for _, r := range t.R16 {
					for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
						flat[c] |= bit
					}
				}
				for _, r := range t.R32 {
					for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
						flat[c] |= bit
					}
				}
			}
		}
		mark(cL, catTables("Lu", "Ll", "Lt", "Lm", "Lo"))
		mark(cN, catTables("Nd", "Nl", "No"))
		mark(cS, []*unicode.RangeTable{unicode.White_Space})
		mark(cUp, catTables("Lu", "Lt", "Lm", "Lo", "Mn", "Mc", "Me"))
		mark(cLw, catTables("Ll", "Lm", "Lo", "Mn", "Mc", "Me"))

		for b := 0; b < 256; b++ {
			byteClass[b] = cMulti
			if b < utf8.RuneSelf {
				byteClass[b] = flat[b]
			}
		}
		seen := map[[256]uint8]uint16{}
		for hi := range runeIndex {
			blk := [256]uint8(flat[hi<<8 : hi<<8+256])
			idx, ok := seen[blk]
			if !ok {
				idx = uint16(len(runeBlocks) >> 8)
				runeBlocks = append(runeBlocks, blk[:]...)
				seen[blk] = idx
			}
			runeIndex[hi] = idx
		}
	})
}

// class returns the class bits and the byte length of the rune at s[i]
// (i < len(s)). An invalid UTF-8 byte counts as one rune U+FFFD, which is how
// the regexp2 fallback reads it, so both matchers cut invalid input alike.
func class(s string, i int) (uint8, int) {
	if c := byteClass[s[i]]; c&cMulti == 0 {
		return c, 1
	}
	return classMulti(s, i)
}

// classMulti is class for a rune that is not ASCII; kept out of line so that
// the ASCII test inlines into the scanning loops.
func classMulti(s string, i int) (uint8, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	return runeBlocks[int(runeIndex[r>>8])<<8|int(r&0xff)], n
}
