// The f16 attention kernels' software prefetch, shared by the one-head kernels
// (gemm_amd64.s: attnScoresF16Z, attnMadSeqF16Z, attnMadSeqF16Z64 and their AVX2 versions)
// and the two-head ones (attn_f16pair_amd64.s). ATTN_PREFETCH asks for the first 128 bytes
// of the cache row of the position ATTN_AHEAD positions on, whose index is at idx (an
// int32), SI the cache and R10 its row stride in bytes; reg is clobbered and left at the
// row's byte offset from SI. A decode's rows are a KV head's slice of consecutive positions
// (kvDim·2 bytes apart: 2 KiB on Qwen3-0.6B), too sparse for the hardware prefetchers, so
// without it each position waited for memory: Qwen3-0.6B's 28 layers × 16 heads over 144
// positions took 92 ns a head and position in one thread (docs/kernels.md has the A/B).
#define ATTN_AHEAD 8
#define ATTN_PREFETCH(idx, reg) \
	MOVLQSX idx, reg; \
	IMULQ R10, reg; \
	PREFETCHT0 (SI)(reg*1); \
	PREFETCHT0 64(SI)(reg*1)
