// Package admin serves the worker's admin API on the ops port: the raft
// group's membership and leadership, as internal/adminapi specifies it (the
// paths, the JSON shapes, the error codes; the operator's client is
// adminapi.Client).
//
//	GET    /admin/cluster                 -> adminapi.Cluster (peer_tls from SetPeerTLS)
//	POST   /admin/members                 adminapi.AddMember -> adminapi.Member (learner)
//	POST   /admin/members/{id}/promote    -> adminapi.Member (voter)
//	POST   /admin/members/{id}/demote     -> adminapi.Member (learner)
//	POST   /admin/members/{id}/drain      -> adminapi.Member (learner, draining)
//	DELETE /admin/members/{id}/drain      -> adminapi.Member (draining cleared)
//	DELETE /admin/members/{id}            -> 204
//	POST   /admin/leader                  adminapi.TransferLeader -> adminapi.Cluster
//
// # Authentication
//
// With tokens (admin.token_file: one or more, one a line, re-read when the
// file changes; package tokenfile) every /admin request needs
// "Authorization: Bearer <token>" with one of them, compared in constant
// time (httpd.BearerOK); a missing or wrong one is 401. Without a token the API
// is open and New logs the warning "admin API is not authenticated": fine
// for a single worker on a laptop, never for a cluster.
//
// # How a request reaches the database
//
// The ops port is an ordinary net/http server: its handlers are goroutines
// and may not touch shard state. Attach spawns a bridge actor on a shard;
// each admin request posts one value message to it (runtime.Call) and blocks
// its goroutine for the answer. The actor starts a fiber per request, which
// makes the database call (DB: *dbowner.DB's membership methods) and sends
// the answer back, so a slow conf change never holds up a GET of the
// cluster. Each request waits at most Options.Timeout (cluster.request_timeout)
// and is then answered 503: the database bounds its own calls by the same
// setting and names the voters it reaches, which is the message a client
// normally sees; the bridge's deadline is the backstop for a call the
// database did not bound.
//
// # Errors
//
// Every error is {"error":"..."} (adminapi.Error), the routes' own 404 and
// 405 included: 400 a bad body (not JSON, an unknown field, data after the
// object, a missing or bad member ID or address) or a bad ID in the path,
// naming what was wrong; 401 the token; 404 an unknown member
// (node.ErrUnknownMember); 409 a conflicting change (node.ErrConflict:
// already a member, a conf change in flight, a learner not caught up, the
// leader or the last voter asked to be demoted); 503
// no quorum or no leader within the wait, this member joining, removed or
// stopped, or the database not open yet.
//
// # Backup
//
// GET /admin/backup[?stale=true] streams the member's backup file
// (dbowner.Backup: a ReadIndex point unless stale; docs/operations.md),
// with its Content-Length: a client cut short knows it. It waits up to ten
// minutes (a large state takes far longer to serialize than a conf change
// to commit); a database without backups (a test's fake) answers 501.
package admin
