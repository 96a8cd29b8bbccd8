package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"sync/atomic"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

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

// SnapshotWriter writes the state a StateMachine.Snapshot captured to w.
// The storage calls it once, while it writes its snapshot file, and on the
// goroutine of its choice (dbowner's: a thread of its own off the shard),
// so that the state streams into the file instead of being held whole in
// memory first (a second copy of the database at the peak, and the
// collections its allocation brought on). It runs while the driver goes on
// applying entries, so it must read only the captured state (later Applies
// must not show in it) and nothing a fiber writes.
type SnapshotWriter func(w io.Writer) error

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
	// RemovedThrough is the index of the last removal of an earlier
	// member with this ID (RemovedAt when it stopped): a member added
	// again under the same ID meets that removal again while it catches
	// up from the log, and must not take it for its own. A removal above
	// it stops the member as any does. 0: none.
	RemovedThrough uint64

	Tick           time.Duration // one raft tick; default 100ms
	ElectionTicks  int           // default 10
	HeartbeatTicks int           // default 1
	// NoQuiesce keeps the group ticking when idle (quiesce.go): for tests
	// of message-level behaviour that a quiet follower's hold on its
	// calls would change. The worker never sets it.
	NoQuiesce       bool
	MaxSizePerMsg   uint64 // default 1 MiB
	MaxInflightMsgs int    // default 256
	// SnapshotEntries takes a snapshot (and compacts the log) every this
	// many applied entries; 0 never does.
	SnapshotEntries uint64
	// SnapshotKeep is how many entries before a snapshot stay in the log,
	// so a slightly slow follower catches up from the log; default 1000.
	SnapshotKeep uint64
	// SnapshotDue, when set, is asked after each Ready whether a snapshot
	// is due anyway (the database: enough log bytes since the last one).
	SnapshotDue func() bool
	// SnapshotDueAlone, when set, is asked instead of SnapshotDue while
	// this member is the group's only member, whose memory keeps no
	// entries it applied (AppliedCompactor): a longer log costs it disk and
	// restart time only, no memory (the database: an interval that grows
	// with the state, wal.Log.SnapshotDueScaled).
	SnapshotDueAlone func() bool
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
	// Draining: the member was marked draining (Drain), in the applied
	// log as every member sees it.
	Draining bool `json:"draining,omitempty"`
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
	// Quiesced: the group is idle and this member is not ticking raft
	// (quiesce.go).
	Quiesced bool
}

// Node is one raft member: a raft.RawNode owned by one driver fiber on one
// shard, ticked by the shard's clock (clock.go). Other fibers of the shard
// call its methods, which register a waiter and park the caller
// (or, ProposeFunc, leave a callback) until the driver answers; the
// transport feeds it messages the same way. Only the driver touches the
// RawNode.
type Node struct {
	cfg   Config
	shard int
	log   *slog.Logger
	rn    *raft.RawNode
	sm    StateMachine
	inbox runtime.Addr[transport.Envelope]

	work      []work // queued by callers and the transport, drained by the driver
	spareWork []work // the other of the driver's two work slices (stepWork)
	// wake is notified by whatever gives the driver something to do: work
	// queued, a tick due, a snapshot written, a stop.
	wake    runtime.Signal
	tickDue bool
	turns   uint64 // the driver's turns so far (a quiet member's ticks take none)
	stopped bool
	err     error // why the driver stopped

	// dropsReturned counts the forwarded commands raft dropped here and
	// this member returned to their proposer (dropped.go).
	dropsReturned int

	// waits is every caller waiting for the driver, by id (wait.go).
	waits waits
	// restepDue: a leader appeared (or a tick passed with one known) while
	// waiters raft dropped are held: the driver steps them again.
	restepDue bool

	applied     uint64
	appliedTerm uint64 // term of the last applied entry
	term        uint64
	commit      uint64
	confState   *raftpb.ConfState
	members     map[uint64]string // id -> address, from the applied log
	// draining are the members marked draining (Drain): a placement
	// (dbowner/placer.go) moves every replica off them. From the applied
	// log, and in snapshots beside the addresses.
	draining   map[uint64]bool
	lead       uint64
	role       raft.StateType
	removed    bool
	readRounds uint64            // ReadIndex rounds asked (each serves a batch of reads), from a clock-seeded base
	ticks      uint64            // ticks so far
	heard      map[uint64]uint64 // member -> tick of its last message
	quietUntil uint64            // no campaignAlone before this tick
	// quiesced: the group is idle and raft is not ticked (quiesce.go);
	// active: something happened since the last tick.
	quiesced bool
	active   bool
	// confirming: a follower roused from quiet asked its leader for a
	// sign of life (a ping) and has not had one yet.
	confirming bool
	// A quiet leader's: the members it left behind, and its ticks since
	// it went quiet (quietTick).
	behind     []uint64
	quietTicks uint64
	clk        *clock // its shard's clock (clock.go)
	// lostTicks: the follower's (unquiet) ticks since it last heard from
	// its leader, or since it lost (or never had) one (lost.go).
	lostTicks uint64

	snap  snapState   // apply.go
	group groupCommit // driver.go

	// The append fiber's (append.go): the MsgStorageAppends the driver
	// queued and the fiber has not taken, in order; appendSeq numbers
	// them (and stamps proposals, groupCommit.gen).
	appends      []*appendJob
	appendSeq    uint64
	appendWake   runtime.Signal // work queued for the append fiber
	appendBroken bool           // a save failed: nothing more is saved until restartRaft
	// appendGated: a sole voter's save ended; the next waits for the
	// driver's turn that steps it (gateDue) to end (openGate).
	appendGated  bool
	gateDue      bool
	appenderDone bool // the append fiber returned

	exited  bool                      // the driver returned
	exitWtr []runtime.Reply[struct{}] // StopWait callers

	joined atomic.Bool // this member is in the membership (voter or learner)
	gone   atomic.Bool // removed, readable from any goroutine
	// removedAt is the index of the entry that removed this member.
	removedAt atomic.Uint64
	down      atomic.Bool // the driver stopped (Stop, removal or failure)
}

