package node

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"
	"go.etcd.io/raft/v3/tracker"
	"google.golang.org/protobuf/proto"

	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// StateMachine is what the committed log is applied to: the database engine
// in the worker, a map in tests. Every call comes from the driver fiber, in
// log order.
type StateMachine interface {
	// Apply applies one committed command (a proposal's data) at index.
	// Its result goes to the proposing caller on this member
	// (ProposeValue); an error stops the member (the state is no longer
	// known to follow the log), so a command that fails deterministically
	// (a precondition) must return its failure as the result instead.
	Apply(f *runtime.Fiber, index uint64, data []byte) (any, error)
	// Snapshot captures the applied state as it is now, for a raft
	// snapshot at the applied index, and returns the function that
	// serializes that captured state. The driver waits for Snapshot but not
	// for the SnapshotWriter: capture cheaply (a copy-on-write freeze, not a
	// copy of the data), because the driver applies nothing meanwhile.
	Snapshot(f *runtime.Fiber) (SnapshotWriter, error)
	// Restore replaces the state with a snapshot's.
	Restore(f *runtime.Fiber, data []byte) error
}

// SnapshotWriter serializes the state a StateMachine.Snapshot captured: it
// appends its bytes to dst and returns the result. It runs in a fiber of
// its own on the driver's shard while the driver goes on applying entries,
// so it must read only the captured state (later Applies must not show in
// it) and should yield now and then (runtime.Yield, runtime.Checkpoint): a
// large state serialized in one slice would stall the shard.
type SnapshotWriter func(f *runtime.Fiber, dst []byte) ([]byte, error)

// Config configures a member. ID, Storage, StateMachine and Net are
// required.
type Config struct {
	ID           uint64
	Storage      Storage
	StateMachine StateMachine
	Net          transport.Net
	Logger       *slog.Logger

	// Bootstrap is the initial membership (id -> peer address), used only
	// when Storage is empty: every member of a new group starts with the
	// same map. Empty: this member joins an existing group and waits to be
	// added (see Joining).
	Bootstrap map[uint64]string
	// Peers are addresses to reach before the log says who the members
	// are (a joining member's way to answer the leader).
	Peers map[uint64]string

	Tick            time.Duration // one raft tick; default 100ms
	ElectionTicks   int           // default 10
	HeartbeatTicks  int           // default 1
	MaxSizePerMsg   uint64        // default 1 MiB
	MaxInflightMsgs int           // default 256
	// SnapshotEntries takes a snapshot (and compacts the log) every this
	// many applied entries; 0 never does.
	SnapshotEntries uint64
	// SnapshotKeep is how many entries before a snapshot stay in the log,
	// so a slightly slow follower catches up from the log; default 1000.
	SnapshotKeep uint64
	// SnapshotDue, when set, is asked after each Ready whether a snapshot
	// is due anyway (the database: enough log bytes since the last one).
	SnapshotDue func() bool
	// OnSave, when set, is called after every Save that persisted entries,
	// with how many and how long the save took (metrics, tracing; it must
	// not park).
	OnSave func(entries int, took time.Duration)
}

// Errors returned to callers.
var (
	ErrStopped    = errors.New("node: member stopped")
	ErrNoLeader   = errors.New("node: no leader (election in progress or no quorum reachable)")
	ErrWrongShard = errors.New("node: called from another shard than the member's")
	ErrRemoved    = errors.New("node: this member was removed from the group")
	// ErrNothingSaved is wrapped by a Storage.Save error that persisted
	// nothing of the Ready (no space, a failed write rolled back): the
	// member then drops raft's unsaved state and restarts raft from its
	// storage, as after a crash but in place, failing the proposals of that
	// Ready; it does not stop. Any other Save error stops the member, and
	// so does any error of a Save that carried a snapshot (a storage may
	// have made the snapshot durable before the rest failed).
	ErrNothingSaved = errors.New("node: nothing of the Ready was saved")
	// ErrUnknownMember: a membership call names an ID that is not a
	// member (the admin API answers 404).
	ErrUnknownMember = errors.New("node: no such member")
	// ErrConflict: a membership call that contradicts the membership or
	// one in flight — already a member, a conf change not yet applied,
	// promoting a learner that is not caught up (the admin API: 409).
	ErrConflict = errors.New("node: membership conflict")
	// ErrOutcomeUnknown: the leader's save of a proposal failed after the
	// entries had gone to the followers (a leader sends before it saves),
	// so a new leader may still commit them: the caller must not report
	// the write as not made. Retrying with the same request ID is safe.
	ErrOutcomeUnknown = errors.New("node: the save failed after the entries went to the followers; the write may still commit")
)

// PromoteLag is how far (in entries) a learner's Match may be behind the
// leader's commit index for a promotion to be allowed: a voter far behind
// would count toward quorums it cannot serve.
const PromoteLag = 1000

// Role is a member's part in the group.
type Role string

// Roles, as Status reports them.
const (
	RoleLeader    Role = "leader"
	RoleCandidate Role = "candidate"
	RoleFollower  Role = "follower"
	RoleLearner   Role = "learner"
)

// Member is one entry of the membership.
type Member struct {
	ID      uint64 `json:"id"`
	Addr    string `json:"addr"`
	Learner bool   `json:"learner,omitempty"`
	// Match and Reachable are the leader's view (raft's Progress.Match and
	// RecentActive): the highest index known replicated on the member, and
	// whether it was heard from within the last election timeout. Only a
	// leader's Status fills them (zero elsewhere); the leader itself always
	// reports Reachable and its last index.
	Match     uint64 `json:"match,omitempty"`
	Reachable bool   `json:"reachable,omitempty"`
}

// Status is a member's view of the group.
type Status struct {
	ID      uint64
	Role    Role
	Leader  uint64
	Term    uint64
	Commit  uint64
	Applied uint64
	Members []Member // voters and learners, by ID
	Removed bool
	// Reachable counts the voters this member heard from within an
	// election timeout, itself included: what a "no quorum" answer names.
	Reachable int
	Voters    int
}

