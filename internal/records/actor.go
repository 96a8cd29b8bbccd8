package records

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// Table is the records table: a string primary key and the record's fields
// as one canonical JSON object (keys sorted, as encoding/json writes a map),
// stored as bytes. One bytes field keeps the schema fixed while records carry
// any string fields; the canonical encoding makes answers byte-identical
// whatever the shard count.
const Table = "records"

// ActorName is the name the worker registers the records actor under.
const ActorName = "records"

// Schema is the records table's schema.
var Schema = engine.Schema{
	Name:   Table,
	Fields: []engine.Field{{Name: "key", Kind: engine.KindString}, {Name: "fields", Kind: engine.KindBytes}},
	Key:    "key",
}

type opKind uint8

const (
	opGet opKind = iota + 1
	opPut
	opDelete
	opList
)

// Request is the records actor's message. It carries only strings and
// values, so nothing mutable is shared when it crosses shards.
type Request struct {
	op     opKind
	key    string
	fields string // opPut: canonical JSON object
	prefix string // opList
	limit  int    // opList
	after  string // opList: the cursor of the previous page
	span   trace.SpanContext
	reply  runtime.Reply[Response]
}

// Response is the actor's answer; every slice in it is freshly built for
// the reply and not touched by the actor afterwards.
type Response struct {
	Record  Record
	Records []Record
	Next    string
	Created bool
	Err     error
}

// Record is one stored record, as the API returns it.
type Record struct {
	Key     string  `json:"key"`
	Fields  rawJSON `json:"fields"`
	Version uint64  `json:"version"`
}

// rawJSON is json.RawMessage as a string, so a Record holds no slice.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) {
	if r == "" {
		return []byte("{}"), nil
	}
	return []byte(r), nil
}

// UnmarshalJSON keeps the object as it is (clients decoding a Record).
func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = rawJSON(b)
	return nil
}

// Actor serves Requests against the database. Each request runs on its own
// fiber on the actor's shard, so that slow writes (parked on the group
// commit) overlap and share fsyncs instead of queueing one behind another in
// the mailbox.
type Actor struct {
	db *dbowner.DB
}

// Start creates the records table if it is missing (checking the schema if
// it is there) and spawns the records actor. f is main's fiber.
func Start(f *runtime.Fiber, db *dbowner.DB) (runtime.Addr[Request], error) {
	err := db.CreateTable(f, Schema)
	if errors.Is(err, engine.ErrTableExists) {
		err = nil
	}
	if err != nil {
		return runtime.Addr[Request]{}, fmt.Errorf("records: create table %q: %w", Table, err)
	}
	return runtime.Spawn[Request](f, &Actor{db: db}), nil
}

// Receive starts a fiber for the request and returns, so the actor is free
// for the next one at once.
func (a *Actor) Receive(f *runtime.Fiber, m Request) {
	runtime.Go(f, func(f *runtime.Fiber) {
		m.reply.Send(f, a.handle(f, m))
	})
}

func (a *Actor) handle(f *runtime.Fiber, m Request) Response {
	db := a.db
	if m.span.IsValid() {
		db = db.WithContext(trace.ContextWithSpanContext(context.Background(), m.span))
	}
	switch m.op {
	case opGet:
		r, err := db.Get(f, Table, engine.String(m.key))
		if err != nil {
			return Response{Err: err}
		}
		return Response{Record: toRecord(r)}
	case opPut:
		return put(f, db, m.key, m.fields)
	case opDelete:
		return Response{Err: db.Delete(f, Table, engine.String(m.key))}
	case opList:
		return list(f, db, m)
	}
	return Response{Err: fmt.Errorf("records: unknown op %d", m.op)}
}

// put is an upsert. The engine has insert (fails on a duplicate) and update
// (fails on a missing key); a concurrent PUT or DELETE of the same key can
// flip which one applies between the Get and the write, so it retries with
// the other one. Each attempt is one durable transaction.
func put(f *runtime.Fiber, db *dbowner.DB, key, fields string) Response {
	kv := engine.String(key)
	fv := engine.Bytes([]byte(fields))
	_, err := db.Get(f, Table, kv)
	exists := err == nil
	if err != nil && !errors.Is(err, engine.ErrNotFound) {
		return Response{Err: err}
	}
	for range 4 {
		var v uint64
		if exists {
			v, err = db.Update(f, Table, kv, map[string]engine.Value{"fields": fv})
			if errors.Is(err, engine.ErrNotFound) {
				exists = false
				continue
			}
		} else {
			v, err = db.Insert(f, Table, map[string]engine.Value{"key": kv, "fields": fv})
			if errors.Is(err, engine.ErrDuplicateKey) {
				exists = true
				continue
			}
		}
		if err != nil {
			return Response{Err: err}
		}
		return Response{Record: Record{Key: key, Fields: rawJSON(fields), Version: v}, Created: !exists}
	}
	return Response{Err: fmt.Errorf("records: put %q: %w", key, errContended)}
}

var errContended = errors.New("key changed under every attempt")

func list(f *runtime.Fiber, db *dbowner.DB, m Request) Response {
	q := engine.Query{Table: Table, Limit: m.limit}
	if m.prefix != "" {
		q.Where = append(q.Where, engine.Ge("key", engine.String(m.prefix)))
		if end, ok := prefixEnd(m.prefix); ok {
			q.Where = append(q.Where, engine.Lt("key", engine.String(end)))
		}
	}
	if m.after != "" {
		c, err := base64.RawURLEncoding.DecodeString(m.after)
		if err != nil {
			return Response{Err: fmt.Errorf("%w: not base64url", engine.ErrBadCursor)}
		}
		q.After = c
	}
	res, err := db.Query(f, q)
	if err != nil {
		return Response{Err: err}
	}
	out := Response{Records: make([]Record, 0, len(res.Records))}
	for _, r := range res.Records {
		out.Records = append(out.Records, toRecord(r))
	}
	if res.Next != nil {
		out.Next = base64.RawURLEncoding.EncodeToString(res.Next)
	}
	return out
}

// prefixEnd is the smallest string greater than every string with the
// prefix: the prefix with its last byte below 0xff incremented. A prefix of
// only 0xff bytes has no end (ok is false).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

func toRecord(r engine.Record) Record {
	return Record{Key: r.Get("key").Str(), Fields: rawJSON(r.Get("fields").Bytes()), Version: r.Version}
}
