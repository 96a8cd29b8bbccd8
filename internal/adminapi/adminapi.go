package adminapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Paths of the admin API on the ops port.
const (
	PathCluster = "/admin/cluster"
	PathMembers = "/admin/members"
	PathLeader  = "/admin/leader"
	PathBackup  = "/admin/backup"
)

// ID is a raft member ID: the ordinal in the high 16 bits, the incarnation in
// the low 48 (replication/identity).
type ID uint64

// String is the wire form: 16 lower-case hex digits.
func (id ID) String() string { return fmt.Sprintf("%016x", uint64(id)) }

// Ordinal is the StatefulSet ordinal the ID carries.
func (id ID) Ordinal() int { return int(uint64(id) >> 48) }

// ParseID parses the wire form (1 to 16 hex digits).
func ParseID(s string) (ID, error) {
	if s == "" || len(s) > 16 {
		return 0, fmt.Errorf("member id %q: want 1 to 16 hex digits", s)
	}
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("member id %q: want a non-zero hex number", s)
	}
	return ID(v), nil
}

func (id ID) MarshalText() ([]byte, error) { return []byte(id.String()), nil }

// UnmarshalText reads the wire form. Unlike ParseID it accepts zero
// (all zero digits, as String writes it): Cluster.Leader is 0 when no leader
// is known, TransferLeader.To 0 asks for any voter.
func (id *ID) UnmarshalText(b []byte) error {
	if len(b) > 0 && len(b) <= 16 && strings.Trim(string(b), "0") == "" {
		*id = 0
		return nil
	}
	v, err := ParseID(string(b))
	if err != nil {
		return err
	}
	*id = v
	return nil
}

// Role of a member in the group.
const (
	RoleVoter   = "voter"
	RoleLearner = "learner"
)

// State of the member answering (Cluster.State).
const (
	StateJoining = "joining" // started with cluster.state=existing, not yet added
	StateMember  = "member"
	StateRemoved = "removed" // removed from the group, or refused by its peers as a wiped volume under its old ID
	StateStopped = "stopped" // the member stopped on an error (Cluster.Error says which)
)

// Member is one member of the group as the answering member knows it.
type Member struct {
	ID      ID     `json:"id"`
	Ordinal int    `json:"ordinal"`
	Addr    string `json:"addr"` // its peer address
	Role    string `json:"role"` // RoleVoter or RoleLearner
	// Match is the last log index the leader knows the member has (only in
	// the leader's view; 0 elsewhere).
	Match uint64 `json:"match,omitempty"`
	// Reachable: heard from within an election timeout (the leader's view;
	// the answering member itself is always reachable).
	Reachable bool `json:"reachable"`
	// Draining: marked draining (POST .../drain): with a replication
	// factor no partition is placed on it and its replicas move off; it is
	// removed once it holds partition 0 alone.
	Draining bool `json:"draining,omitempty"`
}

// Cluster is GET /admin/cluster: the answering member's view of the group.
type Cluster struct {
	Self      ID       `json:"self"`
	State     string   `json:"state"`  // StateJoining, StateMember, ...
	Role      string   `json:"role"`   // leader, follower, candidate, learner ("" while joining)
	Leader    ID       `json:"leader"` // 0 when none is known
	Term      uint64   `json:"term"`
	Commit    uint64   `json:"commit"`
	Applied   uint64   `json:"applied"`
	Members   []Member `json:"members"`         // by ID
	Voters    int      `json:"voters"`          // voters in the configuration
	Reachable int      `json:"reachable"`       // voters reachable, self included
	Error     string   `json:"error,omitempty"` // why the member stopped
	// PeerTLS is what the peer port's TLS uses at the moment of the answer
	// (the files are looked at again first, as a handshake would); nil when
	// peer TLS is off.
	PeerTLS *PeerTLS `json:"peer_tls,omitempty"`
	// Partitions is each partition's raft group as this member sees it
	// (partition p at index p), present when the database has more than
	// one (data.partitions); the fields above are then partition 0's,
	// and Members is every partition's membership (a change is made in
	// all of them).
	Partitions []PartitionStatus `json:"partitions,omitempty"`
}

