package dbowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
)

// The state machine: what a committed raft entry does to the engine. An
// entry's payload (after replication/node's 16-byte header) is a command:
//
//	command := version:u8(=1) reqid:str unixms:varint batch
//
// str is a uvarint length and bytes; batch is engine.AppendBatch. The
// command is the transaction as it was asked for: its checks are
// evaluated when it is applied (engine.Exec), on every member against the
// same state at the same log position, so the outcome is the same
// everywhere and is computed where it is applied. The proposing member
// hands the outcome (version or error) to its caller.
//
// Request IDs: a command with a non-empty reqid is applied at most once.
// The first application's outcome is kept in a table that is part of the
// replicated state (every member applies the same entries, and the table is
// in the snapshot); a later command with the same ID is not applied again
// and gets the first outcome. The table keeps the most recent
// MaxRequestIDs IDs and forgets IDs older than RequestIDTTL, measured in
// the proposers' clocks carried in the commands (unixms), so every member
// forgets the same IDs at the same entry.
const (
	commandVersion = 1
	// MaxRequestIDs bounds the request-ID table (see WithRequestID).
	MaxRequestIDs = 64 << 10
	// RequestIDTTL is how long a request ID is remembered.
	RequestIDTTL = 10 * time.Minute
	// maxRequestID bounds an ID's length.
	maxRequestID = 256
)

// commandHeaderMax is the most a command's bytes before its batch take,
// beside the request ID's own bytes.
const commandHeaderMax = 1 + 2*binary.MaxVarintLen64

// newCommand is b's command as the log carries it, built behind the room
// for the raft member's header (node.NewEntry) so that it is not copied
// again behind one.
func newCommand(reqID string, b engine.Batch) []byte {
	return encodeCommand(node.NewEntry(commandHeaderMax+len(reqID)+engine.SizeHint(b)), reqID, time.Now(), b)
}

func encodeCommand(dst []byte, reqID string, now time.Time, b engine.Batch) []byte {
	dst = append(dst, commandVersion)
	dst = binary.AppendUvarint(dst, uint64(len(reqID)))
	dst = append(dst, reqID...)
	dst = binary.AppendVarint(dst, now.UnixMilli())
	return engine.AppendBatch(dst, b)
}

// decodeCommand decodes a command; its batch reuses scratch's storage
// (engine.DecodeBatchInto), nil for a new one.
func decodeCommand(p []byte, scratch engine.Batch) (reqID string, unixms int64, b engine.Batch, err error) {
	if len(p) < 1 || p[0] != commandVersion {
		return "", 0, nil, fmt.Errorf("command: unknown version %v", p[:min(len(p), 1)])
	}
	p = p[1:]
	n, k := binary.Uvarint(p)
	if k <= 0 || n > maxRequestID || n > uint64(len(p)-k) {
		return "", 0, nil, errors.New("command: bad request ID length")
	}
	reqID = string(p[k : k+int(n)])
	p = p[k+int(n):]
	unixms, k = binary.Varint(p)
	if k <= 0 {
		return "", 0, nil, errors.New("command: bad time")
	}
	b, err = engine.DecodeBatchInto(scratch, p[k:])
	if err != nil {
		return "", 0, nil, fmt.Errorf("command: %w", err)
	}
	return reqID, unixms, b, nil
}

// outcome is what applying a command produced: the caller's answer.
type outcome struct {
	seq uint64
	err error
}

// dedupe is the request-ID table: ID -> first outcome, oldest first.
type dedupe struct {
	byID  map[string]*dedupeEntry
	order []*dedupeEntry // by application order; a prefix may be dead
	dead  int
}

type dedupeEntry struct {
	id     string
	unixms int64
	out    outcome
}

func newDedupe() *dedupe { return &dedupe{byID: map[string]*dedupeEntry{}} }

func (d *dedupe) get(id string) (outcome, bool) {
	e, ok := d.byID[id]
	if !ok {
		return outcome{}, false
	}
	return e.out, true
}

func (d *dedupe) put(id string, unixms int64, out outcome) {
	e := &dedupeEntry{id: id, unixms: unixms, out: out}
	d.byID[id] = e
	d.order = append(d.order, e)
	d.expire(unixms)
}

