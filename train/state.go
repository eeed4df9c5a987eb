package train

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
)

// A trainer state file is what a run needs to continue as if it had not stopped: the
// trainable tensors' float32 master weights and both AdamW moments, the step, and the run's
// shape (steps, batch, seed, data size: the data order is replayed from the seed, not
// stored). Frozen tensors are not stored, only a hash of their bits: a resumed run starts
// from the same model (--model folder, or --config and --seed) and the hash checks it did.
//
// Layout: "TWTRAIN1", a little-endian uint32 header length, the JSON header, then for each
// trainable tensor in buffer order its weights, then its first moments, then its second
// moments, all little-endian float32.

const stateMagic = "TWTRAIN1"

type stateHeader struct {
	Step      int      `json:"step"`
	Steps     int      `json:"steps"`
	Batch     int      `json:"batch"`
	Accum     int      `json:"accum"`
	Seed      uint64   `json:"seed"`
	Data      int      `json:"data"`
	Params    int      `json:"params"`
	Trainable []string `json:"trainable"`
	Frozen    uint64   `json:"frozen_hash"`
}

func (tr *Trainer) stateHeader(step, data int) stateHeader {
	h := stateHeader{Step: step, Steps: tr.Opt.Steps, Batch: tr.Opt.Batch, Accum: tr.Opt.Accum, Seed: tr.Opt.Seed, Data: data, Params: len(tr.Net.W)}
	f := fnv.New64a()
	var b [4]byte
	for i, s := range tr.Net.Specs {
		if !tr.frozen[i] {
			h.Trainable = append(h.Trainable, fmt.Sprintf("%s%v", s.Name, s.Shape))
			continue
		}
		for _, v := range tr.Net.W[s.Off : s.Off+s.N] {
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
			f.Write(b[:])
		}
	}
	h.Frozen = f.Sum64()
	return h
}

// saveState writes the state after step steps of a run over data sequences to path,
// through a temporary file renamed into place, so a crash leaves the previous state whole.
func (tr *Trainer) saveState(path string, step, data int) error {
	hdr, err := json.Marshal(tr.stateHeader(step, data))
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(stateMagic)
	binary.Write(w, binary.LittleEndian, uint32(len(hdr)))
	w.Write(hdr)
	var b [4]byte
	for i, s := range tr.Net.Specs {
		if tr.frozen[i] {
			continue
		}
		for _, buf := range [][]float32{tr.Net.W, tr.m, tr.v} {
			for _, v := range buf[s.Off : s.Off+s.N] {
				binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
				w.Write(b[:]) // a bufio.Writer keeps its first error for Flush
			}
		}
	}
	err = w.Flush()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("trainer state %s: %w", path, err)
	}
	return nil
}

// errNoState is loadState's error for a path with no file.
var errNoState = errors.New("no trainer state")

// loadState restores the trainable weights, the moments and the step from path and returns
// the step; the run (options, data size, trainable set, frozen weights) must be the one
// that wrote it.
func (tr *Trainer) loadState(path string, data int) (int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, errNoState
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	r := bufio.NewReaderSize(f, 1<<20)
	bad := func(format string, args ...any) error {
		return fmt.Errorf("trainer state %s: %s", path, fmt.Sprintf(format, args...))
	}
	magic := make([]byte, len(stateMagic))
	var n uint32
	if _, err := io.ReadFull(r, magic); err != nil || string(magic) != stateMagic {
		return 0, bad("not a tokenwise trainer state")
	}
	if err := binary.Read(r, binary.LittleEndian, &n); err != nil || n > 1<<24 {
		return 0, bad("bad header")
	}
	raw := make([]byte, n)
	if _, err := io.ReadFull(r, raw); err != nil {
		return 0, bad("bad header: %v", err)
	}
	var got stateHeader
	if err := json.Unmarshal(raw, &got); err != nil {
		return 0, bad("bad header: %v", err)
	}
	want := tr.stateHeader(got.Step, data)
	switch {
	case got.Params != want.Params || !slices.Equal(got.Trainable, want.Trainable):
		return 0, bad("written for another model or trainable set (%d params, %d trainable tensors; this run: %d, %d)", got.Params, len(got.Trainable), want.Params, len(want.Trainable))
	case got.Frozen != want.Frozen:
		return 0, bad("the frozen weights differ from the run that wrote it (another starting model or seed?)")
	case got.Steps != want.Steps || got.Batch != want.Batch || got.Accum != want.Accum || got.Seed != want.Seed:
		return 0, bad("written by a run of %d steps, batch %d×%d, seed %d; this run: %d steps, batch %d×%d, seed %d",
			got.Steps, got.Batch, got.Accum, got.Seed, want.Steps, want.Batch, want.Accum, want.Seed)
	case got.Data != data:
		return 0, bad("written for %d training sequences, this run has %d", got.Data, data)
	case got.Step < 0 || got.Step > got.Steps:
		return 0, bad("step %d of %d", got.Step, got.Steps)
	}
	var b [4]byte
	for i, s := range tr.Net.Specs {
		if tr.frozen[i] {
			continue
		}
		for _, buf := range [][]float32{tr.Net.W, tr.m, tr.v} {
			dst := buf[s.Off : s.Off+s.N]
			for j := range dst {
				if _, err := io.ReadFull(r, b[:]); err != nil {
					return 0, bad("%s: truncated", s.Name)
				}
				dst[j] = math.Float32frombits(binary.LittleEndian.Uint32(b[:]))
			}
		}
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return 0, bad("trailing bytes")
	}
	tr.step = got.Step
	return got.Step, nil
}
