package transport

import (
	"bytes"
	"fmt"
	"log/slog"
	"math"
	"net"
	"strings"
	"testing"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/runtime"
)

// beatMsg is a heartbeat (resp false) or its answer from 1 to 2 as raft
// makes them, with wo's mark fields when hint is not 0.
func beatMsg(resp bool, term, commit uint64, ctx []byte, hint uint64) *raftpb.Message {
	m := &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), From: new(uint64(1)), To: new(uint64(2)), Term: new(term), Commit: new(commit), Context: ctx}
	if resp {
		m.Type, m.Commit = raftpb.MsgHeartbeatResp.Enum(), nil
	}
	if hint != 0 {
		m.Reject, m.RejectHint = new(true), new(hint)
	}
	return m
}

// beatMessages is the messages of checked beats from 1 to 2.
func beatMessages(beats []byte, from, to uint64) ([]*raftpb.Message, error) {
	var msgs []*raftpb.Message
	err := eachBeat(beats, from, to, func(m *raftpb.Message) { msgs = append(msgs, m) })
	return msgs, err
}

// sameBeat says how got differs from want in what raft reads of a
// heartbeat or its answer ("" when it does not).
func sameBeat(got, want *raftpb.Message) string {
	g := fmt.Sprint(got.GetType(), got.GetFrom(), got.GetTo(), got.GetTerm(), got.GetCommit(), got.GetReject(), got.GetRejectHint(), got.GetContext())
	w := fmt.Sprint(want.GetType(), want.GetFrom(), want.GetTo(), want.GetTerm(), want.GetCommit(), want.GetReject(), want.GetRejectHint(), want.GetContext())
	if g != w {
		return fmt.Sprintf("got %s, want %s", g, w)
	}
	if got.GetFrom() == 0 || got.From == nil || got.To == nil || got.Term == nil {
		return "From, To or Term unset (raft answers a heartbeat To: m.From)"
	}
	if got.GetType() == raftpb.MsgHeartbeat && got.Commit == nil {
		return "a heartbeat without its commit field"
	}
	return ""
}

