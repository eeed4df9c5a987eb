package model

// RopeFrequencies returns the rotary inverse frequencies of cfg after its rope scaling,
// exactly as the forward pass uses them, so that a trainer's positions match the engine's.
func RopeFrequencies(cfg *Config) ([]float64, error) { return ropeFreqs(cfg) }
