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

// classOf computes the class bits of r from the unicode package's tables. It
// costs a binary search per table, so the matchers only call it for runes
// outside the Basic Multilingual Plane; everything else comes from the
// precomputed tables below.
func classOf(r rune) uint8 {
	var c uint8
	if unicode.IsLetter(r) {
		c |= cL
	}
	if unicode.IsNumber(r) {
		c |= cN
	}
	if unicode.Is(unicode.White_Space, r) {
		c |= cS
	}
	mark := unicode.IsMark(r)
	if mark || unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo) {
		c |= cUp
	}
	if mark || unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo) {
		c |= cLw
	}
	return c
}

// byteClass answers for ASCII without decoding (most bytes of most text) and
// marks every other byte cMulti; indexing by a whole byte needs no bounds check.
var byteClass [256]uint8

// The BMP is covered by a two-level table: bmpIndex maps the high byte of a
// rune to one of the distinct 256-entry blocks in bmpBlocks. Most blocks repeat
// (all of CJK is "letter, Lo"), so this is ~30 KB instead of 64 KB and stays in
// cache while scanning text in any script.
var (
	bmpIndex  [256]uint16
	bmpBlocks []uint8
	tablesMu  sync.Once
)

func initTables() {
	tablesMu.Do(func() {
		for b := 0; b < 256; b++ {
			byteClass[b] = cMulti
			if b < utf8.RuneSelf {
				byteClass[b] = classOf(rune(b))
			}
		}
		seen := map[[256]uint8]uint16{}
		for hi := 0; hi < 256; hi++ {
			var blk [256]uint8
			for lo := 0; lo < 256; lo++ {
				blk[lo] = classOf(rune(hi<<8 | lo))
			}
			idx, ok := seen[blk]
			if !ok {
				idx = uint16(len(bmpBlocks) / 256)
				bmpBlocks = append(bmpBlocks, blk[:]...)
				seen[blk] = idx
			}
			bmpIndex[hi] = idx
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
// class inlines into the scanning loops.
func classMulti(s string, i int) (uint8, int) {
	r, n := utf8.DecodeRuneInString(s[i:])
	if r <= 0xffff {
		return bmpBlocks[int(bmpIndex[r>>8])<<8|int(r&0xff)], n
	}
	return classOf(r), n
}
