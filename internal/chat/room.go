package chat

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// Table holds every room's history: one record per message, keyed by room
// and sequence number so that a room's messages are one range of the primary
// key, in order (the last N are a reverse stream of that range).
const Table = "chat_messages"

// Schema is the history table's schema.
var Schema = engine.Schema{
	Name: Table,
	Fields: []engine.Field{
		{Name: "id", Kind: engine.KindString}, // "{" + room + "}/" + 16 hex digits of seq
		{Name: "room", Kind: engine.KindString},
		{Name: "seq", Kind: engine.KindInt},
		{Name: "nick", Kind: engine.KindString},
		{Name: "text", Kind: engine.KindString},
		{Name: "at", Kind: engine.KindTime},
	},
	Key: "id",
}

// messageID is a message's key. The room in braces is the key's hash tag
// (dbowner.PartitionOf): however many partitions the keyspace has, a
// room's messages all live in one, so a batch of them is one
// single-partition transaction and a room's history one partition's
// range. (Before partitions the id was room + "/" + seq: migrate.go.)
func messageID(room string, seq uint64) string {
	return "{" + room + "}/" + fmt.Sprintf("%016x", seq)
}

// roomRange is the primary-key range of a room's messages: '/' < '0', and
// room names have neither '/' nor '}'.
func roomRange(room string) []engine.Filter {
	return []engine.Filter{
		engine.Gt("id", engine.String("{"+room+"}/")),
		engine.Lt("id", engine.String("{"+room+"}0")),
	}
}

// afterRoom is the range of the history table's keys past every message
// of room, whatever form its id has (see migrate.go).
func afterRoom(id, room string) []engine.Filter {
	if isLegacyID(id) {
		return []engine.Filter{engine.Gt("id", engine.String(room+"0"))}
	}
	return []engine.Filter{engine.Gt("id", engine.String("{"+room+"}0"))}
}

type roomOp uint8

const (
	roomJoin roomOp = iota + 1
	roomLeave
	roomSay
	roomHistory
	roomNick
	roomPrune // the sweep: look at the retention bounds (prune.go)
)

// roomMsg is a room actor's mail. Strings, numbers and addresses only: it
// crosses shards as a value.
type roomMsg struct {
	op     roomOp
	member runtime.Addr[*wire] // the connection's outbox
	nick   string              // the sender's nick (roomNick: the new one)
	old    string              // roomNick: the previous nick
	text   string
	n      int
	since  uint64   // roomJoin, roomHistory: replay the messages after this seq instead of the last n
	ref    traceRef // the sender's span (zero: not traced)
}

type member struct {
	addr runtime.Addr[*wire]
	nick string
}

// room is the actor for one chat room, placed by its name (SpawnKeyed). It
// owns the member list and the sequence counter; the history lives in the
// database, written before a message is delivered to anyone, so a message
// somebody saw is a message that survives a restart.
type room struct {
	name    string
	db      *dbowner.DB
	dir     runtime.Addr[dirMsg]
	history int // replayed on join
	members []member
	seq     uint64 // last sequence number used
	loaded  bool   // seq has been read from the database

	tr trace.Tracer // nil: tracing off
	// For the message being handled: the database handle its calls go
	// through (r.db, or a copy whose spans are children of span), and the
	// room's span (nil when the message is not traced).
	call *dbowner.DB
	span trace.Span

	// queue is the room's mail not yet handled, in arrival order, and
	// working says a worker fiber is handling it (see Receive).
	queue    []roomMsg
	working  bool
	maxBatch int // sayBatchLimit

	// Retention (prune.go): the bounds, the lowest seq that may still be
	// stored (0: not known yet), whether a prune fiber runs, and when the
	// age bound was last looked at.
	retainCount int
	retainAge   time.Duration
	low         uint64
	pruning     bool
	ageChecked  time.Time
	stats       *counters
	log         *slog.Logger
}

// sayBatchLimit is how many messages one history write may carry: a quarter
// of a connection's queue, so that a batch delivered at once never fills
// the queue of a reader that keeps up (a room's messages arrive in bursts
// of a batch; a reader's fiber drains its queue between them).
func sayBatchLimit(queueLen int) int { return max(1, queueLen/4) }

