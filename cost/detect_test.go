package cost

import (
	"strings"
	"testing"
)

// A shipped CPU profile is chosen only for the machine its match names; anything else gets
// no profile and a reason that names this CPU and what the shipped profiles are for.
func TestMatchProfile(t *testing.T) {
	for _, tc := range []struct {
		cpu  CPU
		want string
	}{
		{CPU{"AMD EPYC 7B13 64-Core Processor", "avx2+fma", 2}, "epyc-zen3-2core"},
		{CPU{"AMD EPYC", "avx2+fma", 2}, "epyc-zen3-2core"},
		{CPU{"AMD EPYC", "avx512", 2}, ""},                    // Zen 4: not the machine measured
		{CPU{"AMD EPYC 7B13", "avx2+fma", 8}, ""},             // more cores
		{CPU{"Intel(R) Xeon(R) Platinum", "avx2+fma", 2}, ""}, // another vendor
		{CPU{"Apple M2", "scalar", 8}, ""},                    // laptop-8core has no match: nominal figures
	} {
		name, why := MatchProfile(tc.cpu)
		if name != tc.want || !strings.Contains(why, tc.cpu.String()) {
			t.Errorf("MatchProfile(%v) = %q, %q; want %q and a reason naming the CPU", tc.cpu, name, why, tc.want)
		}
		if name == "" && !strings.Contains(why, "epyc-zen3-2core is for AMD EPYC, avx2+fma, 2 CPUs") {
			t.Errorf("MatchProfile(%v): reason %q does not say what the shipped profile is for", tc.cpu, why)
		}
	}
}

// A quick calibration is a valid CPU profile at the threads asked, with measured rates the
// roofline uses (raw × the efficiencies, no kernel tables).
func TestQuickCalibrate(t *testing.T) {
	p, err := QuickCalibrate("this-machine", 1, 16)
	if err != nil {
		t.Fatal(err)
	}
	c := p.Calibration
	if p.Kind != "cpu" || len(c) != 1 || c[0].Threads != 1 || c[0].ReadGBs <= 0 || c[0].FMAGFLOPS <= 0 || len(c[0].Kernels) != 0 {
		t.Fatalf("profile %+v", p)
	}
	bf16, _ := ParsePrecision("bf16")
	r, err := p.Rates(bf16, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.WeightBW != c[0].ReadGBs*1e9*quickMemoryEfficiency || r.FLOPS != c[0].FMAGFLOPS*1e9*quickComputeEfficiency {
		t.Errorf("rates %+v from %+v", r, c[0])
	}
	if !strings.Contains(p.Source, ThisCPU().String()) {
		t.Errorf("source %q does not name this CPU", p.Source)
	}
	if _, err := QuickCalibrate("x", 0, 16); err == nil {
		t.Error("0 threads: no error")
	}
}