// PartitionStatus is one partition's group as a member sees it.
type PartitionStatus struct {
	Role    string `json:"role"`
	Leader  ID     `json:"leader"`
	Term    uint64 `json:"term"`
	Commit  uint64 `json:"commit"`
	Applied uint64 `json:"applied"`
	// Quiesced: the partition's group is idle and this member is not
	// ticking it (docs/replication.md, "An idle group goes quiet").
	Quiesced bool `json:"quiesced,omitempty"`
}

// LeadersByMember counts the partitions each member leads, as c says
// (partitions without a known leader are left out).
func (c Cluster) LeadersByMember() map[ID]int {
	out := map[ID]int{}
	for _, p := range c.Partitions {
		if p.Leader != 0 {
			out[p.Leader]++
		}
	}
	return out
}

// PeerTLS is the peer port's certificate material as loaded: what an
// operator rotating certificates waits on before its next phase (every pod
// trusts the new CA before any leaf is issued by it; every pod presents a
// leaf of the new CA before the old CA is dropped).
type PeerTLS struct {
	// Cert is the Fingerprint of the member's own leaf certificate.
	Cert string `json:"cert"`
	// CertNotAfter is the leaf's expiry, RFC 3339.
	CertNotAfter string `json:"cert_not_after"`
	// CAs are the Fingerprints of every CA certificate in the trust bundle
	// (the CA file may hold several: old and new during a rotation), in
	// file order.
	CAs []string `json:"cas"`
}

// Fingerprint is how certificates are named on the wire: the SHA-256 of
// the DER bytes, 64 lower-case hex digits.
func Fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// LeaderMember returns the leader's entry, if it is known and listed.
func (c Cluster) LeaderMember() (Member, bool) {
	for _, m := range c.Members {
		if c.Leader != 0 && m.ID == c.Leader {
			return m, true
		}
	}
	return Member{}, false
}

// CatchUpEntries is how far (in log entries) a learner's match index may
// trail its leader's commit index and still be promoted, or be handed a
// leadership, by a caller that waits for it to catch up: the operator's
// rule for a pod and the database's own placement's for a partition's
// replica, one bound for both. A learner promoted while far behind would
// be a voter that cannot acknowledge new entries until it caught up,
// which shrinks the group's failure tolerance for that time; a bounded
// lag keeps that window short under a steady write load, where an exact
// match is almost never observed (a learner is a round trip behind). The
// worker itself refuses a promotion beyond a looser bound (1,000 entries,
// replication/node.PromoteLag).
const CatchUpEntries = 128

// AddMember is the body of POST /admin/members: add ID, reachable at Addr
// (its peer address), as a learner. The joining member's ID is read from its
// own GET /admin/cluster (Self) while it waits in StateJoining.
type AddMember struct {
	ID   ID     `json:"id"`
	Addr string `json:"addr"`
}

// TransferLeader is the body of POST /admin/leader. To 0 asks the leader to
// pick the most caught-up voter other than itself.
type TransferLeader struct {
	To ID `json:"to"`
}

// Error is every error body.
type Error struct {
	Error string `json:"error"`
}

// StatusError is an error answer from the admin API.
type StatusError struct {
	Code    int
	Message string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("admin API: %d %s: %s", e.Code, http.StatusText(e.Code), e.Message)
}

// Client calls one worker's admin API. Base is "http://host:port" of the
// ops port; HTTP defaults to http.DefaultClient.
type Client struct {
	Base  string
	Token string
	HTTP  *http.Client
}

// Cluster is GET /admin/cluster.
func (c *Client) Cluster(ctx context.Context) (Cluster, error) {
	var out Cluster
	return out, c.do(ctx, http.MethodGet, PathCluster, nil, &out)
}

