package dbowner

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/replication/node"
	"github.com/writeonce/wo/runtime"
	"go.opentelemetry.io/otel/propagation"
)

// The wire form of a database call forwarded to another member, and of its
// answer: the first piece of placing partitions on fewer members than the
// cluster has (docs/replication.md, "The later steps" 3), where a call for
// a partition this member does not hold goes to one that does. Only the
// calls a partition serves travel (Get, Query, a write's command), a
// partition's status (a member that may have been removed from its group
// asks a holder: placer.go) and a partition's backup, chunk by chunk (a
// member backing up partitions it does not hold: backup.go); membership
// calls go to partition 0, which every member holds.
// DB.forward sends it (transport.TCP.Call), callServer serves it
// (forward.go).
//
//	call   := version:u8(=1) kind:u8 partition:uvarint op:str table:str deadline_ms:uvarint
//	          flags:u8 ntrace:uvarint (key:str value:str)* body
//	body   := get: key:value | query: query | write: cmd:bytes | status: (none)
//	          | backup: capture:uvarint chunk:uvarint
//	query  := nwhere:uvarint (field:str op:u8 value:value)* order:str
//	          desc:u8 limit:uvarint after:bytes
//	answer := version:u8(=1) seq:uvarint has:u8 [record] [result] [status] [backup] err
//	record := version:uvarint nfields:uvarint (name:str value:value)*   (names sorted)
//	result := nrecords:uvarint record* next:bytes plan:str
//	status := id:u64 leader:u64 applied:uvarint nmembers:uvarint (id:u64 learner:u8)*
//	backup := capture:uvarint index:uvarint term:uvarint total:uvarint chunks:uvarint data:bytes
//	err    := 0 | 1 engine-error | 2 sentinel:u8 message:str | 3 message:str
//
// str and bytes are a uvarint length and the bytes; value is
// engine.AppendValue's; engine-error is the state snapshot's outcome error
// (appendOutcomeErr) after its leading 1; flags bit 0 is a stale read;
// has bit 0 a record, bit 1 a result, bit 2 a status, bit 3 a backup
// chunk. callSentinels numbers the
// database's own errors: append only, the numbers are the wire's.
const callVersion = 1

// maxCallCount bounds a decoded count before anything is allocated for it.
const maxCallCount = 1 << 20

var callSentinels = []error{
	nil, ErrClosed, ErrFatal, ErrNoSpace, ErrNoQuorum, ErrJoining, ErrRemoved,
	ErrCrossPartition, runtime.ErrTimeout, runtime.ErrStopped, ErrNotHeld,
}

// appendCall appends the wire form of req, a call of partition p; deadline
// is the time the caller still waits (0: none), sent as a duration since
// the members' clocks differ.
func appendCall(dst []byte, p int, req *request, deadline time.Duration) ([]byte, error) {
	if !servedKind(req.kind) {
		return dst, fmt.Errorf("dbowner: %s: not a call another member serves", req.op)
	}
	dst = append(dst, callVersion, byte(req.kind))
	dst = binary.AppendUvarint(dst, uint64(p))
	dst = appendStr(dst, req.op)
	dst = appendStr(dst, req.table)
	dst = binary.AppendUvarint(dst, uint64(max(deadline, 0)/time.Millisecond))
	var flags byte
	if req.stale {
		flags |= 1
	}
	dst = append(dst, flags)
	keys := slices.Sorted(maps.Keys(req.trace))
	dst = binary.AppendUvarint(dst, uint64(len(keys)))
	for _, k := range keys {
		dst = appendStr(dst, k)
		dst = appendStr(dst, req.trace[k])
	}
	switch req.kind {
	case reqGet:
		dst = engine.AppendValue(dst, req.key)
	case reqQuery:
		q := &req.query
		dst = binary.AppendUvarint(dst, uint64(len(q.Where)))
		for _, w := range q.Where {
			dst = appendStr(dst, w.Field)
			dst = append(dst, byte(w.Op))
			dst = engine.AppendValue(dst, w.Value)
		}
		dst = appendStr(dst, q.OrderBy)
		dst = append(dst, boolByte(q.Desc))
		dst = binary.AppendUvarint(dst, uint64(max(q.Limit, 0)))
		dst = appendStr(dst, string(q.After))
	case reqWrite:
		if len(req.cmd) < node.HeaderLen {
			return dst, fmt.Errorf("dbowner: %s: a command without the raft header's room", req.op)
		}
		dst = appendStr(dst, string(req.cmd[node.HeaderLen:]))
	case reqBackup:
		dst = binary.AppendUvarint(dst, req.id)
		dst = binary.AppendUvarint(dst, uint64(max(req.chunk, 0)))
	}
	return dst, nil
}

