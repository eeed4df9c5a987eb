package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tokenwise/tokenwise/cost"
)

type calibrateFlags struct {
	out     string
	name    string
	threads int
	readMiB int
	dtypes  string
	repeats int
	clock   string
	sweep   bool
}

func newCalibrateCmd() *cobra.Command {
	var f calibrateFlags
	cmd := &cobra.Command{
		Use:   "calibrate --out FILE",
		Short: "Measure this machine (bandwidth, FMA peak, kernel rates) into a hardware profile",
		Long: `Calibrate measures, for 1, 2, 4, ... up to --threads threads: the read bandwidth (a sum over
a large array), the f32 FMA peak (a register-only loop, AVX-512 or AVX2 where present), and
what tokenwise's own kernels cost on each weight dtype, called as the model calls them: the
decode product (matrix×vector, GB/s) over --read-mib of weights and by row width (576 to
8192) and weights cycled through (32 MiB to --read-mib); one product call's fixed cost; the
prefill product (matrix×matrix, GFLOP/s) by row width and tokens (4 to 256); and the work
between products — RMSNorm, residual adds, SwiGLU, RoPE per element, attention per head and
cached position (f32 and f16 cache), the worker pool's hand-over. The profile it writes is
what 'tokenwise cost --hardware FILE' reads: it times a forward pass call by call from these
measurements (docs/cost.md). Run it on an otherwise idle machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCalibrate(f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "profile JSON to write (- for stdout)")
	fl.StringVar(&f.name, "name", "this-machine", "profile name")
	fl.IntVar(&f.threads, "threads", 0, "most threads to measure (0: every CPU)")
	fl.BoolVar(&f.sweep, "sweep-threads", true, "measure 1, 2, 4, ... up to --threads; false: --threads only (faster)")
	fl.IntVar(&f.readMiB, "read-mib", 1024, "array and matrix size in MiB; keep it well above the last-level cache")
	fl.StringVar(&f.dtypes, "dtypes", "f32,f16,bf16,q8_0,q4_0", "weight dtypes whose kernels are measured")
	fl.IntVar(&f.repeats, "repeats", 5, "timings per number (peaks: the best; kernel rates: the median)")
	fl.StringVar(&f.clock, "clock", "wall", "time the kernels by the wall clock, or by CPU time per thread (cpu: for a machine shared with busy processes; compare with bench's *_cpu fields)")
	return cmd
}

func runCalibrate(f calibrateFlags, stdout, stderr io.Writer) error {
	if f.out == "" {
		return errors.New("calibrate: --out is required")
	}
	top := f.threads
	if top <= 0 {
		top = runtime.NumCPU()
	}
	var threads []int
	for t := 1; t < top && f.sweep; t *= 2 {
		threads = append(threads, t)
	}
	threads = append(threads, top)
	p, err := cost.Calibrate(cost.CalibrateOptions{
		Name: f.name, Threads: threads, ReadMiB: f.readMiB, Repeats: f.repeats,
		DTypes: strings.Split(f.dtypes, ","), Clock: f.clock, Log: stderr,
	})
	if err != nil {
		return err
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	data = append(data, '\n')
	if f.out == "-" {
		_, err = stdout.Write(data)
		return err
	}
	if err := os.WriteFile(f.out, data, 0o644); err != nil {
		return fmt.Errorf("calibrate: %w", err)
	}
	fmt.Fprintf(stderr, "wrote %s\n", f.out)
	return nil
}