// Every heartbeat and answer raft and wo's marks make survives the trip
// through beats, and a frame splits into runs of one group each.
func TestBeatsRoundTrip(t *testing.T) {
	type gm struct {
		g uint32
		m *raftpb.Message
	}
	in := []gm{
		{0, beatMsg(false, 3, 7, nil, 0)},
		{0, beatMsg(true, 3, 0, nil, 0)},
		{1, beatMsg(false, 1, 0, nil, 0)},
		{1, beatMsg(false, math.MaxUint64, math.MaxUint64, []byte("read-index ctx"), 0)},
		{70000, beatMsg(true, 9, 0, []byte{0}, 0)},
		{70000, beatMsg(false, 9, 4, nil, 1)},             // a quiescing heartbeat's mark
		{math.MaxUint32, beatMsg(true, 2, 0, nil, 1<<62)}, // a marked answer
		{math.MaxUint32, beatMsg(true, 2, 0, bytes.Repeat([]byte{7}, maxBeatContext), 0)},
		{1, beatMsg(false, 5, 5, nil, 0)},
	}
	var body []byte
	for _, x := range in {
		if !beatable(x.m) {
			t.Fatalf("%v not beatable", x.m)
		}
		body = appendBeat(body, x.g, x.m)
	}
	runs, err := decodeBeats(body, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantRuns := []struct {
		g uint32
		n int
	}{{0, 2}, {1, 2}, {70000, 2}, {math.MaxUint32, 2}, {1, 1}}
	if len(runs) != len(wantRuns) {
		t.Fatalf("%d runs, want %d", len(runs), len(wantRuns))
	}
	i := 0
	for k, r := range runs {
		if r.group != wantRuns[k].g || r.n != wantRuns[k].n {
			t.Fatalf("run %d: group %d of %d beats, want group %d of %d", k, r.group, r.n, wantRuns[k].g, wantRuns[k].n)
		}
		msgs, err := beatMessages(r.raw, 1, 2)
		if err != nil || len(msgs) != r.n {
			t.Fatalf("run %d: %d messages, %v", k, len(msgs), err)
		}
		for _, m := range msgs {
			if d := sameBeat(m, in[i].m); d != "" {
				t.Errorf("beat %d (group %d): %s", i, in[i].g, d)
			}
			i++
		}
	}
	// A beat is a few bytes where the message was a protobuf of its own.
	hb := beatMsg(false, 3, 1234, nil, 0)
	hb.To, hb.From = new(uint64(0x1d2c3b4a59687786)), new(uint64(0x7a6b5c4d3e2f1009)) // member IDs are random 64-bit
	if b, p := len(appendBeat(nil, 5, hb)), sizeOf(hb); b*3 > p {
		t.Errorf("a heartbeat is %d bytes as a beat, %d as a message: not worth a frame kind", b, p)
	}
}

func TestBeatable(t *testing.T) {
	withIndex := beatMsg(false, 1, 1, nil, 0)
	withIndex.Index = new(uint64(3))
	answerWithCommit := beatMsg(true, 1, 0, nil, 0)
	answerWithCommit.Commit = new(uint64(2))
	for name, m := range map[string]*raftpb.Message{
		"an append":                     heartbeat(1, 2, 3),
		"a vote":                        {Type: raftpb.MsgVote.Enum(), Term: new(uint64(2))},
		"a heartbeat with an index":     withIndex,
		"a context over the bound":      beatMsg(false, 1, 1, make([]byte, maxBeatContext+1), 0),
		"an answer carrying a commit":   answerWithCommit,
		"a snapshot field on an answer": {Type: raftpb.MsgHeartbeatResp.Enum(), Snapshot: &raftpb.Snapshot{}},
	} {
		if beatable(m) {
			t.Errorf("%s is beatable: a beat would lose a field", name)
		}
	}
}

func TestDecodeBeatsRefusesBadInput(t *testing.T) {
	ok := appendBeat(nil, 3, beatMsg(false, 2, 1, nil, 0))
	for _, c := range []struct {
		name, want string
		body       []byte
	}{
		{"empty", "no beat", nil},
		{"group not a varint", "group is not a varint", []byte{0x80}},
		{"group past 32 bits", "group 4294967296", []byte{0x80, 0x80, 0x80, 0x80, 0x10, 0, 1, 1}},
		{"no flags", "no flags", []byte{3}},
		{"unknown flag", "unknown flags 0x40", []byte{3, 0x40, 1, 1}},
		{"no term", "term is not a varint", []byte{3, 0}},
		{"no commit", "commit is not a varint", []byte{3, 0, 1}},
		{"no hint", "reject hint is not a varint", []byte{3, beatHint, 1, 1}},
		{"empty context", "context of 0 bytes", []byte{3, beatContext, 1, 1, 0}},
		{"context past the end", "context of 5 bytes", []byte{3, beatContext, 1, 1, 5, 'a'}},
		{"context over the bound", "context of 1025 bytes", append([]byte{3, beatContext, 1, 1, 0x81, 0x08}, make([]byte, 1025)...)},
		{"an answer with a commit", "answer with commit 9", []byte{3, beatResp, 1, 9}},
		{"a good beat, then a cut one", "term is not a varint", append(append([]byte(nil), ok...), 3, 0)},
	} {
		runs, err := decodeBeats(c.body, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) || runs != nil {
			t.Errorf("%s: %d runs, error %v, want one saying %q", c.name, len(runs), err, c.want)
		}
	}
}

// captureConn is the writer's connection in TestWriteBatchCoalescesBeats:
// it keeps what is written.
type captureConn struct {
	net.Conn
	buf bytes.Buffer
}

func (c *captureConn) Write(b []byte) (int, error) { return c.buf.Write(b) }

// The writer puts a run of heartbeats and answers, whatever their groups
// and whether a group here or on another shard encoded them, in one beats
// frame, keeps them in order with the messages around them, and to a peer
// of a version before beats writes them as messages.
func TestWriteBatchCoalescesBeats(t *testing.T) {
	tcp := &TCP{cfg: Config{ID: 1, Logger: slog.New(slog.DiscardHandler)}.withDefaults()}
	remote := appendBeat(appendBeat(nil, 4, beatMsg(false, 6, 2, nil, 0)), 4, beatMsg(true, 6, 0, []byte("rx"), 0))
	batch := func() []outMsg {
		return []outMsg{
			{group: 0, m: beatMsg(false, 3, 1, nil, 0)},
			{group: 1, m: beatMsg(true, 3, 0, nil, 0)},
			{group: 4, beats: remote, n: 2},
			{group: 2, m: beatMsg(false, 3, 1, nil, 1)},
			{group: 2, m: heartbeat(1, 2, 9)}, // an append: a msgs frame
			{group: 3, m: beatMsg(false, 8, 8, nil, 0)},
		}
	}
	for _, peerReads := range []bool{true, false} {
		c := &captureConn{}
		if err := tcp.writeBatch(c, &peer{id: 2, beats: peerReads}, batch()); err != nil {
			t.Fatal(err)
		}
		fr := &frameReader{r: &c.buf, limit: DefaultMaxFrame}
		var kinds []byte
		var got []string // group:type of every message, in order
		for {
			kind, body, err := fr.next()
			if err != nil {
				break
			}
			kinds = append(kinds, kind)
			var g uint32
			switch kind {
			case kindBeats:
				runs, err := decodeBeats(body, nil)
				if err != nil {
					t.Fatal(err)
				}
				for _, r := range runs {
					msgs, _ := beatMessages(r.raw, 1, 2)
					for _, m := range msgs {
						got = append(got, fmt.Sprintf("%d:%s", r.group, m.GetType()))
					}
				}
				continue
			case kindGroupMsgs:
				g, body, _ = splitGroup(body)
			}
			msgs, err := DecodeMessages(body)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				got = append(got, fmt.Sprintf("%d:%s", g, m.GetType()))
			}
		}
		want := "0:MsgHeartbeat 1:MsgHeartbeatResp 4:MsgHeartbeat 4:MsgHeartbeatResp 2:MsgHeartbeat 2:MsgApp 3:MsgHeartbeat"
		if s := strings.Join(got, " "); s != want {
			t.Errorf("peer reads beats %v: sent %s, want %s", peerReads, s, want)
		}
		wantKinds := []byte{kindBeats, kindGroupMsgs, kindBeats}
		if !peerReads {
			// A frame a group's run, as before beats (group 2's heartbeat
			// and append in one).
			wantKinds = []byte{kindMsgs, kindGroupMsgs, kindGroupMsgs, kindGroupMsgs, kindGroupMsgs}
		}
		if !bytes.Equal(kinds, wantKinds) {
			t.Errorf("peer reads beats %v: frame kinds %v, want %v", peerReads, kinds, wantKinds)
		}
	}
	if n := tcp.Stats.BeatsSent.Load(); n != 6 {
		t.Errorf("BeatsSent %d, want 6 (the old peer's none)", n)
	}
}