// decodeCall decodes a call's wire form: its partition, the request and
// the time its caller still waits. Every error names what was wrong;
// nothing of b is kept (a write's command is copied behind the raft
// header's room, as a local write's is built).
func decodeCall(b []byte) (int, request, time.Duration, error) {
	r := &snapReader{p: b}
	var req request
	if v := r.byte(); r.err == nil && v != callVersion {
		return 0, req, 0, fmt.Errorf("dbowner: forwarded call: unknown version %d", v)
	}
	req.kind = reqKind(r.byte())
	if r.err == nil && !servedKind(req.kind) {
		return 0, req, 0, fmt.Errorf("dbowner: forwarded call: kind %d is not a call another member serves", req.kind)
	}
	p := r.uvarint()
	if r.err == nil && p >= MaxPartitions {
		r.err = fmt.Errorf("partition %d", p)
	}
	req.op, req.table = r.str(), r.str()
	ms := r.uvarint()
	if r.err == nil && ms > uint64(time.Duration(1<<62)/time.Millisecond) {
		r.err = fmt.Errorf("deadline of %d ms", ms)
	}
	deadline := time.Duration(ms) * time.Millisecond
	flags := r.byte()
	if r.err == nil && flags > 1 {
		r.err = fmt.Errorf("unknown flags %#x", flags)
	}
	req.stale = flags&1 != 0
	if n := r.count("trace entries", 2); n > 0 {
		req.trace = make(propagation.MapCarrier, n)
		for range n {
			k, v := r.str(), r.str()
			req.trace[k] = v
		}
	}
	switch req.kind {
	case reqGet:
		req.key = r.value()
	case reqQuery:
		q := &req.query
		q.Table = req.table
		if n := r.count("filters", 3); n > 0 {
			q.Where = make([]engine.Filter, n)
			for i := range n {
				q.Where[i].Field = r.str()
				q.Where[i].Op = engine.FilterOp(r.byte())
				q.Where[i].Value = r.value()
			}
		}
		q.OrderBy = r.str()
		q.Desc = r.flag("desc")
		limit := r.uvarint()
		if r.err == nil && limit > maxCallCount {
			r.err = fmt.Errorf("limit %d over %d", limit, maxCallCount)
		}
		q.Limit = int(limit)
		if after := r.str(); after != "" {
			q.After = engine.Cursor(after)
		}
	case reqWrite:
		cmd := r.str()
		if r.err == nil {
			req.cmd = append(node.NewEntry(len(cmd)), cmd...)
		}
	case reqBackup:
		req.id = r.uvarint()
		chunk := r.uvarint()
		if r.err == nil && chunk > maxCallCount {
			r.err = fmt.Errorf("backup chunk %d over %d", chunk, maxCallCount)
		}
		req.chunk = int(chunk)
	}
	if r.err == nil && len(r.p) > 0 {
		r.err = fmt.Errorf("%d bytes after the call", len(r.p))
	}
	if r.err != nil {
		return 0, request{}, 0, fmt.Errorf("dbowner: forwarded call: %w", r.err)
	}
	return int(p), req, deadline, nil
}

// servedKind reports whether another member serves calls of kind k.
func servedKind(k reqKind) bool {
	return k == reqGet || k == reqQuery || k == reqWrite || k == reqStatus || k == reqBackup
}