// Receive queues m for the room's worker fiber, starting one if none runs.
// The worker handles the queue in order, as Receive once did, with one
// difference: messages said back to back are made durable together, in one
// transaction (sayBatch), then delivered in order. A room that handled one
// message per commit was bound by the commit's latency: its messages
// queued behind each other's fsyncs while the owner's group commit had room
// for all of them.
func (r *room) Receive(f *runtime.Fiber, m roomMsg) {
	r.queue = append(r.queue, m)
	if !r.working {
		r.working = true
		runtime.Go(f, r.work)
	}
}

// work drains the queue. It runs on the room's shard, so it and Receive
// never run at once; between its parks, Receive may queue more.
func (r *room) work(f *runtime.Fiber) {
	defer func() { r.working = false }()
	for len(r.queue) > 0 {
		if n := r.sayRun(); n > 1 {
			r.sayBatch(f, r.queue[:n])
			r.dequeue(n)
			r.maybePrune(f)
			continue
		}
		m := r.queue[0]
		r.dequeue(1)
		r.handle(f, m)
		r.maybePrune(f)
	}
}

// sayRun counts the untraced messages at the head of the queue (at most
// maxBatch) that can share one write. A traced message keeps its own
// write, so its trace shows its own database call.
func (r *room) sayRun() int {
	n := 0
	for n < len(r.queue) && n < r.maxBatch && r.queue[n].op == roomSay && !r.queue[n].ref.valid() {
		n++
	}
	return n
}

func (r *room) dequeue(n int) {
	clear(r.queue[:n])
	r.queue = r.queue[n:]
	if len(r.queue) == 0 {
		r.queue = nil
	}
}

func (r *room) handle(f *runtime.Fiber, m roomMsg) {
	if m.op == roomPrune {
		return // work calls maybePrune after every unit of work
	}
	ctx, sp := r.startSpan(f, m)
	r.call, r.span = r.db, sp
	if sp != nil {
		r.call = r.db.WithContext(ctx)
		defer sp.End()
	}
	if !r.loaded {
		if err := r.load(f); err != nil {
			r.fail(f, m.member, "room history unavailable: "+err.Error())
			return
		}
	}
	switch m.op {
	case roomJoin:
		r.join(f, m)
	case roomLeave:
		r.leave(f, m)
	case roomSay:
		r.say(f, m)
	case roomHistory:
		if m.since > 0 {
			r.replaySince(f, m.member, m.since)
			break
		}
		n := m.n
		if n <= 0 {
			n = r.history
		}
		r.replay(f, m.member, n)
	case roomNick:
		if i := r.find(m.member); i >= 0 {
			r.members[i].nick = m.nick
			r.broadcast(f, Event{Kind: EvInfo, Text: m.old + " is now known as " + m.nick})
		}
	}
}

// load reads the last sequence number of the room from the database,
// after moving what it stored under ids of the old form (migrate.go).
func (r *room) load(f *runtime.Fiber) error {
	if err := r.migrate(f); err != nil && !errors.Is(err, engine.ErrNoTable) {
		return fmt.Errorf("chat: room %s: %w", r.name, err)
	}
	res, err := r.call.Query(f, engine.Query{Table: Table, Where: roomRange(r.name), Desc: true, Limit: 1})
	if errors.Is(err, engine.ErrNoTable) {
		// The first room ever: make the history table (another room may
		// have just made it).
		if err := r.call.CreateTable(f, Schema); err != nil && !errors.Is(err, engine.ErrTableExists) {
			return fmt.Errorf("chat: create table %q: %w", Table, err)
		}
		r.loaded = true
		return nil
	}
	if err != nil {
		return fmt.Errorf("chat: room %s: reading its last message: %w", r.name, err)
	}
	if len(res.Records) == 1 {
		r.seq = uint64(res.Records[0].Get("seq").Int())
	}
	r.loaded = true
	return nil
}

func (r *room) find(a runtime.Addr[*wire]) int {
	return slices.IndexFunc(r.members, func(m member) bool { return m.addr == a })
}

// fail tells one member of an error, which is also the room span's status.
func (r *room) fail(f *runtime.Fiber, to runtime.Addr[*wire], text string) {
	if r.span != nil {
		r.span.SetStatus(codes.Error, text)
	}
	r.tell(f, to, Event{Kind: EvError, Text: text})
}