// expire forgets IDs past the bound or older than the TTL at time now
// (the applying command's unixms).
func (d *dedupe) expire(now int64) {
	for d.dead < len(d.order) {
		e := d.order[d.dead]
		if len(d.byID) <= MaxRequestIDs && e.unixms >= now-RequestIDTTL.Milliseconds() {
			break
		}
		delete(d.byID, e.id)
		d.order[d.dead] = nil
		d.dead++
	}
	if d.dead > 1024 && d.dead > len(d.order)/2 {
		d.order = append([]*dedupeEntry(nil), d.order[d.dead:]...)
		d.dead = 0
	}
}

// stateMachine is the owner's node.StateMachine: the engine and the
// request-ID table, changed only by the driver fiber in log order.
type stateMachine struct{ o *owner }

func (s stateMachine) Apply(f *runtime.Fiber, index uint64, data []byte) (any, error) {
	o := s.o
	reqID, unixms, b, err := decodeCommand(data, o.applyScratch)
	if err != nil {
		return nil, fmt.Errorf("dbowner: committed entry %d: %w", index, err)
	}
	// The engine keeps nothing of a batch it executed (a row copies its
	// values, an error copies the values it names): its storage serves
	// the next entry's decode.
	o.applyScratch = b
	if reqID != "" {
		if out, ok := o.dedupe.get(reqID); ok {
			o.stats.deduped.Add(1)
			return out, nil
		}
	}
	seq, err := o.eng.Exec(b...)
	if err != nil && !isEngineOutcome(err) {
		return nil, fmt.Errorf("dbowner: apply committed entry %d: %w", index, err)
	}
	out := outcome{seq: seq, err: err}
	if reqID != "" {
		o.dedupe.put(reqID, unixms, out)
	}
	o.stats.commits.Add(1)
	return out, nil
}

// isEngineOutcome tells a deterministic refusal of the batch (a failed
// precondition, a bad field: the caller's answer) from an engine error
// that means the state machine is broken.
func isEngineOutcome(err error) bool {
	var e *engine.Error
	return errors.As(err, &e) && !errors.Is(err, engine.ErrCorrupt)
}

// The state machine's snapshot (the bytes after node's member table):
//
//	sm     := version:u8(=1) nids:uvarint id* engine-state
//	id     := reqid:str unixms:varint seq:uvarint err
//	err    := 0 | 1 sentinel:u8 op:str index:varint table:str field:str value:str detail:str
//
// sentinel numbers the engine's error kinds (engineSentinels order).
const smSnapVersion = 1

var engineSentinels = []error{
	nil, engine.ErrNoTable, engine.ErrTableExists, engine.ErrNoField, engine.ErrIndexExists,
	engine.ErrBadSchema, engine.ErrType, engine.ErrMissingKey, engine.ErrDuplicateKey,
	engine.ErrNotFound, engine.ErrBadFilter, engine.ErrBadCursor, engine.ErrPrecondition,
	engine.ErrBadBatch,
}

// Snapshot captures the state at the applied index without copying it: the
// engine is frozen (copy-on-write B-tree clones, O(tables)) and the live
// request IDs are a slice of pointers to entries that never change once
// put. The returned writer streams that capture into the snapshot file (the
// storage calls it on a thread of its own at a lower priority, off the
// owner's shard: raftLog.endSnapshot) while the driver goes on applying:
// Applies after this call copy the tree nodes they touch and leave the
// frozen ones as they were (google/btree: a tree and its clone may be used
// concurrently once Clone returns; rows are never changed in place, an
// update installs a new one), so the bytes are exactly the state at the
// index raft is given. Streamed, not serialized into memory first: that
// held the whole state a second time (a million records: about 100 MB),
// and the collections its allocation brought on marked the whole heap
// while writes waited.
func (s stateMachine) Snapshot(f *runtime.Fiber) (node.SnapshotWriter, error) {
	o := s.o
	ids := slices.Clone(o.dedupe.order[o.dedupe.dead:])
	frozen := o.eng.Freeze()
	return func(w io.Writer) error { return serializeState(w, ids, frozen) }, nil
}

