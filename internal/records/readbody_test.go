package records

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"testing/iotest"
)

// TestReadBody: a body read to its stated length and its end in one
// buffer, one allocation; more than the length (a reader other than the
// server's) read too; a reader that stops early or fails is an error.
func TestReadBody(t *testing.T) {
	body := []byte(`{"name":"bench"}`)
	size := int64(len(body))
	cases := []struct {
		name string
		r    func() io.Reader
		want []byte
		err  bool
	}{
		{"exact", func() io.Reader { return bytes.NewReader(body) }, body, false},
		{"one byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(body)) }, body, false},
		{"EOF with the last bytes", func() io.Reader { return iotest.DataErrReader(bytes.NewReader(body)) }, body, false},
		{"more than stated", func() io.Reader { return bytes.NewReader(append(body, "xyz"...)) }, append(body, "xyz"...), false},
		{"shorter than stated", func() io.Reader { return bytes.NewReader(body[:4]) }, nil, true},
		{"failing", func() io.Reader { return iotest.ErrReader(errors.New("reset")) }, nil, true},
	}
	for _, c := range cases {
		got, err := readBody(c.r(), size)
		if (err != nil) != c.err || !bytes.Equal(got, c.want) {
			t.Errorf("%s: %q, %v; want %q (error %v)", c.name, got, err, c.want, c.err)
		}
	}
	allocs := testing.AllocsPerRun(100, func() {
		r := bytes.NewReader(body)
		if _, err := readBody(r, size); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 2 { // the buffer, and the reader escaping through the interface (io.ReadAll after it made 3)
		t.Errorf("%.0f allocations a body, want the buffer alone", allocs)
	}
}