// appendAnswer appends resp's wire form.
func appendAnswer(dst []byte, resp *response) []byte {
	dst = append(dst, callVersion)
	dst = binary.AppendUvarint(dst, resp.seq)
	var has byte
	if resp.rec.Fields != nil {
		has |= 1
	}
	if resp.res.Records != nil || resp.res.Next != nil || resp.res.Plan != "" {
		has |= 2
	}
	if resp.status != nil {
		has |= 4
	}
	if resp.backup != nil {
		has |= 8
	}
	dst = append(dst, has)
	if has&1 != 0 {
		dst = appendRecord(dst, resp.rec)
	}
	if has&2 != 0 {
		dst = binary.AppendUvarint(dst, uint64(len(resp.res.Records)))
		for _, rec := range resp.res.Records {
			dst = appendRecord(dst, rec)
		}
		dst = appendStr(dst, string(resp.res.Next))
		dst = appendStr(dst, resp.res.Plan)
	}
	if st := resp.status; st != nil {
		dst = binary.BigEndian.AppendUint64(dst, st.ID)
		dst = binary.BigEndian.AppendUint64(dst, st.Leader)
		dst = binary.AppendUvarint(dst, st.Applied)
		dst = binary.AppendUvarint(dst, uint64(len(st.Members)))
		for _, m := range st.Members {
			dst = binary.BigEndian.AppendUint64(dst, m.ID)
			dst = append(dst, boolByte(m.Learner))
		}
	}
	if c := resp.backup; c != nil {
		dst = binary.AppendUvarint(dst, c.capture)
		dst = binary.AppendUvarint(dst, c.index)
		dst = binary.AppendUvarint(dst, c.term)
		dst = binary.AppendUvarint(dst, uint64(c.total))
		dst = binary.AppendUvarint(dst, uint64(c.chunks))
		dst = binary.AppendUvarint(dst, uint64(len(c.data)))
		dst = append(dst, c.data...)
	}
	return appendCallErr(dst, resp.err)
}

func appendRecord(dst []byte, rec engine.Record) []byte {
	dst = binary.AppendUvarint(dst, rec.Version)
	names := slices.Sorted(maps.Keys(rec.Fields))
	dst = binary.AppendUvarint(dst, uint64(len(names)))
	for _, n := range names {
		dst = appendStr(dst, n)
		dst = engine.AppendValue(dst, rec.Fields[n])
	}
	return dst
}

// appendCallErr keeps what the caller tests: an engine error whole (its
// sentinel and where), a database sentinel with the message around it,
// anything else as its message.
func appendCallErr(dst []byte, err error) []byte {
	if err == nil {
		return append(dst, 0)
	}
	if _, ok := errors.AsType[*engine.Error](err); ok {
		return appendOutcomeErr(dst, err) // its leading byte is 1
	}
	for i, s := range callSentinels {
		if s != nil && errors.Is(err, s) {
			dst = append(dst, 2, byte(i))
			return appendStr(dst, err.Error())
		}
	}
	return appendStr(append(dst, 3), err.Error())
}