// confContext travels in every conf change this package proposes.
type confContext struct {
	Addr string `json:"addr,omitempty"`
	// Drain marks the member the change names draining (Drain); any other
	// change that adds or demotes it clears the mark.
	Drain    bool   `json:"drain,omitempty"`
	Proposer uint64 `json:"proposer,omitempty"`
	Seq      uint64 `json:"seq,omitempty"`
}

// Start creates the member on f's shard, starts its driver and append
// fibers and has its shard's clock tick it (clock.go). A storage with state
// restarts the member from it; an empty one bootstraps cfg.Bootstrap, or
// waits to be added when that is empty.
func Start(f *runtime.Fiber, cfg Config) (*Node, error) {
	if cfg.ID == 0 || cfg.Storage == nil || cfg.StateMachine == nil || cfg.Net == nil {
		return nil, errors.New("node: Config needs ID, Storage, StateMachine and Net")
	}
	cfg = cfg.withDefaults()
	n := &Node{
		cfg: cfg, shard: f.Shard(), log: cfg.Logger.With("member", fmt.Sprintf("%x", cfg.ID)), sm: cfg.StateMachine,
		waits: newWaits(), heard: map[uint64]uint64{}, members: map[uint64]string{}, draining: map[uint64]bool{},
		// A round's id travels to the leader and back: a restarted
		// member's must not match an answer to its previous run's.
		readRounds: uint64(time.Now().UnixNano()),
	}
	hs, fresh, err := n.recover(f)
	if err != nil {
		return nil, err
	}
	for id, addr := range cfg.Peers {
		cfg.Net.AddPeer(f, id, addr)
	}
	if fresh && len(cfg.Bootstrap) > 0 {
		if err := n.bootstrap(f); err != nil {
			return nil, err
		}
	} else if fresh {
		n.log.Info("node: empty log and no bootstrap membership: waiting to be added to a group")
	}
	n.noteMembership()
	n.term, n.commit = hs.GetTerm(), hs.GetCommit()
	n.inbox = runtime.SpawnOn(f, n.shard, &inboxActor{n: n})
	runtime.Go(f, n.drive)
	runtime.Go(f, n.appender)
	n.joinClock(f)
	return n, nil
}

// withDefaults fills the zero fields of c with their defaults.
func (c Config) withDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Tick <= 0 {
		c.Tick = 100 * time.Millisecond
	}
	if c.ElectionTicks <= 0 {
		c.ElectionTicks = 10
	}
	if c.HeartbeatTicks <= 0 {
		c.HeartbeatTicks = 1
	}
	if c.MaxSizePerMsg == 0 {
		c.MaxSizePerMsg = 1 << 20
	}
	if c.MaxInflightMsgs <= 0 {
		c.MaxInflightMsgs = 256
	}
	if c.SnapshotKeep == 0 {
		c.SnapshotKeep = 1000
	}
	return c
}

