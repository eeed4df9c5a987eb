// Package gguf reads and writes GGUF files, llama.cpp's model format (versions 3 and 2;
// little-endian only).
//
// Layout: magic "GGUF", version u32, tensor count u64, metadata count u64; the metadata
// key/value pairs (typed values, strings as u64 length + bytes, arrays as element type, u64
// count, elements); one info per tensor (name, dimension count u32, dims u64 each, ggml type
// u32, data offset u64); padding to the alignment (general.alignment, default 32); then the
// tensor data, each tensor at an aligned offset relative to the start of that section.
//
// Dimension order: GGUF stores ne[0] first, the innermost (contiguous) dimension, i.e. the row
// length. tensor.Info.Shape is PyTorch order, outermost first, so the GGUF dims are reversed on
// read and on write: a [vocab, hidden] embedding has the same Shape from both formats.
package gguf

import (
	"fmt"
	"strings"
)

// Type is a GGUF metadata value type.
type Type uint32

// Metadata value types (gguf.h, enum gguf_type).
const (
	TypeUint8   Type = 0
	TypeInt8    Type = 1
	TypeUint16  Type = 2
	TypeInt16   Type = 3
	TypeUint32  Type = 4
	TypeInt32   Type = 5
	TypeFloat32 Type = 6
	TypeBool    Type = 7
	TypeString  Type = 8
	TypeArray   Type = 9
	TypeUint64  Type = 10
	TypeInt64   Type = 11
	TypeFloat64 Type = 12
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// size of a fixed-size value of type t, 0 for string/array/unknown.
func (t Type) size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (t Type) valid() bool { return t <= TypeFloat64 }

// Value is a typed metadata value.
//
// Data holds, for scalars: uint8, int8, uint16, int16, uint32, int32, float32, bool, string,
// uint64, int64 or float64 (matching Type). For arrays (Type == TypeArray, element type in
// Elem): a slice of one of those ([]string, []int32, ...), or []Value when the elements are
// themselves arrays (Elem == TypeArray).
type Value struct {
	Type Type
	Elem Type
	Data any
}

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// Constructors for metadata values.
func Uint8(v uint8) Value     { return Value{Type: TypeUint8, Data: v} }
func Int8(v int8) Value       { return Value{Type: TypeInt8, Data: v} }
func Uint16(v uint16) Value   { return Value{Type: TypeUint16, Data: v} }
func Int16(v int16) Value     { return Value{Type: TypeInt16, Data: v} }
func Uint32(v uint32) Value   { return Value{Type: TypeUint32, Data: v} }
func Int32(v int32) Value     { return Value{Type: TypeInt32, Data: v} }
func Float32(v float32) Value { return Value{Type: TypeFloat32, Data: v} }
func Bool(v bool) Value       { return Value{Type: TypeBool, Data: v} }
func String(v string) Value   { return Value{Type: TypeString, Data: v} }
func Uint64(v uint64) Value   { return Value{Type: TypeUint64, Data: v} }
func Int64(v int64) Value     { return Value{Type: TypeInt64, Data: v} }
func Float64(v float64) Value { return Value{Type: TypeFloat64, Data: v} }

// Elem is any type a GGUF array may hold directly.
type Elem interface {
	uint8 | int8 | uint16 | int16 | uint32 | int32 | float32 | bool | string | uint64 | int64 | float64
}

// Array makes an array value, e.g. Array([]string{...}) or Array([]int32{...}).
func Array[T Elem](v []T) Value {
	return Value{Type: TypeArray, Elem: elemType(v), Data: v}
}

// Arrays makes an array whose elements are arrays (each made with Array or Arrays).
func Arrays(v []Value) Value { return Value{Type: TypeArray, Elem: TypeArray, Data: v} }

func elemType(v any) Type {
	switch v.(type) {
	case []uint8:
		return TypeUint8
	case []int8:
		return TypeInt8
	case []uint16:
		return TypeUint16
	case []int16:
		return TypeInt16
	case []uint32:
		return TypeUint32
	case []int32:
		return TypeInt32
	case []float32:
		return TypeFloat32
	case []bool:
		return TypeBool
	case []string:
		return TypeString
	case []uint64:
		return TypeUint64
	case []int64:
		return TypeInt64
	case []float64:
		return TypeFloat64
	case []Value:
		return TypeArray
	}
	return Type(1<<32 - 1)
}

func scalarType(v any) Type {
	switch v.(type) {
	case uint8:
		return TypeUint8
	case int8:
		return TypeInt8
	case uint16:
		return TypeUint16
	case int16:
		return TypeInt16
	case uint32:
		return TypeUint32
	case int32:
		return TypeInt32
	case float32:
		return TypeFloat32
	case bool:
		return TypeBool
	case string:
		return TypeString
	case uint64:
		return TypeUint64
	case int64:
		return TypeInt64
	case float64:
		return TypeFloat64
	}
	return Type(1<<32 - 1)
}

// check verifies that Data has the Go type that Type/Elem promise.
func (v Value) check(depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("arrays nested deeper than %d", maxDepth)
	}
	if v.Type != TypeArray {
		if st := scalarType(v.Data); st != v.Type {
			return fmt.Errorf("value of type %s holds Go %T", v.Type, v.Data)
		}
		return nil
	}
	if et := elemType(v.Data); et != v.Elem {
		return fmt.Errorf("array of %s holds Go %T", v.Elem, v.Data)
	}
	if sub, ok := v.Data.([]Value); ok {
		for i, s := range sub {
			if s.Type != TypeArray {
				return fmt.Errorf("element %d of an array of arrays is a %s", i, s.Type)
			}
			if err := s.check(depth + 1); err != nil {
				return fmt.Errorf("element %d: %w", i, err)
			}
		}
	}
	return nil
}

// Len is the number of elements of an array value (0 for scalars).
func (v Value) Len() int {
	switch d := v.Data.(type) {
	case []uint8:
		return len(d)
	case []int8:
		return len(d)
	case []uint16:
		return len(d)
	case []int16:
		return len(d)
	case []uint32:
		return len(d)
	case []int32:
		return len(d)
	case []float32:
		return len(d)
	case []bool:
		return len(d)
	case []string:
		return len(d)
	case []uint64:
		return len(d)
	case []int64:
		return len(d)
	case []float64:
		return len(d)
	case []Value:
		return len(d)
	}
	return 0
}

// TypeName is "uint32", "string", "array[string]", "array[array[string]]", ...
func (v Value) TypeName() string {
	if v.Type != TypeArray {
		return v.Type.String()
	}
	if v.Elem == TypeArray {
		if sub, ok := v.Data.([]Value); ok && len(sub) > 0 {
			return "array[" + sub[0].TypeName() + "]"
		}
		return "array[array]"
	}
	return "array[" + v.Elem.String() + "]"
}

// String shows the value briefly (long arrays are elided), for listings and errors.
func (v Value) String() string {
	if v.Type != TypeArray {
		if s, ok := v.Data.(string); ok {
			if len(s) > 60 {
				s = s[:60] + "..."
			}
			return fmt.Sprintf("%q", s)
		}
		return fmt.Sprint(v.Data)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s(%d)", v.TypeName(), v.Len())
	return b.String()
}
