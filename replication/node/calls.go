package node

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"

	"github.com/writeonce/wo/runtime"
)

// forever stands for "no deadline": a waiter made with a timeout <= 0 is
// never expired by the driver.
const forever = 100 * 365 * 24 * time.Hour

// submit is the one way a call reaches the driver: it registers w with its
// deadline and queues it. It refuses, without calling w.done, a call from
// another shard and one to a stopped member.
func (n *Node) submit(f *runtime.Fiber, w *waiter, timeout time.Duration) error {
	if f.Shard() != n.shard {
		return ErrWrongShard
	}
	if n.stopped {
		return n.stopErr()
	}
	w.timeout = timeout
	w.deadline = time.Now().Add(forever)
	if timeout > 0 {
		w.deadline = time.Now().Add(timeout)
	}
	n.waits.add(w)
	n.push(f, work{kind: workSubmit, id: w.id})
	return nil
}

// call submits w and parks f until the driver answers it or its timeout
// passes.
func (n *Node) call(f *runtime.Fiber, w *waiter, timeout time.Duration) (uint64, any, error) {
	type result struct {
		index uint64
		value any
		err   error
	}
	reply, fu := runtime.NewFuture[result](f)
	w.done = func(f *runtime.Fiber, index uint64, value any, err error) {
		reply.Send(f, result{index, value, err})
	}
	if err := n.submit(f, w, timeout); err != nil {
		return 0, nil, err
	}
	res, err := fu.Wait(f, timeout)
	if err != nil {
		n.waits.remove(w)
		if errors.Is(err, runtime.ErrTimeout) {
			return 0, nil, n.timeoutErr(w)
		}
		return 0, nil, err
	}
	return res.index, res.value, res.err
}

// timeoutErr is a waiter's answer at its deadline.
func (n *Node) timeoutErr(w *waiter) error {
	return fmt.Errorf("node: %s: no answer within %v (%s): %w", w.what, w.timeout, n.quorumHint(), runtime.ErrTimeout)
}

// ProposeFunc is ProposeValue without parking: it queues the proposal and
// returns at once; done is called later on the member's driver fiber (it
// must not park) with the outcome, or with an error wrapping
// runtime.ErrTimeout once timeout (> 0) passed. Call it on the member's
// shard; an actor that must not park (a request actor) proposes this way.
// A proposal raft drops for want of a leader, or during a leadership
// transfer, is stepped again when a leader is known, until timeout.
func (n *Node) ProposeFunc(f *runtime.Fiber, data []byte, timeout time.Duration, done func(f *runtime.Fiber, index uint64, value any, err error)) {
	if err := checkEntry(data); err != nil {
		done(f, 0, nil, err)
		return
	}
	w := &waiter{kind: waitEntry, what: "propose", data: data, done: done}
	if err := n.submit(f, w, timeout); err != nil {
		done(f, 0, nil, err)
	}
}

// ErrNoHeaderRoom refuses a proposal not built with NewEntry.
var ErrNoHeaderRoom = errors.New("node: a proposal must start with the header's room (build it with NewEntry)")

func checkEntry(data []byte) error {
	if len(data) < HeaderLen {
		return fmt.Errorf("%w: %d bytes, fewer than the %d of the room", ErrNoHeaderRoom, len(data), HeaderLen)
	}
	return nil
}

// ProposeValue replicates data and parks f until it is committed on a
// quorum and applied on this member; it returns the entry's index and what
// StateMachine.Apply returned for it on this member. data is a NewEntry
// buffer with the payload appended (Apply is given the payload), owned by
// the node from then on. A proposal made with no leader known waits for
// one, until timeout.
func (n *Node) ProposeValue(f *runtime.Fiber, data []byte, timeout time.Duration) (uint64, any, error) {
	if err := checkEntry(data); err != nil {
		return 0, nil, err
	}
	return n.call(f, &waiter{kind: waitEntry, what: "propose", data: data}, timeout)
}

// Propose is ProposeValue without the value.
func (n *Node) Propose(f *runtime.Fiber, data []byte, timeout time.Duration) (uint64, error) {
	idx, _, err := n.ProposeValue(f, data, timeout)
	return idx, err
}

// ReadIndex parks f until this member has applied everything committed
// when the call was made, confirmed by a quorum (raft's ReadIndex): a read
// of the state machine after it returns is linearizable. Reads queued
// together share one round.
func (n *Node) ReadIndex(f *runtime.Fiber, timeout time.Duration) (uint64, error) {
	if f.Shard() == n.shard && n.LocalReadOK() {
		return n.applied, nil
	}
	idx, _, err := n.call(f, &waiter{kind: waitRead, what: "read index"}, timeout)
	return idx, err
}

