// Package adminapi is the wire contract of the worker's admin API: the JSON
// shapes, the paths and a client. The worker serves it on its ops port
// (internal/ops); the operator calls it to drive raft membership. It imports
// nothing of the runtime, so the operator side may import it.
//
// Every request carries "Authorization: Bearer <admin token>" when the worker
// has an admin token configured (admin.token_file); without one the worker
// serves the admin API open and logs a warning at start.
//
// The token file holds one or more tokens, one per line (blank lines and
// lines starting with # are ignored), and any of them is accepted. The
// worker reads the file again when it changes, so a token is rotated with no
// restart: write the new token beside the old one, wait until every worker
// accepts it (a 200 with the new token), use only the new one, then remove
// the old line.
//
// Member IDs travel as 16 lower-case hex digits (ID.String), never as JSON
// numbers: a 64-bit ID does not survive a float64.
//
//	GET    /admin/cluster                 -> Cluster (this member's view)
//	POST   /admin/members                 AddMember -> Member (learner)
//	POST   /admin/members/{id}/promote    -> Member (voter)
//	POST   /admin/members/{id}/demote     -> Member (learner)
//	DELETE /admin/members/{id}            -> 204
//	POST   /admin/leader                  TransferLeader -> Cluster
//
// Errors are {"error": "..."} with 400 (bad request), 401 (token), 404
// (unknown member), 409 (the change conflicts: already a member, would drop
// below quorum, a conf change in flight, the leader asked to demote itself), 503 (no quorum or no leader within
// the wait; the message names how many voters are reachable).
package adminapi