// Node is one raft member: a raft.RawNode owned by one driver fiber on one
// shard, ticked by a ticker fiber on the shard's timer heap. Other fibers of
// the shard call its methods, which queue work and park the caller until
// the driver answers; the transport feeds it messages the same way. Only the
// driver touches the RawNode.
type Node struct {
	cfg   Config
	shard int
	log   *slog.Logger
	rn    *raft.RawNode
	sm    StateMachine
	inbox runtime.Addr[transport.Envelope]

	work    []work // queued by callers, drained by the driver
	wake    runtime.Reply[struct{}]
	parked  bool
	tickDue bool
	stopped bool
	err     error // why the driver stopped

	seq      uint64
	props    map[uint64]*waiter // proposal and conf-change seq -> waiter
	reads    []*waiter          // not yet sent to raft
	batches  map[uint64][]*waiter
	ready    []readyRead // read index known, waiting for apply
	transfer []*transferWait

	applied    uint64
	snapIndex  uint64
	confState  *raftpb.ConfState
	members    map[uint64]string // id -> address, from the applied log
	lead       uint64
	role       raft.StateType
	removed    bool
	readRounds uint64            // ReadIndex calls made (each serves a batch of reads)
	ticks      uint64            // ticks so far
	heard      map[uint64]uint64 // member -> tick of its last message
	// snapNeeded asks for a snapshot after this Ready (a member was added).
	snapNeeded bool
	// snapping: a snapshot was captured and its writer fiber has not
	// finished; built is what it finished with, for the driver to save.
	snapping bool
	built    *builtSnap
	snapDone *runtime.Reply[struct{}] // a stopping driver waits for the writer
	term     uint64
	commit   uint64

	// Group commit (see gather): proposals queued and not yet stepped,
	// proposals settled by the last Ready, and how long the last Save of
	// entries took.
	queuedProps int
	settled     int
	concurrency int
	lastSave    time.Duration
	gathering   bool
	gatherWant  int
	gatherWake  runtime.Reply[struct{}]
	turnProps   []uint64 // seqs of proposals stepped since the last Save
	propBuf     []work

	appliedTerm uint64 // term of the last applied entry
	quietUntil  uint64 // no campaignAlone before this tick

	exited  bool                      // the driver returned
	exitWtr []runtime.Reply[struct{}] // StopWait callers

	joined atomic.Bool // this member is in the membership (voter or learner)
	gone   atomic.Bool // removed, readable from any goroutine
	down   atomic.Bool // the driver stopped (Stop, removal or failure)
}

type workKind uint8

const (
	workStep workKind = iota + 1
	workPropose
	workRead
	workConfChange
	workTransfer
	workUnreachable
	workSnapStatus
	workRemoved
	workSnapBuilt // a snapshot's writer finished (n.built): wakes the driver
)

type work struct {
	kind   workKind
	msg    *raftpb.Message
	data   []byte
	cc     *raftpb.ConfChangeV2
	id     uint64
	status raft.SnapshotStatus
	w      *waiter
}

type result struct {
	index uint64
	value any
	err   error
}

type waiter struct {
	seq      uint64
	reply    runtime.Reply[result]
	deadline time.Time
	// done, when set (ProposeFunc), is called instead of reply, on the
	// driver's fiber.
	done func(f *runtime.Fiber, index uint64, value any, err error)
}

type readyRead struct {
	index   uint64
	waiters []*waiter
}

type transferWait struct {
	to uint64
	w  *waiter
}

