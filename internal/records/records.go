package records

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

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

// Schema is the records table's schema.
var Schema = engine.Schema{
	Name:   Table,
	Fields: []engine.Field{{Name: "key", Kind: engine.KindString}, {Name: "fields", Kind: engine.KindBytes}},
	Key:    "key",
}

// Setup creates the records table if it is missing (an existing one is
// kept). f is main's fiber.
func Setup(f *runtime.Fiber, db *dbowner.DB) error {
	err := db.CreateTable(f, Schema)
	if errors.Is(err, engine.ErrTableExists) {
		err = nil
	}
	// A member waiting to join gets the table with the group's state (the
	// log or a snapshot) once it is added; until then it serves nothing.
	if errors.Is(err, dbowner.ErrJoining) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("records: create table %q: %w", Table, err)
	}
	return nil
}

// Record is one stored record, as the API returns it.
type Record struct {
	Key     string          `json:"key"`
	Fields  json.RawMessage `json:"fields"`
	Version uint64          `json:"version"`
}

func toRecord(r engine.Record) Record {
	f := r.Get("fields").Bytes()
	if len(f) == 0 {
		f = []byte("{}")
	}
	return Record{Key: r.Get("key").Str(), Fields: f, Version: r.Version}
}

// appendRecord writes a record's JSON: the fields are stored canonical and
// valid, so they are copied as they are instead of re-validated.
func appendRecord(b []byte, r Record) []byte {
	b = appendRecordHead(b, r.Key)
	b = append(b, r.Fields...)
	return appendRecordTail(b, r.Version)
}

// appendRecordHead is a record's JSON up to its fields, appendRecordTail
// the rest: an answer of one record is written around its fields (a
// megabyte) instead of copying them into one buffer first.
func appendRecordHead(b []byte, key string) []byte {
	b = append(b, `{"key":`...)
	b = appendString(b, key)
	return append(b, `,"fields":`...)
}

func appendRecordTail(b []byte, version uint64) []byte {
	b = append(b, `,"version":`...)
	b = strconv.AppendUint(b, version, 10)
	return append(b, '}')
}

// appendString is s as a JSON string, with encoding/json's escaping
// (HTML-safe), as json.Marshal writes a string and a map's keys.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s)
	return append(b, q...)
}

// The list cursor is base64url (no padding) of a version byte and the last
// key of the page: the next page starts after that key. It names no
// engine internals, so it stays valid across restarts and shard counts.
const cursorVersion = 'k'

func encodeCursor(lastKey string) string {
	return base64.RawURLEncoding.EncodeToString(append([]byte{cursorVersion}, lastKey...))
}

func decodeCursor(s string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) < 2 || b[0] != cursorVersion {
		return "", false
	}
	k := string(b[1:])
	if checkKey(k) != "" {
		return "", false
	}
	return k, true
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
