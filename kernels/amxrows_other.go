//go:build !amd64

package kernels

func amxRowsRun() bool { return false }

func asmAMX(out []float32, w *Mat, a *qact, n, lo, hi int) bool { return false }

func asmKAMX(out []float32, w *Mat, a *qactK, t0, n, lo, hi int) bool { return false }

func amxKQuantRows(out []float32, w *Mat, a *qactK, n, lo, hi int) bool { return false }

func q6TileRuns(w *Mat, n int) bool { return false }