// decodeAnswer decodes an answer's wire form.
func decodeAnswer(p []byte) (response, error) {
	r := &snapReader{p: p}
	var resp response
	if v := r.byte(); r.err == nil && v != callVersion {
		return resp, fmt.Errorf("dbowner: forwarded answer: unknown version %d", v)
	}
	resp.seq = r.uvarint()
	has := r.byte()
	if r.err == nil && has > 15 {
		r.err = fmt.Errorf("unknown parts %#x", has)
	}
	if has&1 != 0 {
		resp.rec = r.record()
	}
	if has&2 != 0 {
		n := r.count("records", 2)
		resp.res.Records = make([]engine.Record, 0, n)
		for range n {
			resp.res.Records = append(resp.res.Records, r.record())
		}
		if next := r.str(); next != "" {
			resp.res.Next = engine.Cursor(next)
		}
		resp.res.Plan = r.str()
	}
	if has&4 != 0 {
		st := &node.Status{ID: r.u64(), Leader: r.u64(), Applied: r.uvarint()}
		n := r.count("members", 9)
		for range n {
			st.Members = append(st.Members, node.Member{ID: r.u64(), Learner: r.flag("learner")})
		}
		resp.status = st
	}
	if has&8 != 0 {
		c := &backupChunk{capture: r.uvarint(), index: r.uvarint(), term: r.uvarint()}
		total, chunks := r.uvarint(), r.uvarint()
		if r.err == nil && (total > 1<<62 || chunks > maxCallCount) {
			r.err = fmt.Errorf("backup of %d bytes in %d chunks", total, chunks)
		}
		c.total, c.chunks = int64(total), int(chunks)
		if data := r.str(); data != "" {
			c.data = []byte(data)
		}
		resp.backup = c
	}
	switch k := r.byte(); {
	case r.err != nil, k == 0:
	case k == 1:
		resp.err = readOutcomeErr(r)
	case k == 2:
		i := int(r.byte())
		msg := r.str()
		if r.err == nil && (i == 0 || i >= len(callSentinels)) {
			r.err = fmt.Errorf("unknown error number %d", i)
		}
		if r.err == nil {
			resp.err = &forwardedError{msg: msg, sentinel: callSentinels[i]}
		}
	case k == 3:
		resp.err = errors.New(r.str())
	default:
		r.err = fmt.Errorf("unknown error class %d", k)
	}
	if r.err == nil && len(r.p) > 0 {
		r.err = fmt.Errorf("%d bytes after the answer", len(r.p))
	}
	if r.err != nil {
		return response{}, fmt.Errorf("dbowner: forwarded answer: %w", r.err)
	}
	return resp, nil
}

// forwardedError is a database sentinel error from another member: its
// message as that member wrote it, errors.Is the same sentinel.
type forwardedError struct {
	msg      string
	sentinel error
}

func (e *forwardedError) Error() string { return e.msg }
func (e *forwardedError) Unwrap() error { return e.sentinel }

func boolByte(b bool) byte {
	if b {
		return 1
	}
	return 0
}

// count reads a count of items of at least minSize bytes each, refusing one
// the rest of the input cannot hold before anything is allocated for it.
// u64 reads a big-endian uint64 (a member ID).
func (r *snapReader) u64() uint64 {
	if r.err != nil || len(r.p) < 8 {
		r.err = cmpErr(r.err, errors.New("unexpected end"))
		return 0
	}
	v := binary.BigEndian.Uint64(r.p)
	r.p = r.p[8:]
	return v
}

func (r *snapReader) count(what string, minSize int) int {
	n := r.uvarint()
	if r.err == nil && (n > maxCallCount || n*uint64(minSize) > uint64(len(r.p))) {
		r.err = fmt.Errorf("%d %s in %d bytes", n, what, len(r.p))
	}
	if r.err != nil {
		return 0
	}
	return int(n)
}

func (r *snapReader) flag(what string) bool {
	c := r.byte()
	if r.err == nil && c > 1 {
		r.err = fmt.Errorf("bad %s byte %d", what, c)
	}
	return c == 1
}

func (r *snapReader) value() engine.Value {
	if r.err != nil {
		return engine.Value{}
	}
	v, n, err := engine.DecodeValue(r.p)
	if err != nil {
		r.err = err
		return engine.Value{}
	}
	r.p = r.p[n:]
	return v
}

func (r *snapReader) record() engine.Record {
	rec := engine.Record{Version: r.uvarint()}
	n := r.count("fields", 2)
	if r.err != nil {
		return engine.Record{}
	}
	rec.Fields = make(map[string]engine.Value, n)
	for range n {
		name := r.str()
		if _, dup := rec.Fields[name]; dup && r.err == nil {
			r.err = fmt.Errorf("field %q twice in a record", name)
		}
		rec.Fields[name] = r.value()
	}
	return rec
}
