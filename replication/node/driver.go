package node

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"go.etcd.io/raft/v3"
	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

type workKind uint8

const (
	workStep   workKind = iota + 1
	workSubmit          // a waiter was registered (id): step it into raft
	workUnreachable
	workSnapStatus
	workRemoved
	workAppended     // the append fiber made jobs durable: step their responses
	workAppendFailed // the append fiber's save of jobs failed (err)
)

// work is what callers and the transport queue for the driver.
type work struct {
	kind   workKind
	msg    *raftpb.Message
	id     uint64 // workSubmit: the waiter; else a peer
	status raft.SnapshotStatus
	// workAppended, workAppendFailed: the appends one Save carried, how
	// many entries and how long it took, or why it failed.
	jobs    []*appendJob
	entries int
	took    time.Duration
	err     error
}

// groupCommit is the driver's group-commit bookkeeping (see gather).
type groupCommit struct {
	queued      int // proposals queued and not yet stepped
	settled     int // proposals answered by the last Ready
	concurrency int // proposals active in the last cycle
	// gatherDue: the last Ready answered writers; the next turn gathers
	// their next proposals (once) before stepping.
	gatherDue bool
	lastSave  time.Duration // how long the last Save of entries took
	submits   []*waiter     // stepWork's scratch
	props     []*waiter     // stepAll's scratch
	// gen is how many appends the driver had handed the append fiber
	// when a proposal was stepped (appendSeq): the proposal's entries are
	// in a later append, so restartRaft fails those whose gen is at or
	// past the failed append's predecessor.
	gen uint64
}

func (n *Node) push(f *runtime.Fiber, w work) {
	if n.stopped {
		return
	}
	n.work = append(n.work, w)
	if w.kind != workStep && w.kind != workUnreachable {
		// A message is judged when the driver steps it, in order
		// (handle): a quiescing heartbeat must not rouse the group. A
		// peer found unreachable is not news to a quiet group: its
		// leader left a member it had not heard from behind.
		n.rouse(f)
	}
	if w.kind == workSubmit {
		if wt := n.waits.get(w.id); wt != nil && wt.kind == waitEntry && wt.cc == nil {
			n.group.queued++
		}
	}
	n.kick(f)
}

// kick wakes the driver (or its gather) to look again.
func (n *Node) kick(f *runtime.Fiber) { n.wake.Notify(f) }

// drive is the driver fiber: the only code that touches the RawNode.
func (n *Node) drive(f *runtime.Fiber) {
	defer n.exit(f)
	for {
		if n.stopped || f.Stopping() {
			return
		}
		if len(n.work) == 0 && !n.tickDue && !n.restepDue && n.snap.err == nil && !n.rn.HasReady() {
			// A wait with no deadline ends false only when the runtime
			// stops.
			if !n.wake.Wait(f, 0) {
				return
			}
			continue
		}
		n.turns++
		halt, err := n.turn(f)
		n.wakeClock(f)
		if err != nil {
			n.fail(err)
			return
		}
		if halt {
			return
		}
		runtime.Checkpoint(f)
	}
}

// turn is one round of the driver: the completed saves stepped and the
// Ready that makes (what they committed applied and answered), a gather
// when writers were just answered, the rest of the queued work stepped
// into raft, a tick, the reads' round, and the Ready that made; then a
// sole voter's next save may start (openGate). halt: the member stopped.
//
// The driver never waits for a save: raft runs with AsyncStorageWrites,
// so a Ready's log writes leave as a MsgStorageAppend for the append fiber
// (append.go) and come back, once durable, as a completion in the work
// queue, whose responses (the member's acknowledgements, raft's own
// MsgStorageAppendResp) the driver steps or sends then. While one fsync is
// in flight the driver steps the next proposals, sends the next appends
// and applies and answers what committed.
//
// Completed saves are stepped first, and what they committed applied and
// answered, before the gather and the other work: the writers answered
// then propose again in time to join the next group.
func (n *Node) turn(f *runtime.Fiber) (halt bool, err error) {
	n.campaignAlone()
	if err := n.stepCompletions(f); err != nil {
		return true, err
	}
	if n.rn.HasReady() {
		if err := n.handleReady(f, n.rn.Ready()); err != nil {
			return true, err
		}
		if n.stopped {
			return true, nil
		}
	}
	n.gather(f)
	var reads []*waiter
	if n.restepDue {
		reads = n.restep(f)
	}
	reads, err = n.stepWork(f, reads)
	if err != nil {
		return true, err
	}
	if err := n.snap.err; err != nil {
		return true, err
	}
	if n.stopped {
		return true, nil
	}
	if n.tickDue {
		n.tick(f)
	}
	n.askReads(reads)
	if n.rn.HasReady() {
		if err := n.handleReady(f, n.rn.Ready()); err != nil {
			return true, err
		}
	}
	n.openGate(f)
	return false, nil
}

