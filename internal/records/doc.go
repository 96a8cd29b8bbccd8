// Package records is the worker's records API on the data-plane port (8080):
// string-keyed records of string fields, stored in the embedded database.
// docs/api.md is the reference (routes, statuses, limits, the cursor).
//
//	PUT    /v1/records/{key}   body: a JSON object of string fields
//	                           200 {"key","fields","version"} (created or replaced)
//	GET    /v1/records/{key}   200 {"key","fields","version"}; 404 when missing
//	DELETE /v1/records/{key}   204; 404 when missing
//	GET    /v1/records?prefix=&limit=&after=
//	                           200 {"records":[...],"next":"<cursor>"}, key order;
//	                           pass next as after= for the following page
//
// Errors use the data port's shape, {"error": "..."}: 400 for bad JSON
// (naming what was wrong), invalid UTF-8, a bad key (too long, not UTF-8, a
// control character), limit, cursor, consistency= or Idempotency-Key; 404
// for a missing record or an unknown route; 405 with Allow; 413 for a body
// over the limit; 503 while the worker stops, when no quorum answered within
// cluster.request_timeout (with Retry-After: 1, naming the voters
// reachable), and while this member joins, after it was removed or stopped.
//
// # Replicated semantics
//
// GET and list are linearizable (dbowner's plain Get and Query: a ReadIndex
// round shared by concurrent reads); consistency=stale reads this member's
// applied state (dbowner.DB.Stale). A PUT or DELETE with an Idempotency-Key
// header writes through dbowner.DB.WithRequestID: a retry of the same request
// (method, record key and body, digested into the request ID with the key)
// is applied at most once and answered like the first. See docs/api.md and
// docs/replication.md.
//
// # Storage
//
// One table, "records": key (string, the primary key) and fields (bytes: the
// canonical JSON of the object, keys sorted). A PUT is one engine operation
// (dbowner.DB.Upsert) that replaces the whole object. version is the
// database's record version: the sequence number of the write that last
// changed the record, strictly increasing across writes.
//
// # How a request reaches the database
//
// The handlers run on the connection's fiber (internal/httpd) and call
// dbowner from there: inline on the owner shard, by one message to it from
// any other shard. A write is answered only after dbowner has made it
// durable; concurrent writes share group commits because each connection
// is its own fiber.
package records
