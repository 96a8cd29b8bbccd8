package dbowner

import (
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner/engine"
)

// FuzzPartitionCursor: a partitioned query's cursor from the outside
// (after= of a list) is decoded without panicking, and a position encodes
// and decodes back to itself.
func FuzzPartitionCursor(f *testing.F) {
	q := engine.Query{Table: "t", OrderBy: "v", Where: []engine.Filter{engine.Ge("v", engine.Int(3))}}
	f.Add([]byte(encodePCursor(q, position{true, engine.Int(5), engine.String("k1")})), "k1", int64(5))
	f.Add([]byte{pcursorMagic, pcursorVer}, "", int64(0))
	f.Add([]byte("P\x01\x00\x00\x00\x00\x00\x00\x00\x00\x01\xff"), "x", int64(-1))
	f.Fuzz(func(t *testing.T, c []byte, key string, v int64) {
		q := q
		q.After = c
		_, _ = decodePCursor(q)
		for _, pos := range []position{
			{true, engine.Int(v), engine.String(key)},
			{true, engine.Bytes([]byte(key)), engine.Float(float64(v))},
			{true, engine.Time(time.Unix(0, v)), engine.Bool(v&1 == 1)},
		} {
			q.After = encodePCursor(q, pos)
			got, err := decodePCursor(q)
			if err != nil || got.ov != pos.ov || got.key != pos.key {
				t.Fatalf("%+v encoded and decoded: %+v, %v", pos, got, err)
			}
		}
		other := q
		other.Desc = !q.Desc
		other.After = q.After
		if _, err := decodePCursor(other); err == nil {
			t.Fatal("a cursor of another query (order reversed) was accepted")
		}
	})
}
