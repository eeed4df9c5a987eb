package model

import "fmt"

func loadGGUF(path string, opts Options) (*Model, error) {
	return nil, fmt.Errorf("%s: GGUF loading not available yet", path)
}
