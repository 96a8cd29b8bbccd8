package dbowner

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
	"go.opentelemetry.io/otel/propagation"
)

// sampleCalls covers every kind of call another member serves, every
// value kind and every query part.
func sampleCalls() []request {
	at := engine.Time(time.Unix(1700000000, 12345))
	return []request{
		{kind: reqGet, op: "get", table: "users", key: engine.String("user:{42}:a")},
		{kind: reqGet, op: "get", table: "t", key: engine.Int(-7), stale: true},
		{kind: reqGet, op: "get", table: "t", key: engine.Value{}}, // the engine's own error, wherever it runs
		{kind: reqQuery, op: "query", table: "events", query: engine.Query{
			Table: "events",
			Where: []engine.Filter{
				engine.Ge("at", at), engine.Lt("score", engine.Float(2.5)), engine.Eq("ok", engine.Bool(true)),
				engine.Ne("raw", engine.Bytes([]byte{0, 1, 255})), engine.Gt("n", engine.Int(1<<40)),
			},
			OrderBy: "at", Desc: true, Limit: 100, After: engine.Cursor("\x01opaque\x00"),
		}, trace: propagation.MapCarrier{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}},
		{kind: reqQuery, op: "query", table: "empty", query: engine.Query{Table: "empty"}},
		{kind: reqStatus, op: "partition status"},
		{kind: reqBackup, op: "backup"},
		{kind: reqBackup, op: "backup", id: 1 << 40, chunk: 7, stale: true},
		{kind: reqWrite, op: "transaction", table: "kv", cmd: newCommand("req-1", engine.Batch{
			engine.Put("kv", map[string]engine.Value{"k": engine.String("a"), "v": engine.Bytes([]byte("x"))}),
			engine.Delete("kv", engine.String("b")),
		})},
	}
}

func TestCallRoundTrip(t *testing.T) {
	for i, req := range sampleCalls() {
		b, err := appendCall(nil, i*100, &req, 1500*time.Millisecond)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		p, got, deadline, err := decodeCall(b)
		if err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if deadline != 1500*time.Millisecond || p != i*100 {
			t.Errorf("call %d: deadline %v, partition %d", i, deadline, p)
		}
		if req.kind == reqQuery && req.query.Where == nil {
			req.query.Where = nil
		}
		if !reflect.DeepEqual(got, req) {
			t.Errorf("call %d:\n got %+v\nwant %+v", i, got, req)
		}
	}
}

func TestCallRefusesWhatAnotherMemberDoesNotServe(t *testing.T) {
	for _, k := range []reqKind{reqOpen, reqClose, reqAddLearner, reqTransfer} {
		if _, err := appendCall(nil, 0, &request{kind: k, op: "x"}, 0); err == nil {
			t.Errorf("kind %d encoded", k)
		}
	}
	if _, err := appendCall(nil, 0, &request{kind: reqWrite, op: "insert", cmd: []byte{1}}, 0); err == nil {
		t.Error("a command without the header's room encoded")
	}
}

func sampleAnswers() []response {
	rec := engine.Record{Version: 9, Fields: map[string]engine.Value{"id": engine.String("a"), "n": engine.Int(3)}}
	return []response{
		{seq: 42},
		{rec: rec},
		{status: &node.Status{ID: 1 << 48, Leader: 2 << 48, Applied: 77, Members: []node.Member{{ID: 2 << 48}, {ID: 3<<48 | 5, Learner: true}}}},
		{status: &node.Status{}},
		{backup: &backupChunk{capture: 3, index: 1 << 33, term: 9, total: 5 << 20, chunks: 5, data: []byte{0, 1, 2, 255}}},
		{backup: &backupChunk{capture: 1, index: 2, term: 1}},
		{res: engine.Result{Records: []engine.Record{rec, {Version: 1, Fields: map[string]engine.Value{}}}, Next: engine.Cursor("c"), Plan: "scan"}},
		{res: engine.Result{Records: []engine.Record{}}},
		{err: &engine.Error{Err: engine.ErrNotFound, Op: "get", Index: -1, Table: "users", Value: `"x"`}},
		{err: &engine.Error{Err: engine.ErrPrecondition, Op: "update", Index: 2, Table: "t", Field: "v", Detail: "version 3, want 2"}},
		{err: fmt.Errorf("dbowner: insert \"t\": %w", ErrNoQuorum)},
		{err: fmt.Errorf("dbowner: get \"t\": %w", runtime.ErrTimeout)},
		{err: &forwardedError{msg: "a transaction spans partitions: …", sentinel: ErrCrossPartition}},
		{err: errors.New("something else entirely")},
	}
}

