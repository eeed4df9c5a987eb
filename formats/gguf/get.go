package gguf

import (
	"fmt"
	"math"
)

// Typed getters. Each fails with an error naming the key and the wanted and actual types
// when the key is missing or holds something else.

func (f *File) lookup(key, want string) (Value, error) {
	v, ok := f.Get(key)
	if !ok {
		return Value{}, fmt.Errorf("%s: metadata key %q not found (want %s)", f.Path, key, want)
	}
	return v, nil
}

func (f *File) typeErr(key, want string, v Value) error {
	return fmt.Errorf("%s: metadata key %q: want %s, have %s", f.Path, key, want, v.TypeName())
}

// GetString returns a string value.
func (f *File) GetString(key string) (string, error) {
	v, err := f.lookup(key, "string")
	if err != nil {
		return "", err
	}
	s, ok := v.Data.(string)
	if !ok {
		return "", f.typeErr(key, "string", v)
	}
	return s, nil
}

// GetBool returns a bool value.
func (f *File) GetBool(key string) (bool, error) {
	v, err := f.lookup(key, "bool")
	if err != nil {
		return false, err
	}
	b, ok := v.Data.(bool)
	if !ok {
		return false, f.typeErr(key, "bool", v)
	}
	return b, nil
}

// GetUint32 returns a uint32 value (exactly that type, as llama.cpp expects for counts and ids).
func (f *File) GetUint32(key string) (uint32, error) {
	v, err := f.lookup(key, "uint32")
	if err != nil {
		return 0, err
	}
	u, ok := v.Data.(uint32)
	if !ok {
		return 0, f.typeErr(key, "uint32", v)
	}
	return u, nil
}

// GetFloat32 returns a float32 value.
func (f *File) GetFloat32(key string) (float32, error) {
	v, err := f.lookup(key, "float32")
	if err != nil {
		return 0, err
	}
	x, ok := v.Data.(float32)
	if !ok {
		return 0, f.typeErr(key, "float32", v)
	}
	return x, nil
}

// GetInt returns any integer-typed value as an int; an out-of-range value is an error.
func (f *File) GetInt(key string) (int, error) {
	v, err := f.lookup(key, "integer")
	if err != nil {
		return 0, err
	}
	n, ok := asInt(v.Data)
	if !ok {
		return 0, f.typeErr(key, "integer", v)
	}
	return n, nil
}

// GetFloat returns any float- or integer-typed value as a float64.
func (f *File) GetFloat(key string) (float64, error) {
	v, err := f.lookup(key, "number")
	if err != nil {
		return 0, err
	}
	switch d := v.Data.(type) {
	case float32:
		return float64(d), nil
	case float64:
		return d, nil
	}
	if n, ok := asInt(v.Data); ok {
		return float64(n), nil
	}
	return 0, f.typeErr(key, "number", v)
}

// GetStrings returns an array of strings. The slice is shared: do not modify it.
func (f *File) GetStrings(key string) ([]string, error) {
	v, err := f.lookup(key, "array[string]")
	if err != nil {
		return nil, err
	}
	s, ok := v.Data.([]string)
	if !ok {
		return nil, f.typeErr(key, "array[string]", v)
	}
	return s, nil
}

// GetInts returns an array of any integer type as []int (a new slice).
func (f *File) GetInts(key string) ([]int, error) {
	v, err := f.lookup(key, "array of integers")
	if err != nil {
		return nil, err
	}
	if v.Type != TypeArray || v.Elem == TypeArray || v.Elem == TypeString || v.Elem == TypeBool || v.Elem == TypeFloat32 || v.Elem == TypeFloat64 {
		return nil, f.typeErr(key, "array of integers", v)
	}
	out := make([]int, v.Len())
	for i := range out {
		n, ok := asInt(index(v.Data, i))
		if !ok {
			return nil, fmt.Errorf("%s: metadata key %q: element %d does not fit in an int", f.Path, key, i)
		}
		out[i] = n
	}
	return out, nil
}

// GetFloats returns an array of float32 or float64 as []float32 (a new slice).
func (f *File) GetFloats(key string) ([]float32, error) {
	v, err := f.lookup(key, "array of floats")
	if err != nil {
		return nil, err
	}
	switch d := v.Data.(type) {
	case []float32:
		return append([]float32(nil), d...), nil
	case []float64:
		out := make([]float32, len(d))
		for i, x := range d {
			out[i] = float32(x)
		}
		return out, nil
	}
	return nil, f.typeErr(key, "array of floats", v)
}

func index(d any, i int) any {
	switch s := d.(type) {
	case []uint8:
		return s[i]
	case []int8:
		return s[i]
	case []uint16:
		return s[i]
	case []int16:
		return s[i]
	case []uint32:
		return s[i]
	case []int32:
		return s[i]
	case []uint64:
		return s[i]
	case []int64:
		return s[i]
	}
	return nil
}

func asInt(d any) (int, bool) {
	switch x := d.(type) {
	case uint8:
		return int(x), true
	case int8:
		return int(x), true
	case uint16:
		return int(x), true
	case int16:
		return int(x), true
	case uint32:
		return int(x), true
	case int32:
		return int(x), true
	case uint64:
		if x > math.MaxInt {
			return 0, false
		}
		return int(x), true
	case int64:
		if int64(int(x)) != x {
			return 0, false
		}
		return int(x), true
	}
	return 0, false
}
