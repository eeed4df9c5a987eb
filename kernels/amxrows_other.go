//go:build !amd64

package kernels

func amxRowsRun() bool { return false }

func asmQ4_1AMX(out []float32, w *Mat, a *qact, n, lo, hi int) bool { return false }

func asmQ6KAMX(out []float32, w *Mat, a *qactK, n, lo, hi int) bool { return false }
