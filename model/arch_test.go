package model

import (
	"fmt"
	"strings"
	"testing"
)

// Every row of the table is found again by each of its names, and its GGUF name leads back to
// an architecture llama.cpp runs on the same graph.
func TestArchRoundTrip(t *testing.T) {
	seen := map[string]bool{}
	for _, a := range Archs() {
		if a.ModelType == "" || a.HFClass == "" || a.GGUF == "" {
			t.Errorf("%+v: a name is missing", a)
		}
		for _, n := range []string{"model_type " + a.ModelType, "class " + a.HFClass} {
			if seen[n] {
				t.Errorf("%s: twice in the table", n)
			}
			seen[n] = true
		}
		byClass, err := ArchByHFClass(a.HFClass)
		if err != nil || byClass.ModelType != a.ModelType {
			t.Fatalf("ArchByHFClass(%q) = %v, %v; want %s", a.HFClass, byClass, err, a.ModelType)
		}
		byGGUF, err := ArchByGGUF(byClass.GGUF)
		if err != nil {
			t.Fatal(err)
		}
		if byGGUF.GGUF != a.GGUF || byGGUF.GGUFPermutesQK != a.GGUFPermutesQK {
			t.Errorf("%s: GGUF %q reads back as %s (permutes q/k: %v, want %v)", a.ModelType, a.GGUF, byGGUF.ModelType, byGGUF.GGUFPermutesQK, a.GGUFPermutesQK)
		}
		if a.GGUF == a.ModelType && byGGUF.ModelType != a.ModelType {
			t.Errorf("GGUF %q reads back as %s, want itself", a.GGUF, byGGUF.ModelType)
		}
		if got, err := LookupArch(a.ModelType); err != nil || got.HFClass != a.HFClass || got.GGUF != a.GGUF {
			t.Errorf("LookupArch(%q) = %v, %v", a.ModelType, got, err)
		}
	}
}

func TestUnknownArch(t *testing.T) {
	for name, lookup := range map[string]func(string) (*Arch, error){
		"model_type": LookupArch, "class": ArchByHFClass, "gguf": ArchByGGUF,
	} {
		_, err := lookup("gemma")
		if err == nil {
			t.Fatalf("%s gemma: no error", name)
		}
		if !strings.Contains(err.Error(), `"gemma"`) {
			t.Errorf("%s: %v does not name gemma", name, err)
		}
	}
	_, err := ParseConfig([]byte(strings.Replace(testConfigs["llama-gqa-tied"], `"model_type":"llama"`, `"model_type":"gemma"`, 1)))
	if err == nil {
		t.Fatal("model_type gemma: accepted")
	}
	for _, a := range Archs() {
		if !strings.Contains(err.Error(), a.ModelType) {
			t.Errorf("%v: does not list %s", err, a.ModelType)
		}
	}
	t.Log(err)
}

// A config.json without tie_word_embeddings takes its architecture's default (transformers'
// LlamaConfig, MistralConfig, Qwen2Config and Qwen3Config: False), not PretrainedConfig's True.
func TestTieDefault(t *testing.T) {
	for _, a := range Archs() {
		js := `{"model_type":"` + a.ModelType + `","vocab_size":64,"hidden_size":32,"intermediate_size":48,"num_hidden_layers":1,
			"num_attention_heads":4,"max_position_embeddings":64,"num_experts":%d,"num_experts_per_tok":1,"moe_intermediate_size":16%s}`
		experts := 0
		if a.MoE {
			experts = 4
		}
		js = strings.Replace(js, "%d", fmt.Sprint(experts), 1)
		c, err := ParseConfig([]byte(strings.Replace(js, "%s", "", 1)))
		if err != nil {
			t.Fatal(err)
		}
		if c.TieEmbeddings != a.TieEmbeddings || a.TieEmbeddings {
			t.Errorf("%s: tied = %v without tie_word_embeddings; table says %v, transformers False", a.ModelType, c.TieEmbeddings, a.TieEmbeddings)
		}
		if c, err := ParseConfig([]byte(strings.Replace(js, "%s", `,"tie_word_embeddings":true`, 1))); err != nil || !c.TieEmbeddings {
			t.Errorf("%s: tie_word_embeddings true read as %v, %v", a.ModelType, c.TieEmbeddings, err)
		}
	}
}

func TestParseHFConfigNamesField(t *testing.T) {
	_, err := ParseHFConfig([]byte(`{"model_type":"llama","hidden_size":"64"}`))
	if err == nil || !strings.Contains(err.Error(), "hidden_size") {
		t.Errorf("hidden_size as a string: %v, want an error naming the field", err)
	}
}
