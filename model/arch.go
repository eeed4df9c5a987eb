package model

import (
	"fmt"
	"slices"
	"strings"
)

// Arch is everything tokenwise knows about one architecture: its names in config.json and in
// GGUF, how its block differs from Llama's, and the defaults its Hugging Face config class
// gives. The loaders, convert, train and cost read these fields instead of testing names, so
// adding an architecture is a row in archs and, when its block is new, one file.
type Arch struct {
	ModelType string // config.json model_type; Config.Architecture holds it
	HFClass   string // config.json architectures[0]
	GGUF      string // llama.cpp's general.architecture (Mistral runs on its "llama" graph)

	// GGUFPermutesQK: convert_hf_to_gguf.py permutes the q/k rows for llama.cpp's interleaved
	// rotary pairs; the other graphs keep Hugging Face's order and rotate halves (NEOX).
	GGUFPermutesQK bool
	QKVBias        bool // q/k/v always carry a bias, whatever attention_bias says (Qwen2)
	QKNorm         bool // an RMSNorm on each head's query and key before RoPE (Qwen3)
	SlidingWindow  bool // honours sliding_window (Mistral); the others reject use_sliding_window
	// TieEmbeddings is tie_word_embeddings when config.json leaves it out: the default of the
	// transformers config class (LlamaConfig, MistralConfig, Qwen2Config and Qwen3Config all
	// say False), not PretrainedConfig's True.
	TieEmbeddings bool
	// MoE: every layer's MLP is a mixture of experts (Config.NumExperts; moe.go). A GGUF file
	// of a dense row's graph name with an expert_count is the MoE row of that name (Mixtral
	// runs on llama.cpp's "llama" graph).
	MoE bool

	blocks  loader       // binds the decoder blocks; nil: Llama's block (llama.go)
	experts *expertNames // an MoE architecture's expert tensor names (moe.go)
}

// archs is the table. The first row with a given GGUF name is the one a GGUF file of that
// name loads as (unless convert recorded the model_type).
var archs = []Arch{
	// Llama 2 / 3 / 3.x.
	{ModelType: "llama", HFClass: "LlamaForCausalLM", GGUF: "llama", GGUFPermutesQK: true},
	// Llama's block attending to at most sliding_window previous positions.
	{ModelType: "mistral", HFClass: "MistralForCausalLM", GGUF: "llama", GGUFPermutesQK: true, SlidingWindow: true},
	// Qwen2 / Qwen2.5: Llama's block with q/k/v biases.
	{ModelType: "qwen2", HFClass: "Qwen2ForCausalLM", GGUF: "qwen2", QKVBias: true},
	// Qwen3: Llama's block with q/k norms and a head_dim of its own.
	{ModelType: "qwen3", HFClass: "Qwen3ForCausalLM", GGUF: "qwen3", QKNorm: true},
	// Qwen3-MoE: Qwen3's attention, a mixture of experts for the MLP (qwen3moe.go).
	{ModelType: "qwen3_moe", HFClass: "Qwen3MoeForCausalLM", GGUF: "qwen3moe", QKNorm: true, MoE: true, blocks: loadQwen3MoE, experts: &qwen3MoENames},
	// Mixtral: Mistral's attention, a mixture of experts for the MLP (mixtral.go).
	{ModelType: "mixtral", HFClass: "MixtralForCausalLM", GGUF: "llama", GGUFPermutesQK: true, SlidingWindow: true, MoE: true, blocks: loadMixtral, experts: &mixtralNames},
}

// Archs lists the supported architectures.
func Archs() []Arch { return append([]Arch(nil), archs...) }

// LookupArch returns the architecture of a config.json model_type.
func LookupArch(modelType string) (*Arch, error) {
	for i := range archs {
		if archs[i].ModelType == modelType {
			return &archs[i], nil
		}
	}
	return nil, fmt.Errorf("model_type %q: not supported (supported: %s)", modelType, archList(func(a *Arch) string { return a.ModelType }))
}

// ArchByHFClass returns the architecture of a config.json architectures entry.
func ArchByHFClass(class string) (*Arch, error) {
	for i := range archs {
		if archs[i].HFClass == class {
			return &archs[i], nil
		}
	}
	return nil, fmt.Errorf("architectures %q: not supported (supported: %s)", class, archList(func(a *Arch) string { return a.HFClass }))
}

// ArchByGGUF returns the architecture of a GGUF general.architecture: the first row with that
// name ("llama" is Llama, not Mistral).
func ArchByGGUF(name string) (*Arch, error) { return archByGGUF(name, false) }

// ArchByGGUFExperts is ArchByGGUF for a file with (moe) or without an expert_count: a
// "llama" file with experts is Mixtral.
func ArchByGGUFExperts(name string, moe bool) (*Arch, error) { return archByGGUF(name, moe) }

// archByGGUF returns the first row of GGUF name with or without experts, else the first of
// that name.
func archByGGUF(name string, moe bool) (*Arch, error) {
	for i := range archs {
		if archs[i].GGUF == name && archs[i].MoE == moe {
			return &archs[i], nil
		}
	}
	for i := range archs {
		if archs[i].GGUF == name {
			return &archs[i], nil
		}
	}
	return nil, fmt.Errorf("general.architecture %q: not supported (supported: %s)", name, archList(func(a *Arch) string { return a.GGUF }))
}

// archList names the supported architectures one way, without repeats.
func archList(name func(*Arch) string) string {
	var names []string
	for i := range archs {
		if n := name(&archs[i]); n != "" && !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	return strings.Join(names, ", ")
}

// Arch returns the architecture of c; nil when Architecture is not in the table.
func (c *Config) Arch() *Arch {
	a, _ := LookupArch(c.Architecture)
	return a
}
