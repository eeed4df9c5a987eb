//go:build !amd64

package kernels

func prepSmallN(a *qact, w *Mat, n int) {}

func asmSmallN(out []float32, w *Mat, a *qact, n, lo, hi int) bool { return false }
