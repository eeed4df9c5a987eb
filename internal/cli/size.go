package cli

import (
	"fmt"
	"strconv"
	"strings"
)

// parseByteSize reads a byte count: a number with an optional K/M/G/T suffix, binary with an i
// (KiB, MiB, GiB, TiB) and decimal without (KB or K = 1000).
func parseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "B"), "b")
	mult := 1.0
	units := []struct {
		suffix string
		mult   float64
	}{{"Ki", 1 << 10}, {"Mi", 1 << 20}, {"Gi", 1 << 30}, {"Ti", 1 << 40}, {"K", 1e3}, {"k", 1e3}, {"M", 1e6}, {"G", 1e9}, {"T", 1e12}}
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSuffix(t, u.suffix), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
	if err != nil || v <= 0 || v*mult > 1<<50 {
		return 0, fmt.Errorf("size %q: want a positive number of bytes such as 512MiB, 2GiB or 1e9", s)
	}
	return int64(v * mult), nil
}
