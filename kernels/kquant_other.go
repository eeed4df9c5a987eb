//go:build !amd64

package kernels

func asmKQuantRows(out []float32, w *Mat, a *qactK, n, lo, hi int) bool { return false }
