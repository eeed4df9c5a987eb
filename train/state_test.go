package train

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestResume: a run of 9 steps stopped after 4 (state written at steps 2 and 4) and resumed
// to the end gives the weights, bit for bit, and the per-step losses of the run never
// stopped, with all tensors trainable and with a frozen set; a state that does not fit the
// run is refused with a reason.
func TestResume(t *testing.T) {
	for _, name := range []string{"all", "frozen"} {
		t.Run(name, func(t *testing.T) {
			cfg := tinyConfig(t, "qwen3")
			data := patternData(10, 12, cfg.VocabSize, 61)
			opt := Options{Steps: 9, Batch: 3, Accum: 1, LR: 1e-2, Threads: 2, Seed: 62}
			if name == "frozen" {
				opt.Trainable = func(n string) bool { return strings.Contains(n, "layers.1.") || strings.Contains(n, "embed") }
			}
			fresh := func() *Net {
				net, err := New(cfg, 63)
				if err != nil {
					t.Fatal(err)
				}
				return net
			}
			whole := fresh()
			want, err := Run(whole, data, opt)
			if err != nil {
				t.Fatal(err)
			}

			state := filepath.Join(t.TempDir(), "state")
			net := fresh()
			o := opt
			o.State, o.StopAt, o.CheckpointEvery = state, 4, 2
			var log strings.Builder
			o.Log = &log
			o.Resume = true // no file yet: starts at step 0
			first, err := Run(net, data, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(first) != 4 || !strings.Contains(log.String(), "starting at step 0") {
				t.Fatalf("first leg: %d steps, log %q", len(first), log.String())
			}
			// Resume into a fresh net, as a new process would.
			net = fresh()
			o.StopAt, o.Resume = 0, true
			rest, err := Run(net, data, o)
			if err != nil {
				t.Fatal(err)
			}
			if len(rest) != 5 || rest[0].Step != 5 {
				t.Fatalf("resumed leg: %d steps from step %d, want 5 from 5", len(rest), rest[0].Step)
			}
			for i, st := range append(first, rest...) {
				if st.Loss != want[i].Loss || st.GradNorm != want[i].GradNorm {
					t.Fatalf("step %d: loss %v grad-norm %v, unbroken run %v %v", i+1, st.Loss, st.GradNorm, want[i].Loss, want[i].GradNorm)
				}
			}
			if !slices.Equal(net.W, whole.W) {
				t.Fatal("resumed weights differ from the unbroken run's")
			}

			// Refusals: another schedule length, another data set, a broken file.
			o.Steps = 10
			if _, err := Run(fresh(), data, o); err == nil || !strings.Contains(err.Error(), "9 steps") {
				t.Errorf("resume with --steps changed: %v", err)
			}
			o.Steps = 9
			if _, err := Run(fresh(), data[:9], o); err == nil || !strings.Contains(err.Error(), "10 training sequences") {
				t.Errorf("resume with other data: %v", err)
			}
			other, _ := New(cfg, 64)
			if name == "frozen" {
				if _, err := Run(other, data, o); err == nil || !strings.Contains(err.Error(), "frozen weights differ") {
					t.Errorf("resume from another starting net: %v", err)
				}
			}
			b, _ := os.ReadFile(state)
			os.WriteFile(state, b[:len(b)-3], 0o644)
			if _, err := Run(fresh(), data, o); err == nil || !strings.Contains(err.Error(), "truncated") {
				t.Errorf("truncated state: %v", err)
			}
			o.State = ""
			if _, err := Run(fresh(), data, o); err == nil {
				t.Error("Resume without State: no error")
			}
		})
	}
}