// confContext travels in every conf change this package proposes.
type confContext struct {
	Addr     string `json:"addr,omitempty"`
	Proposer uint64 `json:"proposer,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
}

// Start creates the member on f's shard and starts its driver and ticker
// fibers. A storage with state restarts the member from it; an empty one
// bootstraps cfg.Bootstrap, or waits to be added when that is empty.
func Start(f *runtime.Fiber, cfg Config) (*Node, error) {
	if cfg.ID == 0 || cfg.Storage == nil || cfg.StateMachine == nil || cfg.Net == nil {
		return nil, errors.New("node: Config needs ID, Storage, StateMachine and Net")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 100 * time.Millisecond
	}
	if cfg.ElectionTicks <= 0 {
		cfg.ElectionTicks = 10
	}
	if cfg.HeartbeatTicks <= 0 {
		cfg.HeartbeatTicks = 1
	}
	if cfg.MaxSizePerMsg == 0 {
		cfg.MaxSizePerMsg = 1 << 20
	}
	if cfg.MaxInflightMsgs <= 0 {
		cfg.MaxInflightMsgs = 256
	}
	if cfg.SnapshotKeep == 0 {
		cfg.SnapshotKeep = 1000
	}
	n := &Node{
		cfg: cfg, shard: f.Shard(), log: cfg.Logger.With("member", fmt.Sprintf("%x", cfg.ID)), sm: cfg.StateMachine,
		props: map[uint64]*waiter{}, heard: map[uint64]uint64{}, batches: map[uint64][]*waiter{}, members: map[uint64]string{},
	}
	hs, cs, err := cfg.Storage.InitialState()
	if err != nil {
		return nil, fmt.Errorf("node: initial state: %w", err)
	}
	n.confState = cs
	snap, err := cfg.Storage.Snapshot()
	if err != nil {
		return nil, fmt.Errorf("node: snapshot: %w", err)
	}
	if !raft.IsEmptySnap(snap) {
		if err := n.restore(f, snap); err != nil {
			return nil, err
		}
	}
	last, err := cfg.Storage.LastIndex()
	if err != nil {
		return nil, fmt.Errorf("node: last index: %w", err)
	}
	fresh := last == 0 && raft.IsEmptyHardState(hs)
	rn, err := n.newRawNode()
	if err != nil {
		return nil, err
	}
	n.rn = rn
	for id, addr := range cfg.Peers {
		cfg.Net.AddPeer(f, id, addr)
	}
	if fresh && len(cfg.Bootstrap) > 0 {
		var peers []raft.Peer
		for _, id := range slices.Sorted(maps.Keys(cfg.Bootstrap)) {
			ctx, _ := json.Marshal(confContext{Addr: cfg.Bootstrap[id]})
			peers = append(peers, raft.Peer{ID: id, Context: ctx})
			if id != cfg.ID {
				cfg.Net.AddPeer(f, id, cfg.Bootstrap[id])
			}
			n.members[id] = cfg.Bootstrap[id]
		}
		if err := rn.Bootstrap(peers); err != nil {
			return nil, fmt.Errorf("node: bootstrap: %w", err)
		}
		n.confState = &raftpb.ConfState{Voters: slices.Sorted(maps.Keys(cfg.Bootstrap))}
		n.log.Info("node: bootstrapping a new group", "members", len(peers))
	} else if fresh {
		n.log.Info("node: empty log and no bootstrap membership: waiting to be added to a group")
	}
	n.noteMembership()
	n.term, n.commit = hs.GetTerm(), hs.GetCommit()
	n.inbox = runtime.SpawnOn(f, n.shard, &inboxActor{n: n})
	runtime.Go(f, n.drive)
	runtime.Go(f, n.ticker)
	return n, nil
}

// newRawNode makes the RawNode from the storage, at the applied index.
func (n *Node) newRawNode() (*raft.RawNode, error) { return n.newRawNodeOn(n.cfg.Storage) }

// appliedConf is the storage with the membership as applied, for a
// RawNode made at the applied index.
type appliedConf struct {
	Storage
	cs *raftpb.ConfState
}

func (a appliedConf) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	hs, _, err := a.Storage.InitialState()
	return hs, a.cs, err
}

func (n *Node) newRawNodeOn(st raft.Storage) (*raft.RawNode, error) {
	cfg := n.cfg
	rn, err := raft.NewRawNode(&raft.Config{
		ID:                        cfg.ID,
		ElectionTick:              cfg.ElectionTicks,
		HeartbeatTick:             cfg.HeartbeatTicks,
		Storage:                   st,
		Applied:                   n.applied,
		MaxSizePerMsg:             cfg.MaxSizePerMsg,
		MaxInflightMsgs:           cfg.MaxInflightMsgs,
		MaxUncommittedEntriesSize: 64 << 20,
		CheckQuorum:               true,
		PreVote:                   true,
		ReadOnlyOption:            raft.ReadOnlySafe,
		StepDownOnRemoval:         true,
		Logger:                    raftLogger{n.log},
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return rn, nil
}

// campaignAlone makes a follower that is the group's only voter campaign
// at once (it wins with its own vote): no peer could win instead, and
// waiting an election timeout would only delay every start of a single
// worker. Raft refuses a campaign while committed conf changes are not
// applied, so it waits for those.
func (n *Node) campaignAlone() {
	if n.role != raft.StateFollower || n.ticks < n.quietUntil {
		return
	}
	if st := n.rn.BasicStatus(); st.Applied < st.GetCommit() {
		return
	}
	if v := n.confState.GetVoters(); len(v) == 1 && v[0] == n.cfg.ID {
		_ = n.rn.Campaign()
	}
}

// noteMembership publishes whether this member is in the group.
func (n *Node) noteMembership() {
	in := slices.Contains(n.confState.GetVoters(), n.cfg.ID) || slices.Contains(n.confState.GetLearners(), n.cfg.ID)
	n.joined.Store(in)
	n.gone.Store(n.removed)
}

// Joined reports whether this member is in the group's membership (as a
// voter or a learner) as far as it has applied. A member that started
// without a bootstrap membership reports false until it is added. Safe
// from any goroutine.
func (n *Node) Joined() bool { return n.joined.Load() }

// Removed reports whether this member was removed from the group. Safe
// from any goroutine.
func (n *Node) Removed() bool { return n.gone.Load() }

// Stopped reports whether the member's driver has stopped (Stop, its
// removal, or a failure; Err says which). Safe from any goroutine.
func (n *Node) Stopped() bool { return n.down.Load() }

// Inbox is the member's actor address for transport.Memory: batches sent
// to it from any shard are stepped into raft.
func (n *Node) Inbox() runtime.Addr[transport.Envelope] { return n.inbox }

// ID is the member's raft ID.
func (n *Node) ID() uint64 { return n.cfg.ID }

type inboxActor struct{ n *Node }

func (a *inboxActor) Receive(f *runtime.Fiber, env transport.Envelope) {
	msgs, err := env.Messages()
	if err != nil {
		a.n.log.Warn("node: bad envelope dropped", "err", err)
		return
	}
	for _, m := range msgs {
		a.n.Process(f, m)
	}
}

// Process implements transport.Handler.
func (n *Node) Process(f *runtime.Fiber, m *raftpb.Message) {
	n.push(f, work{kind: workStep, msg: m})
}

// ReportUnreachable implements transport.Handler.
func (n *Node) ReportUnreachable(f *runtime.Fiber, id uint64) {
	n.push(f, work{kind: workUnreachable, id: id})
}

// ReportSnapshot implements transport.Handler.
func (n *Node) ReportSnapshot(f *runtime.Fiber, id uint64, status raft.SnapshotStatus) {
	n.push(f, work{kind: workSnapStatus, id: id, status: status})
}

// ReportRemoved implements transport.Handler: a peer refused this member
// as removed. Raft never tells a removed member so itself (the leader stops
// sending to it), so the transport's word is what stops it.
func (n *Node) ReportRemoved(f *runtime.Fiber, by uint64) {
	n.push(f, work{kind: workRemoved, id: by})
}

func (n *Node) push(f *runtime.Fiber, w work) {
	if n.stopped {
		return
	}
	n.work = append(n.work, w)
	if w.kind == workPropose {
		n.queuedProps++
		if n.gathering && n.queuedProps >= n.gatherWant {
			n.gathering = false
			n.gatherWake.Send(f, struct{}{})
		}
	}
	n.kick(f)
}

func (n *Node) kick(f *runtime.Fiber) {
	if n.parked {
		n.parked = false
		n.wake.Send(f, struct{}{})
	}
}

// call queues w with a fresh waiter and parks f until the driver answers
// or timeout passes.
func (n *Node) call(f *runtime.Fiber, w work, timeout time.Duration, what string) (uint64, error) {
	idx, _, err := n.callValue(f, w, timeout, what)
	return idx, err
}

func (n *Node) callValue(f *runtime.Fiber, w work, timeout time.Duration, what string) (uint64, any, error) {
	if f.Shard() != n.shard {
		return 0, nil, ErrWrongShard
	}
	if n.stopped {
		return 0, nil, n.stopErr()
	}
	reply, fu := runtime.NewFuture[result](f)
	n.seq++
	deadline := time.Now().Add(timeout)
	if timeout <= 0 { // no deadline: never expired by the driver
		deadline = time.Now().Add(100 * 365 * 24 * time.Hour)
	}
	w.w = &waiter{seq: n.seq, reply: reply, deadline: deadline}
	n.push(f, w)
	res, err := fu.Wait(f, timeout)
	if errors.Is(err, runtime.ErrTimeout) {
		return 0, nil, fmt.Errorf("node: %s: no answer within %v (%s): %w", what, timeout, n.quorumHint(), err)
	}
	if err != nil {
		return 0, nil, err
	}
	return res.index, res.value, res.err
}

// quorumHint names the leader and reachability for a timeout message.
func (n *Node) quorumHint() string {
	reach, voters := 1, 0
	if n.confState != nil {
		voters = len(n.confState.GetVoters())
		reach = 0
		for _, id := range n.confState.GetVoters() {
			if at, ok := n.heard[id]; id == n.cfg.ID || (ok && n.ticks-at <= uint64(n.cfg.ElectionTicks)) {
				reach++
			}
		}
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

// Propose replicates data and parks f until it is committed on a quorum
// and applied on this member; it returns the entry's index. A member that
// knows no leader fails at once with ErrNoLeader.
func (n *Node) Propose(f *runtime.Fiber, data []byte, timeout time.Duration) (uint64, error) {
	return n.call(f, work{kind: workPropose, data: data}, timeout, "propose")
}

// ProposeFunc is ProposeValue without parking: it queues the proposal and
// returns at once; done is called later on the member's driver fiber (it
// must not park) with the outcome, or with an error wrapping
// runtime.ErrTimeout once timeout (> 0) passed. Call it on the member's
// shard; an actor that must not park (a request actor) proposes this way.
func (n *Node) ProposeFunc(f *runtime.Fiber, data []byte, timeout time.Duration, done func(f *runtime.Fiber, index uint64, value any, err error)) {
	if f.Shard() != n.shard {
		done(f, 0, nil, ErrWrongShard)
		return
	}
	if n.stopped {
		done(f, 0, nil, n.stopErr())
		return
	}
	n.seq++
	n.push(f, work{kind: workPropose, data: data, w: &waiter{seq: n.seq, deadline: time.Now().Add(timeout), done: done}})
}

// ProposeValue is Propose that also returns what StateMachine.Apply
// returned for the entry on this member.
func (n *Node) ProposeValue(f *runtime.Fiber, data []byte, timeout time.Duration) (uint64, any, error) {
	return n.callValue(f, work{kind: workPropose, data: data}, timeout, "propose")
}

// ReadIndex parks f until this member has applied everything committed
// when the call was made, confirmed by a quorum (raft's ReadIndex): a read
// of the state machine after it returns is linearizable. Reads queued
// together share one round.
func (n *Node) ReadIndex(f *runtime.Fiber, timeout time.Duration) (uint64, error) {
	if f.Shard() == n.shard && n.LocalReadOK() {
		return n.applied, nil
	}
	return n.call(f, work{kind: workRead}, timeout, "read index")
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
	voters := n.confState.GetVoters()
	switch {
	case slices.Contains(n.confState.GetLearners(), id):
		return nil
	case !slices.Contains(voters, id):
		return fmt.Errorf("node: demote %016x: %w", id, ErrUnknownMember)
	case len(voters) == 1:
		return fmt.Errorf("node: demote %016x: %w: it is the last voter (a group needs one)", id, ErrConflict)
	case id == n.lead || id == n.cfg.ID && n.role == raft.StateLeader:
		return fmt.Errorf("node: demote %016x: %w: member %016x leads: transfer leadership away first", id, ErrConflict, id)
	}
	return n.confChange(f, raftpb.ConfChangeAddLearnerNode, id, n.members[id], timeout)
}

// Remove removes member id from the group.
func (n *Node) Remove(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	return n.confChange(f, raftpb.ConfChangeRemoveNode, id, "", timeout)
}

func (n *Node) mustShard(f *runtime.Fiber) {
	if f.Shard() != n.shard {
		panic(ErrWrongShard)
	}
}

func (n *Node) confChange(f *runtime.Fiber, typ raftpb.ConfChangeType, id uint64, addr string, timeout time.Duration) error {
	if id == 0 {
		return errors.New("node: member ID 0 is not valid")
	}
	cc := &raftpb.ConfChangeV2{Changes: []*raftpb.ConfChangeSingle{{Type: typ.Enum(), NodeId: new(id)}}}
	_, err := n.call(f, work{kind: workConfChange, cc: cc, data: []byte(addr)}, timeout, typ.String())
	return err
}

// TransferLeader asks the leader to hand leadership to id and parks f until
// this member sees id lead.
func (n *Node) TransferLeader(f *runtime.Fiber, id uint64, timeout time.Duration) error {
	_, err := n.call(f, work{kind: workTransfer, id: id}, timeout, "transfer leadership")
	return err
}

// Status returns the member's view of the group. It must be called on the
// member's shard (it panics with ErrWrongShard elsewhere: the fields it
// reads belong to the driver).
func (n *Node) Status(f *runtime.Fiber) Status {
	n.mustShard(f)
	st := Status{ID: n.cfg.ID, Leader: n.lead, Term: n.term, Commit: n.commit, Applied: n.applied, Removed: n.removed}
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
	if n.confState != nil {
		for _, id := range n.confState.GetVoters() {
			m := Member{ID: id, Addr: n.members[id]}
			if pr, ok := prs[id]; ok {
				m.Match, m.Reachable = pr.Match, pr.RecentActive || id == n.cfg.ID
			}
			st.Members = append(st.Members, m)
			st.Voters++
			if at, ok := n.heard[id]; id == n.cfg.ID || (ok && n.ticks-at <= uint64(n.cfg.ElectionTicks)) {
				st.Reachable++
			}
		}
		for _, id := range n.confState.GetLearners() {
			m := Member{ID: id, Addr: n.members[id], Learner: true}
			if pr, ok := prs[id]; ok {
				m.Match, m.Reachable = pr.Match, pr.RecentActive
			}
			st.Members = append(st.Members, m)
			if id == n.cfg.ID {
				st.Role = RoleLearner
			}
		}
	}
	slices.SortFunc(st.Members, func(a, b Member) int { return cmp.Compare(a.ID, b.ID) })
	return st
}

// Stop stops the member: callers waiting on it get ErrStopped. It does not
// close the transport (the caller owns it).
func (n *Node) Stop(f *runtime.Fiber) {
	if n.stopped {
		return
	}
	n.stopped = true
	n.kick(f)
}

// StopWait is Stop, then parks f until the driver fiber has returned (so
// no Save is in flight: the caller may close the storage).
func (n *Node) StopWait(f *runtime.Fiber) {
	n.Stop(f)
	if n.exited {
		return
	}
	rep, fu := runtime.NewFuture[struct{}](f)
	n.exitWtr = append(n.exitWtr, rep)
	_, _ = fu.Wait(f, 0)
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

// Err is why the member stopped on its own (a storage or apply failure), or
// nil.
func (n *Node) Err() error { return n.err }

func (n *Node) ticker(f *runtime.Fiber) {
	for !n.stopped && !f.Stopping() {
		runtime.Sleep(f, n.cfg.Tick)
		n.tickDue = true
		n.kick(f)
	}
}

// drive is the driver fiber: the only code that touches the RawNode.
func (n *Node) drive(f *runtime.Fiber) {
	defer func() {
		n.failAll(f)
		n.exited = true
		for _, r := range n.exitWtr {
			r.Send(f, struct{}{})
		}
		n.exitWtr = nil
	}()
	for {
		if n.stopped || f.Stopping() {
			n.finishSnapshot(f)
			return
		}
		if len(n.work) == 0 && !n.tickDue && !n.rn.HasReady() {
			wake, fu := runtime.NewFuture[struct{}](f)
			n.wake, n.parked = wake, true
			_, err := fu.Wait(f, 0)
			n.parked = false
			if err != nil {
				return
			}
			continue
		}
		n.campaignAlone()
		// What raft has from the last Advance (in a one-member group: the
		// entries the last Save made durable, now committed) is applied and
		// answered before new work is stepped, so that its writers can
		// rejoin the next group instead of waiting for its fsync.
		if n.rn.HasReady() {
			if err := n.handleReady(f, n.rn.Ready()); err != nil {
				n.fail(err)
				return
			}
			n.concurrency = n.settled + n.queuedProps
			if n.stopped {
				return
			}
		}
		n.gather(f)
		batch := n.work
		n.work = nil
		n.queuedProps = 0
		// Consecutive proposals are stepped as one MsgProp with all their
		// entries: raft appends them at once (one self-acknowledgement),
		// and the order relative to other work is kept.
		props := n.propBuf[:0]
		for _, w := range batch {
			if w.kind == workPropose {
				props = append(props, w)
				continue
			}
			n.proposeAll(f, props)
			props = props[:0]
			n.handle(f, w)
		}
		n.proposeAll(f, props)
		clear(props)
		n.propBuf = props[:0]
		if n.built != nil {
			if err := n.saveBuilt(f); err != nil {
				n.fail(err)
				return
			}
		}
		if n.tickDue {
			n.tickDue = false
			n.ticks++
			n.rn.Tick()
			n.expire(f, time.Now())
		}
		if len(n.reads) > 0 && (n.lead == raft.None || n.role == raft.StateCandidate || n.role == raft.StatePreCandidate) {
			// Raft drops a read index asked with no leader, silently:
			// answer now, as a proposal would be.
			err := fmt.Errorf("%w: %s", ErrNoLeader, n.quorumHint())
			for _, w := range n.reads {
				n.answer(f, w, 0, err)
			}
			n.reads = nil
		}
		if len(n.reads) > 0 {
			n.seq++
			ctx := binary.BigEndian.AppendUint64(nil, n.seq)
			n.batches[n.seq] = n.reads
			n.reads = nil
			n.rn.ReadIndex(ctx)
			n.readRounds++
		}
		if n.rn.HasReady() {
			if err := n.handleReady(f, n.rn.Ready()); err != nil {
				n.fail(err)
				return
			}
		}
		runtime.Checkpoint(f)
	}
}

func (n *Node) fail(err error) {
	n.err = err
	n.log.Error("node: stopping: the member cannot go on safely", "err", err)
	n.stopped = true
}

// gather waits, briefly, for the writers just answered to propose again
// before their next group is stepped: without it N steady writers split
// into two alternating groups (one queues while the other's Save is in
// flight), each fsync carrying N/2. The wait ends as soon as as many
// proposals are queued as were active in the last cycle, and at most half
// the last Save's duration (at least 20µs); one writer never waits.
func (n *Node) gather(f *runtime.Fiber) {
	want := n.concurrency
	if want <= 1 || n.lastSave <= 0 || n.queuedProps >= want || n.stopped {
		return
	}
	wake, fu := runtime.NewFuture[struct{}](f)
	n.gathering, n.gatherWant, n.gatherWake = true, want, wake
	_, _ = fu.Wait(f, max(n.lastSave/2, 20*time.Microsecond))
	n.gathering = false
	n.gatherWake = runtime.Reply[struct{}]{}
}

func (n *Node) handle(f *runtime.Fiber, w work) {
	switch w.kind {
	case workStep:
		// A relayed message's From is where it started, not a member this
		// one heard from.
		if !transport.Relayed(w.msg.GetType()) {
			n.heard[w.msg.GetFrom()] = n.ticks
		}
		if err := n.rn.Step(w.msg); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			n.log.Debug("node: message not stepped", "type", w.msg.GetType().String(), "from", w.msg.GetFrom(), "err", err)
		}
	case workUnreachable:
		n.rn.ReportUnreachable(w.id)
	case workSnapStatus:
		n.rn.ReportSnapshot(w.id, w.status)
	case workSnapBuilt:
		// Saved by the driver's loop, between Readys (saveBuilt).
	case workRemoved:
		if !n.removed {
			n.removed, n.stopped = true, true
			n.log.Warn("node: a peer says this member was removed from the group; stopping", "peer", fmt.Sprintf("%x", w.id))
		}
	case workPropose:
		n.proposeAll(f, []work{w})
	case workConfChange:
		ctx, _ := json.Marshal(confContext{Addr: string(w.data), Proposer: n.cfg.ID, Seq: w.w.seq})
		w.cc.Context = ctx
		if err := n.rn.ProposeConfChange(w.cc); err != nil {
			n.answer(f, w.w, 0, n.proposeErr(err))
			return
		}
		n.props[w.w.seq] = w.w
	case workRead:
		n.reads = append(n.reads, w.w)
	case workTransfer:
		if n.lead == w.id {
			n.answer(f, w.w, 0, nil)
			return
		}
		if n.lead == raft.None {
			n.answer(f, w.w, 0, ErrNoLeader)
			return
		}
		// On a follower raft forwards the request to the leader.
		n.rn.TransferLeader(w.id)
		n.transfer = append(n.transfer, &transferWait{to: w.id, w: w.w})
	}
}

// proposeAll steps proposals into raft as one MsgProp. Each entry's data
// is the 16-byte header (this member's ID, the caller's sequence number)
// and the caller's bytes.
func (n *Node) proposeAll(f *runtime.Fiber, ws []work) {
	if len(ws) == 0 {
		return
	}
	ents := make([]*raftpb.Entry, len(ws))
	for i, w := range ws {
		data := make([]byte, 16, 16+len(w.data))
		binary.BigEndian.PutUint64(data, n.cfg.ID)
		binary.BigEndian.PutUint64(data[8:], w.w.seq)
		ents[i] = &raftpb.Entry{Data: append(data, w.data...)}
	}
	err := n.rn.Step(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(n.cfg.ID), Entries: ents})
	for _, w := range ws {
		if err != nil {
			n.answer(f, w.w, 0, n.proposeErr(err))
			continue
		}
		n.props[w.w.seq] = w.w
		n.turnProps = append(n.turnProps, w.w.seq)
	}
}

func (n *Node) proposeErr(err error) error {
	if errors.Is(err, raft.ErrProposalDropped) {
		if n.lead == raft.None {
			return ErrNoLeader
		}
		return fmt.Errorf("node: proposal dropped by raft (leader %x, transfer in progress or too much uncommitted): %w", n.lead, err)
	}
	return fmt.Errorf("node: propose: %w", err)
}

func (n *Node) answer(f *runtime.Fiber, w *waiter, index uint64, err error) {
	if w.done != nil {
		w.done(f, index, nil, err)
		return
	}
	w.reply.Send(f, result{index: index, err: err})
}

func (n *Node) answerValue(f *runtime.Fiber, w *waiter, index uint64, v any) {
	if w.done != nil {
		w.done(f, index, v, nil)
		return
	}
	w.reply.Send(f, result{index: index, value: v})
}

// handleReady does what raft requires, in its order: persist the snapshot,
// entries and hard state; send the messages; apply the snapshot and the
// committed entries; Advance.
func (n *Node) handleReady(f *runtime.Fiber, rd raft.Ready) error {
	if rd.SoftState != nil {
		if rd.SoftState.Lead != n.lead {
			n.log.Info("node: leader changed", "leader", fmt.Sprintf("%x", rd.SoftState.Lead), "was", fmt.Sprintf("%x", n.lead))
		}
		n.lead, n.role = rd.SoftState.Lead, rd.SoftState.RaftState
	}
	n.settled = 0
	// A leader sends before it saves, so its followers write the entries
	// while it does (raft thesis 10.2.1; etcd's server does the same): a
	// commit then waits for the slowest of a quorum's fsyncs, not for the
	// leader's and then the followers' in turn. Safe because the leader
	// applies (and so acknowledges) an entry only after its own save
	// below: every acknowledged write is durable on a quorum that
	// includes the leader. Any other member's messages (votes, append
	// responses) promise what it has persisted, so they wait for the save.
	sendFirst := n.role == raft.StateLeader
	if sendFirst && len(rd.Messages) > 0 {
		n.cfg.Net.Send(f, rd.Messages)
	}
	start := time.Now()
	if err := n.cfg.Storage.Save(f, rd.HardState, rd.Entries, rd.Snapshot); err != nil {
		// A Ready with a snapshot is never restarted in place: the
		// snapshot may be durable though what followed it is not, and raft
		// restarted from storage below a snapshot it holds panics. The
		// member stops; a restart recovers from what is on disk.
		if errors.Is(err, ErrNothingSaved) && raft.IsEmptySnap(rd.Snapshot) {
			if sendFirst && len(rd.Messages) > 0 {
				err = fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
			}
			return n.restartRaft(f, err)
		}
		return fmt.Errorf("persist ready: %w", err)
	}
	// Term and commit are what Status reports as this member's progress:
	// recorded only once durable, so a failed save (and the restart from
	// storage that follows) never shows what the disk does not hold.
	if rd.HardState != nil {
		n.term, n.commit = rd.HardState.GetTerm(), rd.HardState.GetCommit()
	}
	if len(rd.Entries) > 0 {
		n.lastSave = time.Since(start)
		if n.cfg.OnSave != nil {
			n.cfg.OnSave(len(rd.Entries), n.lastSave)
		}
	}
	n.turnProps = n.turnProps[:0]
	if !sendFirst && len(rd.Messages) > 0 {
		n.cfg.Net.Send(f, rd.Messages)
	}
	if !raft.IsEmptySnap(rd.Snapshot) {
		if err := n.restore(f, rd.Snapshot); err != nil {
			return err
		}
	}
	for _, e := range rd.CommittedEntries {
		if err := n.apply(f, e); err != nil {
			return err
		}
		runtime.Checkpoint(f) // a long catch-up must not hold the shard
	}
	for _, rs := range rd.ReadStates {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		seq := binary.BigEndian.Uint64(rs.RequestCtx)
		if ws, ok := n.batches[seq]; ok {
			delete(n.batches, seq)
			n.ready = append(n.ready, readyRead{index: rs.Index, waiters: ws})
		}
	}
	n.rn.Advance(rd)
	n.answerReads(f)
	n.checkTransfers(f)
	// A snapshot waits until what is committed is applied: during a long
	// catch-up (a restart replaying its log) it would cover only part of
	// it, and each would carry the rest.
	// One snapshot at a time: while one is being written, snapNeeded
	// stays set and the rules below are asked again once it is saved.
	if !n.snapping && n.applied >= n.commit && (n.snapNeeded || (n.cfg.SnapshotEntries > 0 && n.applied-n.snapIndex >= n.cfg.SnapshotEntries) ||
		(n.cfg.SnapshotDue != nil && n.applied > n.snapIndex && n.cfg.SnapshotDue())) {
		n.snapNeeded = false
		if err := n.snapshot(f); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) answerReads(f *runtime.Fiber) {
	keep := n.ready[:0]
	for _, r := range n.ready {
		if r.index > n.applied {
			keep = append(keep, r)
			continue
		}
		for _, w := range r.waiters {
			n.answer(f, w, r.index, nil)
		}
	}
	clear(n.ready[len(keep):])
	n.ready = keep
}

func (n *Node) checkTransfers(f *runtime.Fiber) {
	keep := n.transfer[:0]
	for _, t := range n.transfer {
		if n.lead == t.to {
			n.answer(f, t.w, 0, nil)
			continue
		}
		keep = append(keep, t)
	}
	n.transfer = keep
}

// expire forgets waiters whose callers gave up (their Future timed out), so
// the maps stay bounded when proposals are lost with a leader.
func (n *Node) expire(f *runtime.Fiber, now time.Time) {
	for seq, w := range n.props {
		if now.After(w.deadline) {
			delete(n.props, seq)
			if w.done != nil {
				w.done(f, 0, nil, fmt.Errorf("node: propose: no answer by the deadline (%s): %w", n.quorumHint(), runtime.ErrTimeout))
			}
		}
	}
	for seq, ws := range n.batches {
		if allExpired(ws, now) {
			delete(n.batches, seq)
		}
	}
	n.ready = slices.DeleteFunc(n.ready, func(r readyRead) bool { return allExpired(r.waiters, now) })
	n.transfer = slices.DeleteFunc(n.transfer, func(t *transferWait) bool { return now.After(t.w.deadline) })
}

// allExpired reports whether every caller of a read batch has given up.
func allExpired(ws []*waiter, now time.Time) bool {
	for _, w := range ws {
		if !now.After(w.deadline) {
			return false
		}
	}
	return true
}

func (n *Node) apply(f *runtime.Fiber, e *raftpb.Entry) error {
	idx := e.GetIndex()
	switch e.GetType() {
	case raftpb.EntryNormal:
		data := e.GetData()
		if len(data) == 0 { // a new leader's empty entry
			break
		}
		if len(data) < 16 {
			return fmt.Errorf("entry %d: %d bytes, shorter than its 16-byte header", idx, len(data))
		}
		v, err := n.sm.Apply(f, idx, data[16:])
		if err != nil {
			return fmt.Errorf("apply entry %d: %w", idx, err)
		}
		if binary.BigEndian.Uint64(data) == n.cfg.ID {
			if w, ok := n.props[binary.BigEndian.Uint64(data[8:])]; ok {
				delete(n.props, w.seq)
				n.answerValue(f, w, idx, v)
				n.settled++
			}
		}
	case raftpb.EntryConfChange, raftpb.EntryConfChangeV2:
		var cc raftpb.ConfChangeI
		var ctx []byte
		if e.GetType() == raftpb.EntryConfChange {
			v1 := &raftpb.ConfChange{}
			if err := proto.Unmarshal(e.GetData(), v1); err != nil {
				return fmt.Errorf("entry %d: conf change: %w", idx, err)
			}
			cc, ctx = v1, v1.GetContext()
		} else {
			v2 := &raftpb.ConfChangeV2{}
			if err := proto.Unmarshal(e.GetData(), v2); err != nil {
				return fmt.Errorf("entry %d: conf change: %w", idx, err)
			}
			cc, ctx = v2, v2.GetContext()
		}
		var cctx confContext
		if len(ctx) > 0 {
			if err := json.Unmarshal(ctx, &cctx); err != nil {
				return fmt.Errorf("entry %d: conf change context: %w", idx, err)
			}
		}
		n.confState = n.rn.ApplyConfChange(cc)
		for _, ch := range cc.AsV2().GetChanges() {
			id := ch.GetNodeId()
			switch ch.GetType() {
			case raftpb.ConfChangeAddNode, raftpb.ConfChangeAddLearnerNode:
				if cctx.Addr != "" {
					n.members[id] = cctx.Addr
				}
				if id != n.cfg.ID && n.members[id] != "" {
					n.cfg.Net.AddPeer(f, id, n.members[id])
				}
				// A new member far behind gets the latest snapshot; one
				// taken before it was added would not name it, and raft
				// refuses a snapshot whose ConfState lacks the receiver.
				// Whichever rule takes snapshots (entries or SnapshotDue),
				// the next one is due now.
				n.snapNeeded = n.cfg.SnapshotEntries > 0 || n.cfg.SnapshotDue != nil
			case raftpb.ConfChangeRemoveNode:
				delete(n.members, id)
				if id == n.cfg.ID {
					// Raft's advice: a removed member shuts down. The
					// driver stops at the top of its loop.
					n.removed, n.stopped = true, true
					n.log.Warn("node: this member was removed from the group; stopping")
				} else {
					n.cfg.Net.RemovePeer(f, id)
				}
			}
		}
		n.noteMembership()
		n.log.Info("node: membership changed", "index", idx, "change", cc.AsV2().String(), "voters", n.confState.GetVoters(), "learners", n.confState.GetLearners())
		if cctx.Proposer == n.cfg.ID && cctx.Seq != 0 {
			n.settle(f, cctx.Seq, idx, nil)
		}
	}
	n.applied, n.appliedTerm = idx, e.GetTerm()
	return nil
}

func (n *Node) settle(f *runtime.Fiber, seq, idx uint64, err error) {
	if w, ok := n.props[seq]; ok {
		delete(n.props, seq)
		n.answer(f, w, idx, err)
	}
}

// builtSnap is a snapshot serialized by its writer fiber, waiting for the
// driver to hand it to the storage.
type builtSnap struct {
	index uint64
	cs    *raftpb.ConfState
	data  []byte
	err   error
}

// snapshot starts a snapshot at the applied index. The node's snapshot data
// is the membership addresses, then the state machine's bytes; the
// addresses travel with it because a member restored from a snapshot never
// sees the conf changes that named them. Only the capture (the membership
// and StateMachine.Snapshot) runs on the driver: serializing a large state
// takes far longer than a write's latency budget, so it runs in a fiber of
// its own (runSnapshotWriter) while the driver goes on applying and
// answering writes, and the driver saves the bytes when they are ready
// (saveBuilt), at the index captured here. Raft's log is compacted only up
// to that index, however far the applied index has moved meanwhile.
func (n *Node) snapshot(f *runtime.Fiber) error {
	write, err := n.sm.Snapshot(f)
	if err != nil {
		return fmt.Errorf("state machine snapshot at %d: %w", n.applied, err)
	}
	addrs, _ := json.Marshal(n.members)
	header := binary.BigEndian.AppendUint32(nil, uint32(len(addrs)))
	header = append(header, addrs...)
	b := &builtSnap{index: n.applied, cs: proto.Clone(n.confState).(*raftpb.ConfState)}
	n.snapping = true
	runtime.Go(f, func(f *runtime.Fiber) { n.runSnapshotWriter(f, b, write, header) })
	return nil
}

// runSnapshotWriter is the snapshot's writer fiber: it serializes the
// captured state after header and wakes the driver with the result.
func (n *Node) runSnapshotWriter(f *runtime.Fiber, b *builtSnap, write SnapshotWriter, header []byte) {
	b.data, b.err = write(f, header)
	if b.err != nil {
		b.err = fmt.Errorf("state machine snapshot at %d: %w", b.index, b.err)
	}
	n.snapping = false
	n.built = b
	if n.snapDone != nil {
		n.snapDone.Send(f, struct{}{})
		n.snapDone = nil
	}
	if n.stopped {
		return
	}
	n.push(f, work{kind: workSnapBuilt})
}

// finishSnapshot, on a stop asked for (Stop, not a failure), waits for the
// snapshot being written and saves it: a clean stop then leaves the log a
// next start replays from that snapshot, not the whole log since the last
// one (TestRecoveryMemoryIsBounded). The runtime stopping unwinds the wait.
func (n *Node) finishSnapshot(f *runtime.Fiber) {
	if n.err != nil || f.Stopping() {
		return
	}
	if n.snapping {
		rep, fu := runtime.NewFuture[struct{}](f)
		n.snapDone = &rep
		if _, err := fu.Wait(f, 0); err != nil {
			return
		}
	}
	if n.built != nil {
		if err := n.saveBuilt(f); err != nil {
			n.log.Warn("node: saving the snapshot written before the stop", "err", err)
		}
	}
}

// saveBuilt hands a finished snapshot to the storage. A snapshot restored
// from the leader while it was being written supersedes it: it is dropped.
func (n *Node) saveBuilt(f *runtime.Fiber) error {
	b := n.built
	n.built = nil
	if b.err != nil {
		return b.err
	}
	if b.index <= n.snapIndex {
		return nil
	}
	if err := n.cfg.Storage.SaveSnapshot(f, b.index, b.cs, b.data, n.cfg.SnapshotKeep); err != nil {
		return err
	}
	n.snapIndex = b.index
	return nil
}

func (n *Node) restore(f *runtime.Fiber, snap *raftpb.Snapshot) error {
	data := snap.GetData()
	idx := snap.GetMetadata().GetIndex()
	if len(data) < 4 || uint64(len(data)-4) < uint64(binary.BigEndian.Uint32(data)) {
		return fmt.Errorf("snapshot at %d: %d bytes, too short for its membership header", idx, len(data))
	}
	k := binary.BigEndian.Uint32(data)
	members := map[uint64]string{}
	if err := json.Unmarshal(data[4:4+k], &members); err != nil {
		return fmt.Errorf("snapshot at %d: membership: %w", idx, err)
	}
	if err := n.sm.Restore(f, data[4+k:]); err != nil {
		return fmt.Errorf("restore snapshot at %d: %w", idx, err)
	}
	n.members = members
	for id, addr := range members {
		if id != n.cfg.ID {
			n.cfg.Net.AddPeer(f, id, addr)
		}
	}
	n.confState = snap.GetMetadata().GetConfState()
	n.applied, n.snapIndex = idx, idx
	n.noteMembership()
	n.log.Info("node: restored a snapshot", "index", idx, "bytes", len(data))
	return nil
}

// restartRaft handles a Save that persisted nothing: raft's unsaved state
// (the Ready's entries, hard state, messages) is dropped by making a new
// RawNode from the storage, which has everything durable and nothing else,
// at the applied index; the proposals stepped since the last good Save
// fail with the error, and so do the reads waiting for a round. This is a
// crash and restart of the raft state without losing the process: nothing
// of the Ready was sent or acknowledged.
func (n *Node) restartRaft(f *runtime.Fiber, cause error) error {
	// Raft restores the membership from InitialState and skips the conf
	// changes up to Applied: give it the membership as applied.
	rn, err := n.newRawNodeOn(appliedConf{n.cfg.Storage, n.confState})
	if err != nil {
		return fmt.Errorf("persist ready: %w; and restarting raft from storage: %w", cause, err)
	}
	n.rn = rn
	n.log.Warn("node: a save failed with nothing written; raft restarted from its storage", "err", cause)
	for _, seq := range n.turnProps {
		if w, ok := n.props[seq]; ok {
			delete(n.props, seq)
			n.answer(f, w, 0, cause)
		}
	}
	n.turnProps = n.turnProps[:0]
	for seq, ws := range n.batches {
		for _, w := range ws {
			n.answer(f, w, 0, cause)
		}
		delete(n.batches, seq)
	}
	n.lead, n.role = raft.None, raft.StateFollower
	// No campaign of its own before an election timeout: the save that
	// failed (a full disk) would likely fail again at once.
	n.quietUntil = n.ticks + uint64(n.cfg.ElectionTicks)
	return nil
}

// failAll answers every waiter with the reason the member stopped.
func (n *Node) failAll(f *runtime.Fiber) {
	n.stopped = true
	n.down.Store(true)
	n.noteMembership()
	err := n.stopErr()
	for _, w := range n.work {
		if w.w != nil {
			n.answer(f, w.w, 0, err)
		}
	}
	n.work = nil
	for _, w := range n.props {
		n.answer(f, w, 0, err)
	}
	clear(n.props)
	for _, w := range n.reads {
		n.answer(f, w, 0, err)
	}
	n.reads = nil
	for _, ws := range n.batches {
		for _, w := range ws {
			n.answer(f, w, 0, err)
		}
	}
	clear(n.batches)
	for _, r := range n.ready {
		for _, w := range r.waiters {
			n.answer(f, w, 0, err)
		}
	}
	n.ready = nil
	for _, t := range n.transfer {
		n.answer(f, t.w, 0, err)
	}
	n.transfer = nil
}