// stepCompletions handles the completed (or failed) saves queued for the
// driver, in their order, ahead of the rest of the queue.
func (n *Node) stepCompletions(f *runtime.Fiber) error {
	done := 0
	for _, w := range n.work {
		if w.kind == workAppended || w.kind == workAppendFailed {
			done++
		}
	}
	if done == 0 {
		return nil
	}
	// What is pushed meanwhile (a send's unreachable report) goes after
	// the rest.
	batch := n.work
	n.work, n.spareWork = n.spareWork[:0], nil
	rest := batch[:0] // compacted in place: rest never passes the reading
	var err error
	for _, w := range batch {
		switch {
		case w.kind != workAppended && w.kind != workAppendFailed:
			rest = append(rest, w)
		case err == nil:
			err = n.handle(f, w)
		}
	}
	clear(batch[len(rest):])
	pushed := n.work
	n.work = append(rest, pushed...)
	clear(pushed)
	n.spareWork = pushed[:0]
	n.gateDue = true
	return err
}

func (n *Node) tick(f *runtime.Fiber) {
	n.tickDue = false
	n.expire(f, time.Now())
	if n.quiesced {
		// Raft's clock stops, and the member's with it: what it heard
		// before the group went quiet does not age (Status.Reachable).
		n.quietTick(f)
		return
	}
	n.ticks++
	n.askIfLost(f)
	if !n.maybeQuiesce(f) {
		n.rn.Tick()
	}
	n.active = false
	// A leader that dropped proposals (a transfer that ended without a
	// new leader, the uncommitted limit) takes them on a later tick.
	if n.waits.held > 0 && n.leaderKnown() {
		n.restepDue = true
	}
}

// leaderKnown: this member knows a leader it can hand proposals and reads
// to (raft drops them, silently for a read, while it campaigns).
//
// A follower roused from quiet has not yet heard that its leader is still
// there (quiesce.go, confirming): until it does, it holds what it would
// forward, instead of losing it to a leader that died while the group was
// quiet.
func (n *Node) leaderKnown() bool {
	return n.lead != raft.None && n.role != raft.StateCandidate && n.role != raft.StatePreCandidate && !n.confirming
}

func (n *Node) fail(err error) {
	n.err = err
	n.log.Error("node: stopping: the member cannot go on safely", "err", err)
	n.stopped = true
}

// exit is the driver's last act: every waiter is answered with why the
// member stopped, the appends queued and the snapshot being saved are
// waited for, and StopWait callers are released.
func (n *Node) exit(f *runtime.Fiber) {
	n.stopped = true
	n.down.Store(true)
	n.noteMembership()
	n.work = nil
	n.waits.failEvery(f, n.stopErr())
	n.finishAppends(f)
	n.finishSnapshot(f)
	n.exited = true
	n.wakeClock(f)
	for _, r := range n.exitWtr {
		r.Send(f, struct{}{})
	}
	n.exitWtr = nil
}

// gather waits, briefly, for the writers just answered to propose again
// before their next group is stepped: without it N steady writers split
// into two alternating groups (one queues while the other's Save is in
// flight), each fsync carrying N/2. The wait ends as soon as as many
// proposals are queued as were active in the last cycle, and at most half
// the last Save's duration (at least 20µs); one writer never waits. It
// runs once after a Ready that answered writers (gatherDue), not in every
// turn: a turn woken by an acknowledgement or a completed save must step
// it at once, as the next commit waits on it.
func (n *Node) gather(f *runtime.Fiber) {
	g := &n.group
	want := g.concurrency
	if !g.gatherDue {
		return
	}
	g.gatherDue = false
	if want <= 1 || g.lastSave <= 0 {
		return
	}
	until := time.Now().Add(max(g.lastSave/2, 20*time.Microsecond))
	for g.queued < want && !n.stopped {
		left := time.Until(until)
		if left <= 0 || !n.wake.Wait(f, left) {
			return
		}
	}
}