// WaitFor parks f until cond holds, asked now and after every Ready the
// driver handles, or until timeout (<= 0: none) passes; it fails when the
// member stops. cond runs on the member's shard and must not park. It is
// how a caller waits for the member's state (a leader, an applied index)
// without polling.
func (n *Node) WaitFor(f *runtime.Fiber, timeout time.Duration, cond func() bool) error {
	if f.Shard() == n.shard && cond() {
		return nil
	}
	_, _, err := n.call(f, &waiter{kind: waitCond, what: "wait", cond: cond, state: waitStepped}, timeout)
	return err
}

// AddLearner adds id (reachable at addr) as a non-voting member.
func (n *Node) AddLearner(f *runtime.Fiber, id uint64, addr string, timeout time.Duration) error {
	return n.confChange(f, raftpb.ConfChangeAddLearnerNode, id, addr, timeout)
}

// Promote makes learner id a voter.
func (n *Node) Promote(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	if f.Shard() != n.shard {
		return ErrWrongShard
	}
	return n.confChange(f, raftpb.ConfChangeAddNode, id, n.members[id], timeout)
}

// Demote makes voter id a learner: it keeps its data and its place in the
// group and goes on receiving entries, but no longer counts toward a
// quorum. Raft turns a voter into a learner in a simple conf change
// (ConfChangeAddLearnerNode on a voter). Demoting a learner returns nil
// at once, proposing nothing. Errors wrap ErrUnknownMember (id is not a
// member) or ErrConflict: id is the last voter, or id is the leader this
// member knows (a leader demoted steps down and the group goes without one
// for an election: transfer leadership away first). A follower forwards
// the change to the leader, as it does any proposal; between its check and
// the leader's append leadership may move to id, which then steps down
// (raft's StepDownOnRemoval) and the group elects another leader.
func (n *Node) Demote(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	if f.Shard() != n.shard {
		return ErrWrongShard
	}
	if slices.Contains(n.confState.GetLearners(), id) {
		return nil
	}
	if err := n.demotable(id); err != nil {
		return fmt.Errorf("node: demote %016x: %w", id, err)
	}
	return n.confChange(f, raftpb.ConfChangeAddLearnerNode, id, n.members[id], timeout)
}

// demotable is why voter id may not become a learner now, if it may not.
func (n *Node) demotable(id uint64) error {
	voters := n.confState.GetVoters()
	switch {
	case !slices.Contains(voters, id):
		return ErrUnknownMember
	case len(voters) == 1:
		return fmt.Errorf("%w: it is the last voter (a group needs one)", ErrConflict)
	case id == n.lead || id == n.cfg.ID && n.role == raft.StateLeader:
		return fmt.Errorf("%w: member %016x leads: transfer leadership away first", ErrConflict, id)
	}
	return nil
}

// Drain makes member id a learner marked draining: a placement
// (dbowner/placer.go) places no partition on it and moves its replicas
// off, before the member is removed. A learner already is marked by a
// conf change raft itself treats as no change (ConfChangeAddLearnerNode on
// a learner); the mark lives in the applied log and in snapshots, so every
// member sees it. A member marked already is answered nil at once; the
// errors are Demote's. Any later addition, promotion or demotion of id
// clears the mark (Undrain).
func (n *Node) Drain(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	if f.Shard() != n.shard {
		return ErrWrongShard
	}
	if n.draining[id] {
		return nil
	}
	if !slices.Contains(n.confState.GetLearners(), id) {
		if err := n.demotable(id); err != nil {
			return fmt.Errorf("node: drain %016x: %w", id, err)
		}
	}
	return n.confChangeDrain(f, raftpb.ConfChangeAddLearnerNode, id, n.members[id], true, timeout)
}

// Undrain clears id's draining mark (Drain), leaving it a learner: a pod
// wanted again after a scale-down began. An unmarked member is answered
// nil at once.
func (n *Node) Undrain(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	if f.Shard() != n.shard {
		return ErrWrongShard
	}
	voter := slices.Contains(n.confState.GetVoters(), id)
	if !voter && !slices.Contains(n.confState.GetLearners(), id) {
		return fmt.Errorf("node: undrain %016x: %w", id, ErrUnknownMember)
	}
	if !n.draining[id] {
		return nil
	}
	typ := raftpb.ConfChangeAddLearnerNode
	if voter {
		typ = raftpb.ConfChangeAddNode
	}
	return n.confChangeDrain(f, typ, id, n.members[id], false, timeout)
}

// Remove removes member id from the group.
func (n *Node) Remove(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	return n.confChange(f, raftpb.ConfChangeRemoveNode, id, "", timeout)
}

func (n *Node) confChange(f *runtime.Fiber, typ raftpb.ConfChangeType, id uint64, addr string, timeout time.Duration) error {
	return n.confChangeDrain(f, typ, id, addr, false, timeout)
}