// AddLearner is POST /admin/members.
func (c *Client) AddLearner(ctx context.Context, id ID, addr string) (Member, error) {
	var out Member
	return out, c.do(ctx, http.MethodPost, PathMembers, AddMember{ID: id, Addr: addr}, &out)
}

// Promote is POST /admin/members/{id}/promote.
func (c *Client) Promote(ctx context.Context, id ID) (Member, error) {
	return c.onMember(ctx, http.MethodPost, id, "promote")
}

// Demote is POST /admin/members/{id}/demote: voter id becomes a learner
// (it keeps its data and its place in the group, and no longer counts
// toward the quorum). Demoting a learner answers it as it is. The leader
// refuses to demote itself (409): transfer leadership away first.
func (c *Client) Demote(ctx context.Context, id ID) (Member, error) {
	return c.onMember(ctx, http.MethodPost, id, "demote")
}

// Drain is POST /admin/members/{id}/drain: member id becomes a learner
// marked draining. With a replication factor the workers place no
// partition on it and move its replicas off (docs/replication.md); its
// removal then costs no partition a replica. The errors are Demote's.
func (c *Client) Drain(ctx context.Context, id ID) (Member, error) {
	return c.onMember(ctx, http.MethodPost, id, "drain")
}

// Undrain is DELETE /admin/members/{id}/drain: the draining mark
// cleared (the member stays a learner), for a pod wanted again.
func (c *Client) Undrain(ctx context.Context, id ID) (Member, error) {
	return c.onMember(ctx, http.MethodDelete, id, "drain")
}

// Remove is DELETE /admin/members/{id}.
func (c *Client) Remove(ctx context.Context, id ID) error {
	return c.do(ctx, http.MethodDelete, PathMembers+"/"+id.String(), nil, nil)
}

// TransferLeader is POST /admin/leader.
func (c *Client) TransferLeader(ctx context.Context, to ID) (Cluster, error) {
	var out Cluster
	return out, c.do(ctx, http.MethodPost, PathLeader, TransferLeader{To: to}, &out)
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("admin API %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	resp, err := c.send(ctx, method, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("admin API %s %s: reading the answer: %w", method, c.Base+path, err)
	}
	if resp.StatusCode/100 != 2 {
		return statusError(resp.StatusCode, b)
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("admin API %s %s: bad answer: %w", method, c.Base+path, err)
	}
	return nil
}

// send makes the request (a JSON body when body is not nil) with the token.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, strings.TrimRight(c.Base, "/")+path, body)
	if err != nil {
		return nil, fmt.Errorf("admin API %s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("admin API %s %s: %w", method, c.Base+path, err)
	}
	return resp, nil
}

// statusError is the error of a non-2xx answer with body b.
func statusError(code int, b []byte) error {
	var e Error
	if json.Unmarshal(b, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(b))
	}
	return &StatusError{Code: code, Message: e.Error}
}

// Backup is GET /admin/backup: it streams the member's backup file to w
// and returns its length. stale takes the member's applied state without a
// ReadIndex round (a member that lost its quorum). A body shorter than its
// Content-Length is an error: w then holds a truncated file, which a
// restore refuses anyway.
func (c *Client) Backup(ctx context.Context, w io.Writer, stale bool) (int64, error) {
	path := PathBackup
	if stale {
		path += "?stale=true"
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return 0, statusError(resp.StatusCode, b)
	}
	n, err := io.Copy(w, resp.Body)
	if err != nil {
		return n, fmt.Errorf("admin API GET %s: after %d bytes: %w", c.Base+path, n, err)
	}
	if resp.ContentLength >= 0 && n != resp.ContentLength {
		return n, fmt.Errorf("admin API GET %s: %d bytes of %d", c.Base+path, n, resp.ContentLength)
	}
	return n, nil
}

// onMember is a change of member id: method on PathMembers/id/action,
// answered with the member as it is after it.
func (c *Client) onMember(ctx context.Context, method string, id ID, action string) (Member, error) {
	var out Member
	return out, c.do(ctx, method, PathMembers+"/"+id.String()+"/"+action, nil, &out)
}