// stepWork drains the work queue into raft, in order, and returns the
// reads queued (after those of restep), for one round at the end of the
// turn. An error is why the member must stop (a completed append that
// could not be handled).
func (n *Node) stepWork(f *runtime.Fiber, reads []*waiter) ([]*waiter, error) {
	batch := n.work
	// The queue fills its spare meanwhile, and batch becomes the spare:
	// two slices serve every turn instead of one grown per turn.
	n.work, n.spareWork = n.spareWork[:0], nil
	n.group.queued = 0
	ws := n.group.submits[:0]
	var later []work
	for _, wk := range batch {
		if wk.kind == workAppended || wk.kind == workAppendFailed {
			// Left for the next turn's stepCompletions, which answers
			// what they commit before its gather (openGate).
			later = append(later, wk)
			continue
		}
		if wk.kind == workSubmit {
			// Not one answered, given up, or with nothing to step.
			if w := n.waits.get(wk.id); w != nil && w.state == waitQueued {
				ws = append(ws, w)
			}
			continue
		}
		reads = n.stepAll(f, ws, reads)
		ws = ws[:0]
		if err := n.handle(f, wk); err != nil {
			// The rest of the batch is dropped with the member.
			clear(ws)
			return reads, err
		}
	}
	reads = n.stepAll(f, ws, reads)
	clear(ws)
	n.group.submits = ws[:0]
	if len(later) > 0 {
		n.work = append(later, n.work...)
	}
	clear(batch)
	n.spareWork = batch[:0]
	return reads, nil
}

// restep steps again, oldest first, the waiters held for want of a leader
// now that one is known, and returns the reads among them.
func (n *Node) restep(f *runtime.Fiber) []*waiter {
	n.restepDue = false
	if n.waits.held == 0 || !n.leaderKnown() {
		return nil
	}
	return n.stepAll(f, n.waits.collect(0, func(w *waiter) bool { return w.state == waitHeld }), nil)
}

// stepAll steps waiters into raft in their order and returns reads with
// the reads among them added, for the turn's round. Consecutive proposals
// are stepped as one MsgProp with all their entries: raft appends them at
// once (one self-acknowledgement).
func (n *Node) stepAll(f *runtime.Fiber, ws, reads []*waiter) []*waiter {
	props := n.group.props[:0]
	for _, w := range ws {
		switch {
		case w.kind == waitRead:
			reads = append(reads, w)
		case w.kind == waitEntry && w.cc == nil:
			props = append(props, w)
		default:
			n.stepEntries(f, props)
			props = props[:0]
			n.stepOne(f, w)
		}
	}
	n.stepEntries(f, props)
	clear(props)
	n.group.props = props[:0]
	return reads
}

func (n *Node) handle(f *runtime.Fiber, w work) error {
	switch w.kind {
	case workAppended:
		return n.appended(f, w)
	case workAppendFailed:
		return n.appendFailed(f, w)
	case workStep:
		// A relayed message's From is where it started, not a member this
		// one heard from.
		if !transport.Relayed(w.msg.GetType()) {
			n.heard[w.msg.GetFrom()] = n.ticks
		}
		quiesce := isQuiesce(w.msg)
		if !quiesce && (w.msg.GetType() != raftpb.MsgHeartbeatResp || isPing(w.msg)) {
			if n.fromLeader(w.msg) {
				n.quiesced, n.active = false, true // no need to ask it if it is there
			} else {
				n.rouse(f)
			}
		}
		if n.fromLeader(w.msg) {
			n.lostTicks = 0
		}
		if isLost(w.msg) {
			n.answerLost(f, w.msg)
			return nil
		}
		n.heardLeader(w.msg)
		if isDropped(w.msg) {
			n.holdDropped(w.msg.GetEntries())
			return nil
		}
		if err := n.stepRemote(f, w.msg); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			n.log.Debug("node: message not stepped", "type", w.msg.GetType().String(), "from", w.msg.GetFrom(), "err", err)
		}
		switch {
		case quiesce:
			n.quiesceFollower(w.msg)
		case isPing(w.msg):
			n.answerPing(f, w.msg)
		}
	case workUnreachable:
		n.rn.ReportUnreachable(w.id)
	case workSnapStatus:
		n.rn.ReportSnapshot(w.id, w.status)
	case workRemoved:
		if !n.removed {
			n.removed, n.stopped = true, true
			n.log.Warn("node: a peer says this member was removed from the group; stopping", "peer", fmt.Sprintf("%x", w.id))
		}
	}
	return nil
}