func (r *room) tell(f *runtime.Fiber, to runtime.Addr[*wire], ev Event) {
	ev.Room = r.name
	if ev.Nick == "" {
		ev.Nick = ServerNick
	}
	runtime.Send(f, to, ev.wire())
}

// broadcast sends ev to every member, encoded once for all of them.
func (r *room) broadcast(f *runtime.Fiber, ev Event) {
	ev.Room = r.name
	if ev.Nick == "" {
		ev.Nick = ServerNick
	}
	w := ev.wire()
	for _, m := range r.members {
		runtime.Send(f, m.addr, w)
	}
}

func (r *room) join(f *runtime.Fiber, m roomMsg) {
	if r.find(m.member) >= 0 {
		r.tell(f, m.member, Event{Kind: EvInfo, Text: "you are already in #" + r.name})
		return
	}
	if m.since > 0 {
		r.replaySince(f, m.member, m.since)
	} else {
		r.replay(f, m.member, r.history)
	}
	r.members = append(r.members, member{addr: m.member, nick: m.nick})
	r.broadcast(f, Event{Kind: EvInfo, Text: m.nick + " joined (" + strconv.Itoa(len(r.members)) + " here)"})
	runtime.Send(f, r.dir, dirMsg{op: dirCount, name: r.name, n: len(r.members)})
}

func (r *room) leave(f *runtime.Fiber, m roomMsg) {
	i := r.find(m.member)
	if i < 0 {
		return
	}
	r.members = slices.Delete(r.members, i, i+1)
	r.tell(f, m.member, Event{Kind: EvInfo, Text: "you left #" + r.name})
	r.broadcast(f, Event{Kind: EvInfo, Text: m.nick + " left (" + strconv.Itoa(len(r.members)) + " here)"})
	runtime.Send(f, r.dir, dirMsg{op: dirCount, name: r.name, n: len(r.members)})
}

// say makes the message durable, then delivers it to every member. The
// insert is an ordinary DB call: from a room on another shard it is the hop
// to the owner shard, traced as such; messages of all rooms share the
// owner's group commits.
func (r *room) say(f *runtime.Fiber, m roomMsg) {
	if r.find(m.member) < 0 {
		r.fail(f, m.member, "you are not in #"+r.name+" (/join "+r.name+")")
		return
	}
	seq := r.seq + 1
	at := time.Now()
	_, err := r.call.Insert(f, Table, historyRecord(r.name, seq, m.nick, m.text, at))
	if err != nil {
		r.fail(f, m.member, "message not stored, not sent: "+err.Error())
		return
	}
	r.seq = seq
	if r.span != nil {
		r.span.SetAttributes(semconv.MessagingMessageID(messageID(r.name, seq)))
	}
	r.broadcast(f, Event{Kind: EvMessage, Nick: m.nick, Text: m.text, Seq: seq, At: at.UnixNano()})
}

// sayBatch is say for several untraced messages: one transaction inserts
// them all (all or nothing), then each is delivered, in order. A sender who
// is not in the room is told so, as by say, and its message is not stored.
func (r *room) sayBatch(f *runtime.Fiber, ms []roomMsg) {
	r.call, r.span = r.db, nil
	if !r.loaded {
		if err := r.load(f); err != nil {
			for _, m := range ms {
				r.fail(f, m.member, "room history unavailable: "+err.Error())
			}
			return
		}
	}
	at := time.Now()
	seq := r.seq
	b := make(engine.Batch, 0, len(ms))
	said := make([]roomMsg, 0, len(ms))
	for _, m := range ms {
		if r.find(m.member) < 0 {
			r.fail(f, m.member, "you are not in #"+r.name+" (/join "+r.name+")")
			continue
		}
		seq++
		b = append(b, engine.Insert(Table, historyRecord(r.name, seq, m.nick, m.text, at)))
		said = append(said, m)
	}
	if len(b) == 0 {
		return
	}
	if _, err := r.db.Tx(f, b); err != nil {
		for _, m := range said {
			r.fail(f, m.member, "message not stored, not sent: "+err.Error())
		}
		return
	}
	for i, m := range said {
		r.broadcast(f, Event{Kind: EvMessage, Nick: m.nick, Text: m.text, Seq: r.seq + uint64(i) + 1, At: at.UnixNano()})
	}
	r.seq = seq
}

