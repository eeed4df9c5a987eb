//go:build !amd64

package kernels

func asmKQuantRows(out []float32, w *Mat, a *qactK, n, lo, hi int) bool { return false }

// amxPrep holds a product's activations in the AMX layouts (amx_amd64.go); there is no AMX
// path here.
type amxPrep struct{}

func prepareAMX(w *Mat, a *qactK, n int) {}
