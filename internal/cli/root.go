// Package cli holds the tokenwise commands. Each command lives in its own file;
// this file builds the root command and turns errors into one clear line on stderr.
package cli

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// Main runs the command line and returns the process exit code.
func Main(args []string) int {
	// TOKENWISE_CPUPROFILE=FILE writes a Go CPU profile of the whole command (for `go tool
	// pprof`): how the kernels, the scheduler and the HTTP layer share a serve or bench run.
	if path := os.Getenv("TOKENWISE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintf(os.Stderr, "tokenwise: TOKENWISE_CPUPROFILE: %v\n", err)
			return 1
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintf(os.Stderr, "tokenwise: TOKENWISE_CPUPROFILE: %v\n", err)
			return 1
		}
		defer f.Close()
		defer pprof.StopCPUProfile()
	}
	root := newRoot()
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "tokenwise: %v\n", err)
		return 1
	}
	return 0
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "tokenwise",
		Short:         "Measure and cut the token cost of serving a language model",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(
		newTokenizeCmd(),
		newDetokenizeCmd(),
		newCountCmd(),
		newGenerateCmd(),
		newServeCmd(),
		newExportCmd(),
		newCalibrateCmd(),
		newBenchCmd(),
		newCostCmd(),
		newPlanCmd(),
		newSynthCmd(),
		newCorpusCmd(),
		newAnalyzeCmd(),
		newSpecializeCmd(),
		newTrainTokenizerCmd(),
		newTrainCmd(),
		newAdaptCmd(),
		newDemoCmd(),
		newExperimentCmd(),
	)
	return root
}
