package safetensors_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/tokenwise/tokenwise/formats/safetensors"
	"github.com/tokenwise/tokenwise/tensor"
)

func Example() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "model.safetensors")

	w := []float32{1, 2, 3, 4, 5, 6}
	err := safetensors.Write(path, []tensor.Info{
		{Name: "lm_head.weight", DType: tensor.F32, Shape: []int{2, 3}, Data: tensor.Bytes(w)},
	}, map[string]string{"format": "pt"})
	if err != nil {
		log.Fatal(err)
	}

	m, err := safetensors.OpenModel(dir) // model.safetensors, or shards + index
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	t, _ := m.Tensor("lm_head.weight")
	row := make([]float32, 3)
	tensor.Dequantize(t.DType, t.Data[12:24], row) // row 1, read straight from the mapping
	fmt.Println(t.DType, t.Shape, row)
	// Output: F32 [2 3] [4 5 6]
}
