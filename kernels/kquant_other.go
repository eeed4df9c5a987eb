//go:build !amd64

package kernels

func asmKQuantRows(out []float32, w *Mat, a *qactK, n, lo, hi int) bool { return false }

// amxPrep holds a product's activations in the AMX layouts (amx_amd64.go); there is no AMX
// path here.
type amxPrep struct{}

func prepareAMX(w *Mat, a *qactK, n int) {}

// AMXAvailable reports whether this CPU and kernel run the AMX products: never here.
func AMXAvailable() bool { return false }

// SetAMX turns the AMX products on or off; there are none here, so it returns false.
func SetAMX(on bool) bool { return false }

// AMXBlocks is how many blocks of 16 weight rows the AMX products have multiplied: none.
func AMXBlocks() int64 { return 0 }

func asmQuantizeQ8K(a *qactK, x []float32, nb int) bool { return false }