// Over real connections, groups on the transport's shard and on another
// send heartbeats and answers as beats; each group hears its own, as raft
// made them. A listener of a version before beats (it never says it reads
// them) hears the same as messages.
func TestTCPBeatsReachTheirGroups(t *testing.T) {
	for _, listenerReads := range []bool{true, false} {
		t.Run(fmt.Sprintf("listener reads beats %v", listenerReads), func(t *testing.T) {
			testRuntime(t, func(f *runtime.Fiber) {
				readBeats = listenerReads
				defer func() { readBeats = true }()
				_, b, ga, gb, stop := groupPair(t, f)
				defer stop()
				const n = 20
				sent := map[uint32][]*raftpb.Message{}
				for i := range uint64(n) {
					for g := range uint32(3) {
						ms := []*raftpb.Message{beatMsg(false, 4, i, nil, 0), beatMsg(true, 4, 0, []byte{byte(g), byte(i)}, uint64(g))}
						if i == n/2 {
							ms = append(ms, heartbeat(1, 2, i)) // an append among them
						}
						sent[g] = append(sent[g], ms...)
						ga[g].send(f, ms...)
					}
				}
				for g := range uint32(3) {
					rec := gb[g].rec
					waitFor(t, f, "group beats", func() bool { return rec.count() >= len(sent[g]) })
					rec.mu.Lock()
					for i, m := range rec.msgs {
						if m.GetType() == raftpb.MsgApp {
							if m.GetIndex() != n/2 {
								t.Errorf("group %d message %d: an append of index %d", g, i, m.GetIndex())
							}
							continue
						}
						if d := sameBeat(m, sent[g][i]); d != "" {
							t.Errorf("group %d message %d: %s", g, i, d)
						}
					}
					rec.mu.Unlock()
				}
				beats := b.tcp.Stats.BeatsReceived.Load()
				if want := int64(3 * n * 2); listenerReads && beats != want || !listenerReads && beats != 0 {
					t.Errorf("BeatsReceived %d (listener reads beats: %v; %d beats sent)", beats, listenerReads, want)
				}
				if r := b.tcp.Stats.ConnsRefused.Load(); r != 0 {
					t.Errorf("%d connections refused", r)
				}
			})
		})
	}
}
