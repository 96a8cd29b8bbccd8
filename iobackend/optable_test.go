package iobackend

import (
	"math/rand/v2"
	"testing"
)

// The table must agree with a map under any mix of dense, colliding and
// out-of-range tokens.
func TestOpTableMatchesMap(t *testing.T) {
	var tbl opTable[int]
	ref := map[uint64]*int{}
	r := rand.New(rand.NewPCG(1, 2))
	token := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return uint64(r.IntN(64)) // small, dense
		case 1:
			return uint64(r.IntN(4))<<32 | uint64(r.IntN(64)) // same slot, other generation
		case 2:
			return uint64(maxDense + r.IntN(64)) // beyond the flat part
		}
		return r.Uint64() &^ ReservedTokenBit
	}
	for i := 0; i < 100000; i++ {
		tok := token()
		if (tbl.get(tok) != nil) != (ref[tok] != nil) {
			t.Fatalf("step %d: get(%#x) disagrees with the map", i, tok)
		}
		if ref[tok] == nil {
			v := i
			tbl.put(tok, &v)
			ref[tok] = &v
		} else {
			if tbl.get(tok) != ref[tok] {
				t.Fatalf("step %d: get(%#x) returned another op", i, tok)
			}
			tbl.del(tok)
			delete(ref, tok)
		}
		if tbl.len() != len(ref) {
			t.Fatalf("step %d: len %d, map %d", i, tbl.len(), len(ref))
		}
	}
	seen := 0
	tbl.each(func(tok uint64, op *int) {
		if ref[tok] != op {
			t.Fatalf("each: %#x not in the map", tok)
		}
		seen++
	})
	if seen != len(ref) {
		t.Fatalf("each visited %d, want %d", seen, len(ref))
	}
}

func TestCheckToken(t *testing.T) {
	for _, tc := range []struct {
		closed, inFlight bool
		tok              uint64
		want             string
	}{
		{false, false, 1, "errno 0"},
		{true, false, 1, "file descriptor in bad state"},
		{false, false, ReservedTokenBit | 1, "invalid argument"},
		{false, true, 1, "file exists"},
	} {
		got := checkToken(tc.closed, tc.tok, tc.inFlight)
		if got.Error() != tc.want {
			t.Errorf("checkToken(%v, %#x, %v) = %q, want %q", tc.closed, tc.tok, tc.inFlight, got.Error(), tc.want)
		}
	}
}
