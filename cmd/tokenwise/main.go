// Command tokenwise measures and cuts the token cost of serving a language model
// for one narrow job: tokenization, CPU inference, vocabulary specialization and
// a cost model of prefill versus decode. See README.md.
package main

import (
	"os"

	"github.com/tokenwise/tokenwise/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:]))
}
