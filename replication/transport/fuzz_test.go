package transport

import (
	"bytes"
	"testing"

	"go.etcd.io/raft/v3/raftpb"
	"google.golang.org/protobuf/proto"
)

// FuzzDecodeFrame feeds arbitrary bytes to the frame reader and every body
// decoder a connection uses. Nothing may panic or allocate past the limit,
// and whatever decodes must encode back to something that decodes the same.
func FuzzDecodeFrame(f *testing.F) {
	body, _ := EncodeMessages(nil, []*raftpb.Message{heartbeat(1, 2, 3), {Type: raftpb.MsgVote.Enum(), From: new(uint64(1)), To: new(uint64(2))}})
	f.Add(append(helloFrame(42, 1, 2), appendFrame(nil, kindMsgs, body)...))
	hdr, _ := encodeSnapHeader(nil, &raftpb.Message{Type: raftpb.MsgSnap.Enum(), Snapshot: &raftpb.Snapshot{Data: []byte("abc")}}, 3)
	f.Add(appendFrame(nil, kindSnapHeader, hdr))
	f.Add(appendFrame(nil, kindHelloAck, encodeHelloAck(0x5eed, 0)))
	f.Add(appendFrame(nil, kindHelloAck, encodeHelloAck(0, ackWantAddr)))
	f.Add(appendFrame(nil, kindPeerAddr, []byte("wo-1.wo-headless.ns.svc:7080")))
	f.Add(appendFrame(nil, kindPeerAddr, []byte("[::1]:0")))
	f.Add(appendFrame(nil, kindHelloAck, []byte{1, 2, 3}))
	f.Add(appendFrame(nil, kindHelloAck, encodeHelloAck(7, ackBeats|ackWantAddr)))
	beats := appendBeat(nil, 0, &raftpb.Message{Type: raftpb.MsgHeartbeat.Enum(), Term: new(uint64(2)), Commit: new(uint64(9))})
	beats = appendBeat(beats, 300, &raftpb.Message{Type: raftpb.MsgHeartbeatResp.Enum(), Term: new(uint64(2)), Context: []byte("ctx"), Reject: new(true), RejectHint: new(uint64(5))})
	f.Add(appendFrame(nil, kindBeats, beats))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 2})
	f.Add(appendFrame(nil, kindMsgs, []byte{3, 1, 0, 0}))
	f.Add(appendFrame(nil, kindGroupMsgs, append(appendGroup(nil, 3), body...)))
	f.Add(appendFrame(nil, kindGroupSnapHeader, append(appendGroup(nil, 70000), hdr...)))
	f.Fuzz(func(t *testing.T, in []byte) {
		fr := &frameReader{r: bytes.NewReader(in), limit: 1 << 16}
		for {
			kind, body, err := fr.next()
			if err != nil {
				return
			}
			switch kind {
			case kindHello:
				if h, err := decodeHello(body); err == nil {
					if h2, err := decodeHello(h.encode()); err != nil || h2 != h {
						t.Fatalf("hello %+v did not round-trip: %+v, %v", h, h2, err)
					}
				}
			case kindMsgs, kindGroupMsgs:
				if kind == kindGroupMsgs {
					g, rest, err := splitGroup(body)
					if err != nil {
						continue
					}
					if g2, _, err := splitGroup(appendGroup(nil, g)); err != nil || g2 != g {
						t.Fatalf("group %d did not round-trip: %d, %v", g, g2, err)
					}
					body = rest
				}
				msgs, err := DecodeMessages(body)
				if err != nil {
					continue
				}
				again, err := EncodeMessages(nil, msgs)
				if err != nil {
					t.Fatalf("re-encode: %v", err)
				}
				back, err := DecodeMessages(again)
				if err != nil || len(back) != len(msgs) {
					t.Fatalf("re-decode: %d messages, %v", len(back), err)
				}
				for i := range msgs {
					if !proto.Equal(msgs[i], back[i]) {
						t.Fatalf("message %d changed in a round trip", i)
					}
				}
			case kindHelloAck:
				if n, fl, err := decodeHelloAck(body); err == nil {
					if n2, fl2, err := decodeHelloAck(encodeHelloAck(n, fl)); err != nil || n2 != n || fl2 != fl {
						t.Fatalf("hello answer nonce %x flags %x did not round-trip: %x %x, %v", n, fl, n2, fl2, err)
					}
				}
			case kindPeerAddr:
				if a, err := decodePeerAddr(body); err == nil {
					if a2, err := decodePeerAddr([]byte(a)); err != nil || a2 != a {
						t.Fatalf("peer address %q did not round-trip: %q, %v", a, a2, err)
					}
				}
			case kindBeats:
				runs, err := decodeBeats(body, nil)
				if err != nil {
					continue
				}
				// What decodes is beatable and decodes the same once
				// encoded again.
				var again []byte
				var msgs []*raftpb.Message
				for _, r := range runs {
					ms, err := beatMessages(r.raw, 1, 2)
					if err != nil || len(ms) != r.n {
						t.Fatalf("a checked run of group %d: %d messages, %v", r.group, len(ms), err)
					}
					for _, m := range ms {
						if !beatable(m) {
							t.Fatalf("a decoded beat is not beatable: %v", m)
						}
						again = appendBeat(again, r.group, m)
					}
					msgs = append(msgs, ms...)
				}
				back, err := decodeBeats(again, nil)
				if err != nil || len(back) != len(runs) {
					t.Fatalf("beats encoded again: %d runs of %d, %v", len(back), len(runs), err)
				}
				i := 0
				for k, r := range back {
					ms, _ := beatMessages(r.raw, 1, 2)
					if r.group != runs[k].group || len(ms) != runs[k].n {
						t.Fatalf("run %d changed in a round trip", k)
					}
					for _, m := range ms {
						if d := sameBeat(m, msgs[i]); d != "" {
							t.Fatalf("beat %d changed in a round trip: %s", i, d)
						}
						i++
					}
				}
			case kindSnapHeader:
				_, _, _ = decodeSnapHeader(body, 1<<20)
			case kindGroupSnapHeader:
				if _, rest, err := splitGroup(body); err == nil {
					_, _, _ = decodeSnapHeader(rest, 1<<20)
				}
			}
		}
	})
}
