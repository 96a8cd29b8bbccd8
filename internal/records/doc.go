// Package records is the worker's records API on the data-plane port (8080):
// string-keyed records of string fields, stored in the embedded database.
//
//	PUT    /v1/records/{key}   body: a JSON object of string fields
//	                           201 created / 200 replaced, {"key","fields","version"}
//	GET    /v1/records/{key}   200 {"key","fields","version"}; 404 when missing
//	DELETE /v1/records/{key}   204; 404 when missing
//	GET    /v1/records?prefix=&limit=&after=
//	                           200 {"records":[...],"next":"<cursor>"}, key order;
//	                           pass next as after= for the following page
//
// Errors are {"error": "..."}: 400 for bad JSON (naming what was wrong: the
// syntax error and its offset, a non-object body, the field whose value is
// not a string), a bad key, limit or cursor; 404 for a missing key; 413 for
// a body over MaxBody; 503 while the worker stops; 504 when the database did
// not answer within Options.Timeout.
//
// # Storage
//
// One table, "records": key (string, the primary key) and fields (bytes: the
// canonical JSON of the object, keys sorted). A PUT replaces the whole
// object. version is the database's record version (the sequence number of
// the write that last changed it).
//
// # How a request reaches the database
//
// The HTTP handlers run on ordinary goroutines, outside the runtime: they
// never call the database directly, because dbowner calls need a fiber. A
// handler does runtime.Call to the records actor; the actor's Receive starts
// a fiber for the request and returns, and that fiber makes the dbowner
// calls (parking on the owner shard when it is elsewhere) and answers the
// Reply. One fiber per request lets concurrent writes share a group commit.
// A write is answered only after dbowner has made it durable.
package records
