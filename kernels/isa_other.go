//go:build !amd64

package kernels

// Other architectures have the plain-Go kernels only.
const cpuISA = ISAGo

func setISA(i ISA) ISA { return i }

func pathSwitches() map[string]bool { return map[string]bool{} }
