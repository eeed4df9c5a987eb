package cli

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets a test run this test binary as the tokenwise command (the child process
// of experiment --adapt-with): with TOKENWISE_CLI_MAIN=1 it executes its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("TOKENWISE_CLI_MAIN") == "1" {
		root := newRoot()
		root.SetArgs(os.Args[1:])
		if err := root.Execute(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}