// historyRecord is one message's record in the history table.
func historyRecord(room string, seq uint64, nick, text string, at time.Time) map[string]engine.Value {
	return map[string]engine.Value{
		"id":   engine.String(messageID(room, seq)),
		"room": engine.String(room),
		"seq":  engine.Int(int64(seq)),
		"nick": engine.String(nick),
		"text": engine.String(text),
		"at":   engine.Time(at),
	}
}

// replay sends the last n messages, oldest first, to one member.
func (r *room) replay(f *runtime.Fiber, to runtime.Addr[*wire], n int) {
	if n <= 0 || r.seq == 0 {
		return
	}
	res, err := r.call.Query(f, engine.Query{Table: Table, Where: roomRange(r.name), Desc: true, Limit: n})
	if err != nil {
		r.fail(f, to, "history unavailable: "+err.Error())
		return
	}
	if r.span != nil {
		r.span.SetAttributes(semconv.MessagingBatchMessageCount(len(res.Records)))
	}
	r.tellRecords(f, to, res.Records)
}

// tellRecords sends records (newest first, as a descending query gives
// them) to one member, oldest first, as replayed messages.
func (r *room) tellRecords(f *runtime.Fiber, to runtime.Addr[*wire], recs []engine.Record) {
	for i := len(recs) - 1; i >= 0; i-- {
		rec := recs[i]
		r.tell(f, to, Event{
			Kind: EvMessage, History: true,
			Nick: rec.Get("nick").Str(), Text: rec.Get("text").Str(),
			Seq: uint64(rec.Get("seq").Int()), At: rec.Get("at").Time().UnixNano(),
		})
	}
}

// replaySince sends the messages after seq since, oldest first, to one
// member: what a client that saw since missed while it was away. At most
// MaxHistory are sent, the latest; the client is told when older ones were
// left out.
func (r *room) replaySince(f *runtime.Fiber, to runtime.Addr[*wire], since uint64) {
	if since >= r.seq {
		return
	}
	res, err := r.call.Query(f, engine.Query{Table: Table, Where: []engine.Filter{
		engine.Gt("id", engine.String(messageID(r.name, since))),
		roomRange(r.name)[1],
	}, Desc: true, Limit: MaxHistory})
	if err != nil {
		r.fail(f, to, "history unavailable: "+err.Error())
		return
	}
	if r.span != nil {
		r.span.SetAttributes(semconv.MessagingBatchMessageCount(len(res.Records)))
	}
	if n := len(res.Records); n > 0 {
		if first := uint64(res.Records[n-1].Get("seq").Int()); first > since+1 {
			r.tell(f, to, Event{Kind: EvInfo, Text: strconv.FormatUint(first-since-1, 10) + " earlier messages since #" +
				strconv.FormatUint(since, 10) + " are not replayed (pruned, or more than " + strconv.Itoa(MaxHistory) + " missed)"})
		}
	}
	r.tellRecords(f, to, res.Records)
}

type dirOp uint8

const (
	dirLookup  dirOp = iota + 1 // find or create a room
	dirList                     // the rooms and their sizes
	dirCount                    // a room reports its member count
	dirClaim                    // a connection asks for a nick
	dirRelease                  // a connection gives its nick up (it ended)
	dirSweep                    // tell every room to look at its retention
	dirHold                     // the idle-room pruner asks for a room without an actor (prune.go)
	dirUnhold                   // it is done with the room for now
)

// dirMsg is the directory's mail.
type dirMsg struct {
	op      dirOp
	name    string
	n       int
	lookup  runtime.Reply[dirReply]
	listing runtime.Reply[string]
	member  runtime.Addr[*wire] // dirClaim, dirRelease: the connection
	held    runtime.Reply[bool] // dirHold: true when the room has an actor (not held)
}

type dirReply struct {
	room runtime.Addr[roomMsg]
	err  error
}

// ErrTooManyRooms is the answer to a /join that would create a room past
// Options.MaxRooms.
var ErrTooManyRooms = errors.New("too many rooms")

