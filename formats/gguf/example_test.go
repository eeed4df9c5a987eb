package gguf_test

import (
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"

	"github.com/tokenwise/tokenwise/formats/gguf"
	"github.com/tokenwise/tokenwise/tensor"
)

func Example() {
	dir, _ := os.MkdirTemp("", "gguf")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "tiny.gguf")

	emb := make([]float32, 4*32)
	for i := range emb {
		emb[i] = float32(i%32) / 32
	}
	q := make([]byte, 4*34) // 4 rows of one Q8_0 block each
	if err := tensor.Quantize(tensor.Q8_0, emb, q); err != nil {
		log.Fatal(err)
	}
	meta := []gguf.KV{
		{Key: "general.architecture", Value: gguf.String("llama")},
		{Key: "llama.block_count", Value: gguf.Uint32(1)},
		{Key: "tokenizer.ggml.tokens", Value: gguf.Array([]string{"a", "b", "c", "d"})},
	}
	// Shape is PyTorch order [vocab, hidden]; the file stores ne = [hidden, vocab].
	ts := []tensor.Info{{Name: "token_embd.weight", DType: tensor.Q8_0, Shape: []int{4, 32}, Data: q}}
	if err := gguf.Write(path, meta, ts, 0); err != nil {
		log.Fatal(err)
	}

	f, err := gguf.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	arch, _ := f.GetString("general.architecture")
	n, _ := f.GetInt("llama.block_count")
	toks, _ := f.GetStrings("tokenizer.ggml.tokens")
	_, err = f.GetString("llama.block_count")
	t, _ := f.Tensor("token_embd.weight")
	fmt.Println(arch, n, len(toks), t.DType, t.Shape)
	fmt.Println(strings.TrimPrefix(err.Error(), dir+"/"))
	// Output:
	// llama 1 4 Q8_0 [4 32]
	// tiny.gguf: metadata key "llama.block_count": want string, have uint32
}