// stepOne hands raft a conf change or a leadership transfer; with no
// leader known it is held for one.
func (n *Node) stepOne(f *runtime.Fiber, w *waiter) {
	if !n.leaderKnown() {
		n.waits.setState(w, waitHeld)
		return
	}
	switch {
	case w.kind == waitTransfer:
		if n.lead == w.to {
			n.waits.trigger(f, w.id, 0, nil, nil)
			return
		}
		// On a follower raft forwards the request to the leader.
		n.rn.TransferLeader(w.to)
		n.waits.setState(w, waitStepped)
	case w.cc != nil:
		ctx, _ := json.Marshal(confContext{Addr: string(w.data), Drain: w.drain, Proposer: n.cfg.ID, Seq: w.id})
		w.cc.Context = ctx
		n.stepped(f, []*waiter{w}, n.rn.ProposeConfChange(w.cc))
	}
}

// stepEntries steps proposals into raft as one MsgProp. Each entry's data
// is the caller's buffer, the header (header.go: this member's ID, the
// waiter's id) written in the room NewEntry left at its front.
func (n *Node) stepEntries(f *runtime.Fiber, ws []*waiter) {
	if len(ws) == 0 {
		return
	}
	if n.confirming {
		// Not to a leader that may have died while the group was quiet
		// (leaderKnown).
		for _, w := range ws {
			n.waits.setState(w, waitHeld)
		}
		return
	}
	ents := make([]*raftpb.Entry, len(ws))
	for i, w := range ws {
		putHeader(w.data, n.cfg.ID, w.id)
		ents[i] = &raftpb.Entry{Data: w.data}
	}
	n.stepped(f, ws, n.rn.Step(&raftpb.Message{Type: raftpb.MsgProp.Enum(), From: new(n.cfg.ID), Entries: ents}))
}

// stepped records what raft did with proposals: took them, dropped them
// (no leader, a transfer in progress, too much uncommitted: nothing was
// logged, so they are held and stepped again when a leader is known, until
// their deadline), or refused them otherwise (answered with the error).
func (n *Node) stepped(f *runtime.Fiber, ws []*waiter, err error) {
	for _, w := range ws {
		switch {
		case err == nil:
			n.waits.setState(w, waitStepped)
			w.gen = n.appendSeq
		case errors.Is(err, raft.ErrProposalDropped):
			n.waits.setState(w, waitHeld)
		default:
			n.waits.trigger(f, w.id, 0, nil, fmt.Errorf("node: propose: %w", err))
		}
	}
}

// askReads sends one ReadIndex for reads; with no leader known (raft
// drops a read index silently then) they are held for one.
func (n *Node) askReads(reads []*waiter) {
	if len(reads) == 0 {
		return
	}
	if !n.leaderKnown() {
		for _, w := range reads {
			n.waits.setState(w, waitHeld)
		}
		return
	}
	n.readRounds++
	for _, w := range reads {
		w.round = n.readRounds
		n.waits.setState(w, waitStepped)
	}
	n.rn.ReadIndex(binary.BigEndian.AppendUint64(nil, n.readRounds))
}

// noteSoftState records the leader and role a Ready reports. A new leader
// is asked again for the reads whose round the old one had not answered
// (it may never), and held waiters are stepped again once one is known.
func (n *Node) noteSoftState(ss *raft.SoftState) {
	if ss == nil {
		return
	}
	if ss.Lead != n.lead || ss.RaftState != raft.StateFollower {
		// Whoever leads now made itself known this term.
		n.confirming = false
	}
	if ss.Lead != n.lead {
		n.lostTicks = 0 // a new leader was heard from, or the old one lost (lost.go)
		n.log.Info("node: leader changed", "leader", fmt.Sprintf("%x", ss.Lead), "was", fmt.Sprintf("%x", n.lead))
		for _, w := range n.waits.collect(waitRead, func(w *waiter) bool { return w.state == waitStepped && !w.known }) {
			w.round = 0
			n.waits.setState(w, waitHeld)
		}
	}
	n.lead, n.role = ss.Lead, ss.RaftState
	if n.waits.held > 0 && n.leaderKnown() {
		n.restepDue = true
	}
}