// directory maps room names to room actors. It is consulted once per /join
// (the connection keeps the address while it stays in the room); the rooms
// themselves are placed by key, over every shard.
//
// It also holds the nicks: a nick belongs to one connection at a time
// (compared without case, so "Ann" cannot pass for "ann"). nicks maps a
// nick's key to its holder, held a connection to its nick's key.
type directory struct {
	svc     *Service
	rooms   map[string]runtime.Addr[roomMsg]
	members map[string]int
	nicks   map[string]runtime.Addr[*wire]
	held    map[runtime.Addr[*wire]]string

	// pruning holds the rooms without an actor that the idle-room pruner
	// is deleting from (prune.go), each with the lookups that wait for it
	// to let go: an actor made meanwhile would load the room's last
	// sequence number while the pruner may delete it.
	pruning map[string][]dirMsg
}

// ErrNickTaken is the answer to a /nick another connection holds.
var ErrNickTaken = errors.New("nick taken")

// claim gives nick to member, releasing the nick it held before.
func (d *directory) claim(nick string, member runtime.Addr[*wire]) error {
	key := strings.ToLower(nick)
	if holder, ok := d.nicks[key]; ok && holder != member {
		return fmt.Errorf("%w: %s is held by another connection; pick another nick", ErrNickTaken, nick)
	}
	d.release(member)
	d.nicks[key] = member
	d.held[member] = key
	return nil
}

func (d *directory) release(member runtime.Addr[*wire]) {
	if key, ok := d.held[member]; ok {
		delete(d.nicks, key)
		delete(d.held, member)
	}
}

func (d *directory) Receive(f *runtime.Fiber, m dirMsg) {
	switch m.op {
	case dirLookup:
		a, ok := d.rooms[m.name]
		if w, held := d.pruning[m.name]; !ok && held {
			d.pruning[m.name] = append(w, m)
			return
		}
		if !ok {
			if len(d.rooms) >= d.svc.opts.MaxRooms {
				m.lookup.Send(f, dirReply{err: fmt.Errorf("%w: the server holds %d rooms; join an existing one (/rooms)", ErrTooManyRooms, len(d.rooms))})
				return
			}
			o := &d.svc.opts
			a = runtime.SpawnKeyed[roomMsg](f, m.name, &room{name: m.name, db: d.svc.db, dir: d.svc.dir, history: o.History, tr: d.svc.tr,
				maxBatch: sayBatchLimit(o.QueueLen), retainCount: o.RetainCount, retainAge: o.RetainAge, stats: &d.svc.stats, log: o.Logger})
			d.rooms[m.name] = a
			d.svc.stats.rooms.Store(int64(len(d.rooms)))
		}
		m.lookup.Send(f, dirReply{room: a})
	case dirCount:
		d.members[m.name] = m.n
	case dirClaim:
		m.lookup.Send(f, dirReply{err: d.claim(m.name, m.member)})
	case dirRelease:
		d.release(m.member)
	case dirSweep:
		for _, a := range d.rooms {
			runtime.Send(f, a, roomMsg{op: roomPrune})
		}
	case dirHold:
		if _, ok := d.rooms[m.name]; ok {
			m.held.Send(f, true)
			return
		}
		if d.pruning == nil {
			d.pruning = map[string][]dirMsg{}
		}
		if _, ok := d.pruning[m.name]; !ok {
			d.pruning[m.name] = nil
		}
		m.held.Send(f, false)
	case dirUnhold:
		waiting, ok := d.pruning[m.name]
		if !ok {
			return
		}
		delete(d.pruning, m.name)
		for _, w := range waiting {
			d.Receive(f, w)
		}
	case dirList:
		names := make([]string, 0, len(d.rooms))
		for name := range d.rooms {
			names = append(names, name)
		}
		slices.Sort(names)
		var b strings.Builder
		if len(names) == 0 {
			b.WriteString("no rooms yet (/join NAME makes one)")
		} else {
			b.WriteString("rooms:")
		}
		for _, name := range names {
			fmt.Fprintf(&b, " #%s (%d)", name, d.members[name])
		}
		m.listing.Send(f, b.String())
	}
}
