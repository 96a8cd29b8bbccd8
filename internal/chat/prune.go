package chat

import (
	"errors"
	"fmt"
	"time"

	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// Retention. A room's history is bounded by Options.RetainCount messages
// and Options.RetainAge. The room prunes its own history (it owns the
// sequence numbers, so it knows what is past the count without asking): a
// prune fiber, started by the room's worker when the history has grown a
// slack past the count or the age is due a look (the service's sweep makes
// every room look, so idle rooms age too), deletes the oldest
// records in batches, one transaction per batch, and yields between them.
// It runs beside the worker, not in it: while a batch waits for its
// commit, the worker keeps storing and delivering messages, whose writes
// share the owner's group commits with the deletes.

// pruneBatch is how many records one prune transaction deletes: one query
// reads them, one transaction deletes them, never a round trip per message.
const pruneBatch = 256

// maxPruneBatches bounds one prune fiber's run; a history further past its
// bounds (a count lowered across a restart) is finished by the next run.
const maxPruneBatches = 1000

// pruneSlack is how far past RetainCount the history may grow before a
// prune starts: pruning one message per message would be a delete per
// write.
func pruneSlack(count int) uint64 { return uint64(min(pruneBatch, max(1, count/16))) }

// ageCheckEvery is how often a room looks for messages past RetainAge.
func ageCheckEvery(age time.Duration) time.Duration { return min(time.Minute, max(time.Second, age/8)) }

// sweep keeps every room's history in its bounds, joined since the start
// or not. It runs for the service's life, on the shard of the fiber given
// to Start.
//
// A room with an actor (joined since the start) prunes itself after its
// writes; sweep asks each of them, every ageCheckEvery, to look at its age
// bound too, so that a room nobody talks in any more still ages. A room
// without one (nobody joined it since the start) would otherwise keep its
// whole history until its first /join, past a count or age lowered across
// the restart: pruneIdle goes over those rooms at the start and, when
// there is an age bound, every idlePassEvery.
func (s *Service) sweep(f *runtime.Fiber) {
	o := &s.opts
	if o.RetainCount <= 0 && o.RetainAge <= 0 {
		return
	}
	s.pruneIdle(f)
	if o.RetainAge <= 0 {
		return // an idle room does not grow: one pass is enough for the count
	}
	every := ageCheckEvery(o.RetainAge)
	idleDone := time.Now()
	for !f.Stopping() {
		runtime.Sleep(f, every)
		if f.Stopping() {
			return
		}
		runtime.Send(f, s.dir, dirMsg{op: dirSweep})
		if time.Since(idleDone) >= idlePassEvery(o.RetainAge) {
			s.pruneIdle(f)
			idleDone = time.Now()
		}
	}
}

// idlePassEvery is how often pruneIdle goes over the rooms nobody joined
// since the start: each room costs a query even with nothing to prune, so
// not every ageCheckEvery; an hour past the age bound at most.
func idlePassEvery(age time.Duration) time.Duration { return min(time.Hour, max(time.Second, age/8)) }

// maxRoomsPerPass bounds one pass of pruneIdle (a bounded loop; a table with
// more rooms is finished by the next pass).
const maxRoomsPerPass = 1 << 20

// idleHoldBatches is how many prune batches pruneIdleRoom deletes while it
// holds a room: a /join of that room waits at most for these (its lookup is
// queued in the directory), then the room's own actor takes over.
const idleHoldBatches = 4

// pruneIdle goes over every room in the history table, in key order, one
// query of one record per room (the first message past the previous room's
// range), and prunes those without an actor. Rooms with one are left to
// their actor.
func (s *Service) pruneIdle(f *runtime.Fiber) {
	var where []engine.Filter
	for range maxRoomsPerPass {
		if f.Stopping() {
			return
		}
		res, err := s.db.Query(f, engine.Query{Table: Table, Where: where, Limit: 1})
		if errors.Is(err, engine.ErrNoTable) {
			return // nobody ever chatted here
		}
		if err != nil {
			s.opts.Logger.Warn("chat: pruning idle rooms: finding the next room", "err", err)
			return
		}
		if len(res.Records) == 0 {
			return
		}
		name := res.Records[0].Get("room").Str()
		s.pruneIdleRoom(f, name)
		// The next room: every message of this room is below the range
		// afterRoom gives and every other room's (of the same id form) is
		// not.
		where = afterRoom(res.Records[0].Get("id").Str(), name)
		runtime.Yield(f)
	}
}

// pruneIdleRoom prunes one room nobody joined since the start, through the
// same pruneOnce as a room's actor, a few batches at a time while the
// directory holds the room for it (so no actor of the room loads or prunes
// it meanwhile).
func (s *Service) pruneIdleRoom(f *runtime.Fiber, name string) {
	o := &s.opts
	r := &room{name: name, db: s.db, call: s.db, retainCount: o.RetainCount, retainAge: o.RetainAge, stats: &s.stats, log: o.Logger}
	for range maxPruneBatches / idleHoldBatches {
		more, err := s.pruneHeld(f, r)
		if err != nil {
			o.Logger.Warn("chat: pruning an idle room's history", "room", name, "err", err)
			return
		}
		if !more {
			return
		}
		runtime.Yield(f)
	}
}

// pruneHeld asks the directory to hold r's room, and prunes up to
// idleHoldBatches batches if it was idle; it says whether more may be
// past the bounds. A room joined meanwhile is its actor's from then on.
func (s *Service) pruneHeld(f *runtime.Fiber, r *room) (bool, error) {
	active, err := runtime.Ask(f, s.dir, askTimeout, func(rep runtime.Reply[bool]) dirMsg {
		return dirMsg{op: dirHold, name: r.name, held: rep}
	})
	if err != nil {
		// The directory may have granted the hold after all: release it
		// (releasing a room not held does nothing).
		runtime.Send(f, s.dir, dirMsg{op: dirUnhold, name: r.name})
		return false, fmt.Errorf("asking the directory to hold the room: %w", err)
	}
	if active {
		return false, nil
	}
	defer runtime.Send(f, s.dir, dirMsg{op: dirUnhold, name: r.name})
	if !r.loaded {
		if err := r.load(f); err != nil {
			return false, err
		}
	}
	return r.pruneSome(f, idleHoldBatches)
}

// maybePrune starts the prune fiber when the history is due one. Runs on
// the room's worker, after each unit of work.
func (r *room) maybePrune(f *runtime.Fiber) {
	if r.pruning || !r.loaded || r.seq == 0 {
		return
	}
	due := false
	if r.retainCount > 0 {
		low := max(r.low, 1)
		stored := r.seq - low + 1
		due = stored > uint64(r.retainCount)+pruneSlack(r.retainCount)
	}
	if r.retainAge > 0 && time.Since(r.ageChecked) >= ageCheckEvery(r.retainAge) {
		due = true
	}
	if due {
		r.pruning = true
		runtime.Go(f, r.prune)
	}
}

// prune deletes what is past the room's bounds, a batch at a time.
func (r *room) prune(f *runtime.Fiber) {
	defer func() { r.pruning = false }()
	if r.retainAge > 0 {
		r.ageChecked = time.Now()
	}
	if _, err := r.pruneSome(f, maxPruneBatches); err != nil {
		r.log.Warn("chat: pruning a room's history", "room", r.name, "err", err)
	}
}

// pruneSome runs up to n batches of pruneOnce, yielding between them, and
// says whether more may be past the bounds.
func (r *room) pruneSome(f *runtime.Fiber, n int) (bool, error) {
	for i := range n {
		if f.Stopping() {
			return false, nil
		}
		if i > 0 {
			runtime.Yield(f)
		}
		more, err := r.pruneOnce(f)
		if err != nil || !more {
			return false, err
		}
	}
	return true, nil
}

// pruneOnce deletes up to pruneBatch of the oldest records past a bound
// and says whether there may be more.
func (r *room) pruneOnce(f *runtime.Fiber) (bool, error) {
	var keepFrom uint64 // the first seq the count keeps
	if r.retainCount > 0 && r.seq > uint64(r.retainCount) {
		keepFrom = r.seq - uint64(r.retainCount) + 1
	}
	var cutoff time.Time
	if r.retainAge > 0 {
		cutoff = time.Now().Add(-r.retainAge)
	}
	res, err := r.db.Query(f, engine.Query{Table: Table, Where: roomRange(r.name), Limit: pruneBatch})
	if err != nil {
		return false, fmt.Errorf("chat: room %s: reading its oldest messages: %w", r.name, err)
	}
	b := make(engine.Batch, 0, len(res.Records))
	for _, rec := range res.Records {
		seq := uint64(rec.Get("seq").Int())
		if seq >= keepFrom && (cutoff.IsZero() || !rec.Get("at").Time().Before(cutoff)) {
			r.low = seq // the oldest message kept
			break
		}
		b = append(b, engine.Delete(Table, rec.Get("id")))
	}
	if len(b) == 0 {
		if len(res.Records) == 0 {
			r.low = r.seq + 1
		}
		return false, nil
	}
	if _, err := r.db.Tx(f, b); err != nil {
		return false, fmt.Errorf("chat: room %s: deleting %d old messages: %w", r.name, len(b), err)
	}
	r.stats.pruned.Add(int64(len(b)))
	if len(b) == len(res.Records) {
		r.low = uint64(res.Records[len(b)-1].Get("seq").Int()) + 1
	}
	return len(b) == pruneBatch, nil
}
