package engine

// AppendValue appends v's encoding to dst: its kind byte, then a string or
// bytes value's length and bytes, an int or time's varint, a float's 8
// bytes, a bool's byte (the form batches and snapshots use); the zero
// Value is its kind byte, 0, alone, so that a call carrying one gets the
// same answer from the engine wherever it runs.
func AppendValue(dst []byte, v Value) []byte { return appendOptValue(dst, v) }

// DecodeValue decodes the value at the front of p and returns it and the
// number of bytes it took; an error (wrapping ErrCorrupt) names what was
// wrong and where. Its strings are copies: nothing of p is kept.
func DecodeValue(p []byte) (Value, int, error) {
	d := decoder{b: p}
	v := d.optValue()
	if d.err != nil {
		return Value{}, 0, corrupt("value", d.err)
	}
	return v, d.off, nil
}
