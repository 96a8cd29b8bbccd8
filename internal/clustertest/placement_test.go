package clustertest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
)

// Three worker processes of four partitions, each partition but 0 held by
// two of them (cluster.replication_factor 2), under the 64-client load
// spread over the three: a request for a partition its member does not
// hold is forwarded to a holder over the peer port. Each member keeps logs
// only for the partitions it holds; no acknowledged write is missing when
// read through any member (forwarded where it does not hold the key); the
// history of register operations is linearizable (porcupine). Each member
// then backs up the whole database, the partition it does not hold read
// from a holder.
func TestPartitionsOnFewerMembersUnderLoad(t *testing.T) {
	const parts, rf = 4, 2
	x := newMixed(t)
	c := Start(t, Options{Setup: x.set, Env: []string{fmt.Sprintf("WO_PARTITIONS=%d", parts), fmt.Sprintf("WO_REPLICATION_FACTOR=%d", rf)}})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	start := time.Now()
	l := &load{c: c, h: NewHistory()}
	stopLoad := l.start(ctx, writers)
	defer stopLoad()
	if !l.waitAcks(ctx, 2000, 2*time.Minute) {
		t.Fatal("fewer than 2,000 writes acknowledged in two minutes")
	}
	stopLoad()
	// Partition 0 is on every member; the other three partitions' six
	// replicas are two a member: each member holds three partitions and
	// has logs for those only.
	for _, m := range c.Running() {
		v, err := m.clusterWithin(ctx, 5*time.Second)
		must(t, err)
		held := 0
		for p, ps := range v.Partitions {
			_, err := os.Stat(filepath.Join(m.Dir, "p", fmt.Sprintf("%03d", p)))
			if (ps.Role == roleElsewhere) != os.IsNotExist(err) {
				t.Errorf("%s: partition %d is %q here and its log: %v", m, p, ps.Role, err)
			}
			if ps.Role != roleElsewhere {
				held++
			}
		}
		if held != 1+(parts-1)*rf/3 {
			t.Errorf("%s holds %d partitions: %+v", m, held, v.Partitions)
		}
	}
	// The groups' heartbeats and answers went coalesced, as beats, both
	// ways on every member.
	for _, m := range c.Running() {
		for _, name := range []string{"wo_peer_beats_sent_total", "wo_peer_beats_received_total"} {
			n, err := metric(ctx, m, name)
			must(t, err)
			if n == 0 {
				t.Errorf("%s: %s is 0", m, name)
			}
		}
	}
	answered, pendingPuts, checked := l.verify(t, ctx, c)
	// Every member backs up the whole database, reading the partition
	// it does not hold from a holder.
	for _, m := range c.Running() {
		file := filepath.Join(t.TempDir(), "b.wobackup")
		out, err := os.Create(file)
		must(t, err)
		if _, err := m.Admin().Backup(ctx, out, false); err != nil {
			t.Fatalf("%s: backup: %v", m, err)
		}
		must(t, out.Close())
		h, _, err := dbowner.VerifyBackup(file)
		if err != nil || len(h.Partitions) != parts {
			t.Fatalf("%s: the backup: %+v, %v; want %d partitions", m, h, err, parts)
		}
		for p, pt := range h.Partitions {
			if pt.Index == 0 || pt.BodyBytes == 0 {
				t.Errorf("%s: the backup's partition %d: %+v", m, p, pt)
			}
		}
	}
	t.Logf("%d partitions on %d of 3 members in %s: %d writes acknowledged (%d fresh keys checked on %d members), %d register operations answered, %d writes unanswered, %d requests without a definite answer",
		parts, rf, time.Since(start).Round(time.Second), l.acks.Load(), len(l.fresh), checked, answered, pendingPuts, l.errs.Load())
}
