package cost

import (
	"fmt"
	"os"
	"testing"

	"github.com/tokenwise/tokenwise/kernels"
)

func TestExploreEngineH14(t *testing.T) {
	if os.Getenv("H14E") == "" {
		t.Skip()
	}
	for _, th := range []int{1, 2, 1} {
		pool := kernels.NewPool(th)
		e, err := engineCosts(pool, "wall", th, 3)
		pool.Close()
		fmt.Printf("%d: %+v %v\n", th, e, err)
	}
}