// confChangeDrain proposes a change of one member, drain its draining mark
// (confContext.Drain).
func (n *Node) confChangeDrain(f *runtime.Fiber, typ raftpb.ConfChangeType, id uint64, addr string, drain bool, timeout time.Duration) error {
	if id == 0 {
		return errors.New("node: member ID 0 is not valid")
	}
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}}}
	what := typ.String()
	if drain {
		what = "drain"
	}
	_, _, err := n.call(f, &waiter{kind: waitEntry, what: what, cc: cc, data: []byte(addr), drain: drain}, timeout)
	return err
}

// TransferLeader asks the leader to hand leadership to id and parks f until
// this member sees id lead.
func (n *Node) TransferLeader(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	_, _, err := n.call(f, &waiter{kind: waitTransfer, what: "transfer leadership", to: id}, timeout)
	return err
}

func (n *Node) mustShard(f *runtime.Fiber) {
	if f.Shard() != n.shard {
		panic(ErrWrongShard)
	}
}

// Status returns the member's view of the group. It must be called on the
// member's shard (it panics with ErrWrongShard elsewhere: the fields it
// reads belong to the driver).
func (n *Node) Status(f *runtime.Fiber) Status {
	n.mustShard(f)
	st := Status{ID: n.cfg.ID, Leader: n.lead, Term: n.term, Commit: n.commit, Applied: n.applied, Removed: n.removed, Quiesced: n.quiesced}
	switch n.role {
	case raft.StateLeader:
		st.Role = RoleLeader
	case raft.StateCandidate, raft.StatePreCandidate:
		st.Role = RoleCandidate
	default:
		st.Role = RoleFollower
	}
	var prs map[uint64]tracker.Progress
	if n.role == raft.StateLeader {
		prs = n.rn.Status().Progress
	}
	for _, id := range n.confState.GetVoters() {
		m := Member{ID: id, Addr: n.members[id], Draining: n.draining[id]}
		if pr, ok := prs[id]; ok {
			m.Match, m.Reachable = pr.Match, pr.RecentActive || id == n.cfg.ID
		}
		st.Members = append(st.Members, m)
	}
	for _, id := range n.confState.GetLearners() {
		m := Member{ID: id, Addr: n.members[id], Learner: true, Draining: n.draining[id]}
		if pr, ok := prs[id]; ok {
			m.Match, m.Reachable = pr.Match, pr.RecentActive
		}
		st.Members = append(st.Members, m)
		if id == n.cfg.ID {
			st.Role = RoleLearner
		}
	}
	st.Reachable, st.Voters = n.Reachability()
	slices.SortFunc(st.Members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return st
}

// LocalReadOK reports whether this member may serve a linearizable read
// from its applied state without a ReadIndex round: it leads a group
// whose only voter it is. No other member can lead (any new voter needs a
// conf change in this member's log, and then a quorum of two), and every
// write it answered was applied first. Call it on the member's shard.
func (n *Node) LocalReadOK() bool {
	// A new leader knows what is committed only once an entry of its own
	// term is (raft's rule for read index, too): until it applied one, an
	// entry committed before may still be unapplied.
	return !n.stopped && n.role == raft.StateLeader && n.SoleVoter() && n.appliedTerm == n.term
}

// Leader is the leader this member knows (0: none). Call it on the
// member's shard.
func (n *Node) Leader() uint64 { return n.lead }

// Reachability is how many voters this member heard from within an
// election timeout (itself included), and how many voters there are.
// Call it on the member's shard.
func (n *Node) Reachability() (reachable, voters int) {
	for _, id := range n.confState.GetVoters() {
		voters++
		if at, ok := n.heard[id]; id == n.cfg.ID || (ok && n.ticks-at <= uint64(n.cfg.ElectionTicks)) {
			reachable++
		}
	}
	return reachable, voters
}

// SoleVoter reports whether this member is its group's only voter. Call
// it on the member's shard.
func (n *Node) SoleVoter() bool {
	v := n.confState.GetVoters()
	return len(v) == 1 && v[0] == n.cfg.ID
}

// Applied is the index of the last entry applied on this member. Call it
// on the member's shard.
func (n *Node) Applied() uint64 { return n.applied }

// quorumHint names the leader and reachability for a timeout message.
func (n *Node) quorumHint() string {
	reach, voters := 1, 0
	if n.confState != nil {
		reach, voters = n.Reachability()
	}
	lead := "no leader known"
	if n.lead != raft.None {
		lead = fmt.Sprintf("leader %x", n.lead)
	}
	return fmt.Sprintf("%s; %d of %d voters reachable", lead, reach, voters)
}

func (n *Node) stopErr() error {
	if n.removed {
		return ErrRemoved
	}
	if n.err != nil {
		return fmt.Errorf("%w: %w", ErrStopped, n.err)
	}
	return ErrStopped
}