func TestAnswerRoundTrip(t *testing.T) {
	for i, resp := range sampleAnswers() {
		got, err := decodeAnswer(appendAnswer(nil, &resp))
		if err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if !reflect.DeepEqual(got.rec, resp.rec) || !reflect.DeepEqual(got.res, resp.res) || got.seq != resp.seq || !reflect.DeepEqual(got.status, resp.status) ||
			!reflect.DeepEqual(got.backup, resp.backup) {
			t.Errorf("answer %d:\n got %+v\nwant %+v", i, got, resp)
		}
		if (got.err == nil) != (resp.err == nil) {
			t.Fatalf("answer %d: error %v, want %v", i, got.err, resp.err)
		}
		if resp.err == nil {
			continue
		}
		if got.err.Error() != resp.err.Error() {
			t.Errorf("answer %d: message %q, want %q", i, got.err, resp.err)
		}
		for _, s := range append(callSentinels[1:], engine.ErrNotFound, engine.ErrPrecondition) {
			if errors.Is(got.err, s) != errors.Is(resp.err, s) {
				t.Errorf("answer %d: errors.Is(%v) %v, want %v", i, s, errors.Is(got.err, s), errors.Is(resp.err, s))
			}
		}
		if want, ok := errors.AsType[*engine.Error](resp.err); ok {
			if g, ok := errors.AsType[*engine.Error](got.err); !ok || *g != *want {
				t.Errorf("answer %d: engine error %+v, want %+v", i, g, want)
			}
		}
	}
}

// Every prefix of a valid encoding is refused with an error, never a panic,
// and so is anything after one; the errors say what was wrong.
func TestCallCodecRefusesBadBytes(t *testing.T) {
	for i, req := range sampleCalls() {
		b, _ := appendCall(nil, 3, &req, time.Second)
		for n := range len(b) {
			if _, _, _, err := decodeCall(b[:n]); err == nil {
				t.Fatalf("call %d cut at %d of %d bytes decoded", i, n, len(b))
			}
		}
		if _, _, _, err := decodeCall(append(b, 0)); err == nil || !strings.Contains(err.Error(), "after the call") {
			t.Fatalf("call %d with a byte after it: %v", i, err)
		}
	}
	for i, resp := range sampleAnswers() {
		b := appendAnswer(nil, &resp)
		for n := range len(b) {
			if _, err := decodeAnswer(b[:n]); err == nil {
				t.Fatalf("answer %d cut at %d of %d bytes decoded", i, n, len(b))
			}
		}
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{[]byte{2}, "unknown version 2"},
		{[]byte{1, byte(reqOpen)}, "not a call another member serves"},
		{[]byte{1, byte(reqGet), 0, 0, 0, 0, 7}, "unknown flags"},
		{[]byte{1, byte(reqGet), 0, 0, 0, 0, 0, 200, 1}, "trace entries"},
		{[]byte{1, byte(reqGet), 0, 0, 0, 0, 0, 0, 99}, "bad value kind 99"},
		{[]byte{1, byte(reqGet), 0xe7, 0x07}, "partition 999"},
	} {
		if _, _, _, err := decodeCall(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("call %v: %v, want an error naming %q", c.b, err, c.want)
		}
	}
	for _, c := range []struct {
		b    []byte
		want string
	}{
		{[]byte{3}, "unknown version 3"},
		{[]byte{1, 0, 16}, "unknown parts"},
		{[]byte{1, 0, 8, 1, 1, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0, 0, 0}, "backup of"},
		{[]byte{1, 0, 0, 9}, "unknown error class 9"},
		{[]byte{1, 0, 0, 2, 0, 0}, "unknown error number 0"},
		{[]byte{1, 0, 1, 0, 2, 1, 'a', 0, 1, 'a', 0}, `field "a" twice`},
	} {
		if _, err := decodeAnswer(c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("answer %v: %v, want an error naming %q", c.b, err, c.want)
		}
	}
}

// FuzzCallCodec: whatever arrives from a peer, decoding never panics and
// what decodes encodes back to bytes that decode the same.
func FuzzCallCodec(f *testing.F) {
	for i, req := range sampleCalls() {
		b, _ := appendCall(nil, i, &req, time.Second)
		f.Add(b)
	}
	for _, resp := range sampleAnswers() {
		f.Add(appendAnswer(nil, &resp))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if p, req, deadline, err := decodeCall(b); err == nil {
			again, err := appendCall(nil, p, &req, deadline)
			if err != nil {
				t.Fatalf("a decoded call does not encode: %v", err)
			}
			p2, req2, deadline2, err := decodeCall(again)
			if err != nil || p2 != p || deadline2 != deadline || !reflect.DeepEqual(req2, req) {
				t.Fatalf("a decoded call re-encoded decodes otherwise: %v\n%+v\n%+v", err, req2, req)
			}
		}
		if resp, err := decodeAnswer(b); err == nil {
			resp2, err := decodeAnswer(appendAnswer(nil, &resp))
			if err != nil || !reflect.DeepEqual(resp2.rec, resp.rec) || !reflect.DeepEqual(resp2.res, resp.res) || resp2.seq != resp.seq || !reflect.DeepEqual(resp2.status, resp.status) {
				t.Fatalf("a decoded answer re-encoded decodes otherwise: %v\n%+v\n%+v", err, resp2, resp)
			}
			if (resp.err == nil) != (resp2.err == nil) || resp.err != nil && resp.err.Error() != resp2.err.Error() {
				t.Fatalf("error %v became %v", resp.err, resp2.err)
			}
		}
	})
}