// recover restores the storage's snapshot and makes the RawNode; fresh
// reports an empty storage (no entries, no hard state).
func (n *Node) recover(f *runtime.Fiber) (hs *raftpb.HardState, fresh bool, err error) {
	st := n.cfg.Storage
	hs, cs, err := st.InitialState()
	if err != nil {
		return nil, false, fmt.Errorf("node: initial state: %w", err)
	}
	n.confState = cs
	snap, err := st.Snapshot()
	if err != nil {
		return nil, false, fmt.Errorf("node: snapshot: %w", err)
	}
	if !raft.IsEmptySnap(snap) {
		if err := n.restore(f, snap); err != nil {
			return nil, false, err
		}
	}
	last, err := st.LastIndex()
	if err != nil {
		return nil, false, fmt.Errorf("node: last index: %w", err)
	}
	if n.rn, err = n.newRawNodeOn(st); err != nil {
		return nil, false, err
	}
	return hs, last == 0 && raft.IsEmptyHardState(hs), nil
}

// bootstrap starts a new group of cfg.Bootstrap's members.
func (n *Node) bootstrap(f *runtime.Fiber) error {
	cfg := n.cfg
	var peers []raft.Peer
	for _, id := range slices.Sorted(maps.Keys(cfg.Bootstrap)) {
		ctx, _ := json.Marshal(confContext{Addr: cfg.Bootstrap[id]})
		peers = append(peers, raft.Peer{ID: id, Context: ctx})
		if id != cfg.ID {
			cfg.Net.AddPeer(f, id, cfg.Bootstrap[id])
		}
		n.members[id] = cfg.Bootstrap[id]
	}
	if err := n.rn.Bootstrap(peers); err != nil {
		return fmt.Errorf("node: bootstrap: %w", err)
	}
	n.confState = &raftpb.ConfState{Voters: slices.Sorted(maps.Keys(cfg.Bootstrap))}
	n.log.Info("node: bootstrapping a new group", "members", len(peers))
	return nil
}

// appliedConf is the storage with the membership as applied, for a
// RawNode made at the applied index.
//
// Its commit is at least the applied index. With asynchronous storage
// writes raft applies an entry once it is durable here and known
// committed, which can come before the hard state naming that commit is
// saved (a heartbeat's commit: the entry was appended and answered
// earlier); a save that then fails leaves the durable commit below the
// applied index, and raft made at that index from that hard state panics
// ("applied(4) is out of range [prevApplied(0), committed(3)]"). The
// applied entries are committed and in the durable log, so the applied
// index is a commit the member knows.
type appliedConf struct {
	Storage
	cs      *raftpb.ConfState
	applied uint64
}

func (a appliedConf) InitialState() (*raftpb.HardState, *raftpb.ConfState, error) {
	hs, _, err := a.Storage.InitialState()
	if err == nil && hs.GetCommit() < a.applied {
		hs = &raftpb.HardState{Term: new(hs.GetTerm()), Vote: new(hs.GetVote()), Commit: new(a.applied)}
	}
	return hs, a.cs, err
}

// newRawNodeOn makes the RawNode from st, at the applied index.
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
		// The driver hands log writes to the append fiber and goes on
		// (append.go): raft then holds back what promises durability.
		AsyncStorageWrites: true,
		CheckQuorum:        true,
		PreVote:            true,
		ReadOnlyOption:     raft.ReadOnlySafe,
		StepDownOnRemoval:  true,
		Logger:             raftLogger{n.log},
	})
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return rn, nil
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

// RemovedAt is the index of the entry whose removal of this member it
// applied (0: none, or only a peer said so). Safe from any goroutine.
func (n *Node) RemovedAt() uint64 { return n.removedAt.Load() }

// Stopped reports whether the member's driver has stopped (Stop, its
// removal, or a failure; Err says which). Safe from any goroutine.
func (n *Node) Stopped() bool { return n.down.Load() }

// Inbox is the member's actor address for transporttest.Memory: batches sent
// to it from any shard are stepped into raft.
func (n *Node) Inbox() runtime.Addr[transport.Envelope] { return n.inbox }

// ID is the member's raft ID.
func (n *Node) ID() uint64 { return n.cfg.ID }

// Err is why the member stopped on its own (a storage or apply failure), or
// nil.
func (n *Node) Err() error { return n.err }

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