// handleReady hands raft's Ready out as its asynchronous-storage protocol
// requires (go.etcd.io/raft/v3 doc.go, "Usage with Asynchronous Storage
// Writes"): the messages for other members are sent at once; the log
// write (MsgStorageAppend: entries, hard state, a received snapshot, and
// the responses that may go only once it is durable) is queued for the
// append fiber; the committed entries (MsgStorageApply) are applied here,
// in log order, and their response stepped.
//
// Sending at once is safe because raft itself holds back every message
// that promises durable state: a member's acknowledgement of an append
// (MsgAppResp, to the leader or to itself) and its votes travel inside the
// MsgStorageAppend and go out only when the append fiber's save returns
// (appended). So a leader sends its entries before its own fsync (raft
// thesis 10.2.1; etcd's server does the same): a commit waits for the
// slowest of a quorum's fsyncs, not for the leader's and then the
// followers' in turn; and the leader counts itself toward a commit only
// once its own save is durable.
//
// Only committed entries this member holds durably are in the
// MsgStorageApply (raft applies nothing from its unstable log in this
// mode), so whatever committed is applied and answered in the turn raft
// learns it, however many saves are in flight: what applyDurable did under
// the synchronous protocol is the rule here.
func (n *Node) handleReady(f *runtime.Fiber, rd raft.Ready) error {
	n.noteSoftState(rd.SoftState)
	n.group.settled = 0
	var apply *raftpb.Message
	var out []*raftpb.Message // a Net may keep the slice: not reused
	for _, m := range rd.Messages {
		switch m.GetTo() {
		case raft.LocalAppendThread:
			n.queueAppend(f, m, n.role == raft.StateLeader && len(out) > 0)
		case raft.LocalApplyThread:
			apply = m
		default:
			out = append(out, m)
			if t := m.GetType(); t != raftpb.MsgHeartbeat && t != raftpb.MsgHeartbeatResp {
				n.rouse(f)
			}
		}
	}
	if len(out) > 0 {
		n.cfg.Net.Send(f, out)
	}
	if apply != nil {
		if err := n.applyEntries(f, apply.GetEntries()); err != nil {
			return err
		}
		n.stepLocal(apply.GetResponses())
		if err := n.compactApplied(); err != nil {
			return err
		}
	}
	n.noteReadStates(rd.ReadStates)
	n.answerWaits(f)
	if g := &n.group; g.settled > 0 {
		g.concurrency = g.settled + g.queued
		g.gatherDue = true
	}
	return n.maybeSnapshot(f)
}

// stepLocal steps responses raft addressed to this member (from its
// append or apply work).
func (n *Node) stepLocal(msgs []*raftpb.Message) {
	for _, m := range msgs {
		if err := n.rn.Step(m); err != nil && !errors.Is(err, raft.ErrStepPeerNotFound) {
			n.log.Debug("node: local message not stepped", "type", m.GetType().String(), "err", err)
		}
	}
}

// noteReadStates gives the reads of each round raft answered their index.
func (n *Node) noteReadStates(rss []raft.ReadState) {
	for _, rs := range rss {
		if len(rs.RequestCtx) != 8 {
			continue
		}
		round := binary.BigEndian.Uint64(rs.RequestCtx)
		for _, w := range n.waits.collect(waitRead, func(w *waiter) bool { return w.round == round && !w.known }) {
			w.known, w.index = true, rs.Index
		}
	}
}

// answerWaits answers, after a Ready, the reads whose index is applied, the
// transfers whose target leads and the conditions that hold.
func (n *Node) answerWaits(f *runtime.Fiber) {
	for _, w := range n.waits.collect(waitRead, func(w *waiter) bool { return w.known && w.index <= n.applied }) {
		n.waits.trigger(f, w.id, w.index, nil, nil)
	}
	for _, w := range n.waits.collect(waitTransfer, func(w *waiter) bool { return n.lead == w.to }) {
		n.waits.trigger(f, w.id, 0, nil, nil)
	}
	for _, w := range n.waits.collect(waitCond, func(w *waiter) bool { return w.cond() }) {
		n.waits.trigger(f, w.id, 0, nil, nil)
	}
}

// expire answers the waiters whose deadline passed: a proposal lost with a
// leader, a read whose round never came back.
func (n *Node) expire(f *runtime.Fiber, now time.Time) {
	for _, w := range n.waits.collect(0, func(w *waiter) bool { return now.After(w.deadline) }) {
		n.waits.trigger(f, w.id, 0, nil, n.timeoutErr(w))
	}
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