// serializeState writes the captured request IDs and engine to w. It reads
// only the capture, so it may run on any goroutine.
func serializeState(w io.Writer, ids []*dedupeEntry, frozen *engine.Frozen) error {
	buf := []byte{smSnapVersion}
	buf = binary.AppendUvarint(buf, uint64(len(ids)))
	for _, e := range ids {
		buf = appendStr(buf, e.id)
		buf = binary.AppendVarint(buf, e.unixms)
		buf = binary.AppendUvarint(buf, e.out.seq)
		buf = appendOutcomeErr(buf, e.out.err)
		if len(buf) >= 64<<10 {
			if _, err := w.Write(buf); err != nil {
				return fmt.Errorf("dbowner: snapshot request IDs: %w", err)
			}
			buf = buf[:0]
		}
	}
	if _, err := w.Write(buf); err != nil {
		return fmt.Errorf("dbowner: snapshot request IDs: %w", err)
	}
	if _, err := frozen.WriteTo(w); err != nil {
		return fmt.Errorf("dbowner: engine snapshot: %w", err)
	}
	return nil
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendOutcomeErr(b []byte, err error) []byte {
	if err == nil {
		return append(b, 0)
	}
	var e *engine.Error
	if !errors.As(err, &e) {
		e = &engine.Error{Detail: err.Error(), Index: -1}
	}
	k := 0
	for i, s := range engineSentinels {
		if s != nil && errors.Is(e.Err, s) {
			k = i
		}
	}
	b = append(b, 1, byte(k))
	b = appendStr(b, e.Op)
	b = binary.AppendVarint(b, int64(e.Index))
	b = appendStr(b, e.Table)
	b = appendStr(b, e.Field)
	b = appendStr(b, e.Value)
	return appendStr(b, e.Detail)
}

// readOutcomeErr reads what appendOutcomeErr wrote after its leading 1.
// An unknown sentinel number reads as ErrBadBatch (a newer member's kind).
func readOutcomeErr(r *snapReader) *engine.Error {
	k := int(r.byte())
	ee := &engine.Error{Op: r.str(), Index: int(r.varint()), Table: r.str(), Field: r.str(), Value: r.str(), Detail: r.str()}
	if k > 0 && k < len(engineSentinels) {
		ee.Err = engineSentinels[k]
	} else {
		ee.Err = engine.ErrBadBatch
	}
	return ee
}

// snapReader reads the state machine's snapshot with a sticky error.
type snapReader struct {
	p   []byte
	err error
}

func (r *snapReader) uvarint() uint64 { return readVarint(r, binary.Uvarint, "uvarint") }

func (r *snapReader) varint() int64 { return readVarint(r, binary.Varint, "varint") }

// readVarint reads one number with decode (binary.Uvarint or
// binary.Varint); what names the encoding in the sticky error.
func readVarint[T uint64 | int64](r *snapReader, decode func([]byte) (T, int), what string) T {
	if r.err != nil {
		return 0
	}
	v, k := decode(r.p)
	if k <= 0 {
		r.err = errors.New("bad " + what)
		return 0
	}
	r.p = r.p[k:]
	return v
}

func (r *snapReader) byte() byte {
	if r.err != nil || len(r.p) == 0 {
		r.err = cmpErr(r.err, errors.New("unexpected end"))
		return 0
	}
	c := r.p[0]
	r.p = r.p[1:]
	return c
}

func (r *snapReader) str() string {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.p)) {
		r.err = errors.New("string past the end")
	}
	if r.err != nil {
		return ""
	}
	s := string(r.p[:n])
	r.p = r.p[n:]
	return s
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func (s stateMachine) Restore(f *runtime.Fiber, data []byte) error {
	o := s.o
	r := &snapReader{p: data}
	if v := r.byte(); r.err == nil && v != smSnapVersion {
		return fmt.Errorf("dbowner: state snapshot: unknown version %d", v)
	}
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.p)) {
		r.err = errors.New("request-ID count past the end")
	}
	d := newDedupe()
	for range n {
		if r.err != nil {
			break
		}
		e := &dedupeEntry{id: r.str(), unixms: r.varint()}
		e.out.seq = r.uvarint()
		if r.byte() == 1 {
			e.out.err = readOutcomeErr(r)
		}
		d.byID[e.id] = e
		d.order = append(d.order, e)
	}
	if r.err != nil {
		return fmt.Errorf("dbowner: state snapshot: request-ID table: %w", r.err)
	}
	eng, err := engine.LoadYield(r.p, func() {
		if f != nil { // nil: a fuzz test decoding alone
			runtime.Checkpoint(f)
		}
	})
	if err != nil {
		return fmt.Errorf("dbowner: state snapshot: %w", err)
	}
	o.eng, o.dedupe = eng, d
	return nil
}
