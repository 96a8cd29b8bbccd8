package chat

import (
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

// sweep asks every room, every ageCheckEvery, to look at its bounds, so
// that a room nobody talks in still loses what grows older than RetainAge.
// It runs for the service's life, on the shard of the fiber given to Start.
func (s *Service) sweep(f *runtime.Fiber) {
	every := ageCheckEvery(s.opts.RetainAge)
	for !f.Stopping() {
		runtime.Sleep(f, every)
		if f.Stopping() {
			return
		}
		runtime.Send(f, s.dir, dirMsg{op: dirSweep})
	}
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
	for range maxPruneBatches {
		if f.Stopping() {
			return
		}
		more, err := r.pruneOnce(f)
		if err != nil {
			r.log.Warn("chat: pruning a room's history", "room", r.name, "err", err)
			return
		}
		if !more {
			return
		}
		runtime.Yield(f)
	}
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
