package dbowner_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/replication/transport"
	"github.com/writeonce/wo/runtime"
)

// TestForwardedCallsAnswerAsLocalOnes: three members of four partitions
// over loopback TCP; member 0 sends calls of every partition to the two
// others (the path a member that does not hold a partition will take).
// A forwarded write is durable and replicated as a local one (read back
// on every member at its version), a forwarded Get and Query answer what
// a local one does, and the errors a caller tests survive the hop: the
// engine's (errors.Is, the message), the transport's (an unknown member),
// a partition the callee does not have.
func TestForwardedCallsAnswerAsLocalOnes(t *testing.T) {
	const parts = 4
	cfg := testConfig(t)
	ids, addrs, peers := bootstrapMembers(t, 3, 0)
	run(t, cfg, func(f *runtime.Fiber) int {
		dbs := make([]*dbowner.DB, 3)
		for i := range dbs {
			db, err := dbowner.Open(f, dbowner.Options{Dir: t.TempDir(), Logger: cfg.Logger, Partitions: parts,
				Cluster: dbowner.Cluster{ID: ids[i], Peers: peers, PeerAddr: addrs[i],
					RequestTimeout: 5 * time.Second, Tick: 20 * time.Millisecond}})
			if err != nil {
				failf(t, "%v", err)
			}
			defer db.Close(f)
			dbs[i] = db
		}
		waitFor(t, f, "the table on every member", func() bool {
			err := dbs[0].CreateTable(f, kvSchema)
			return err == nil || errors.Is(err, engine.ErrTableExists)
		})
		for p := range parts {
			k := keyIn(p, parts)
			to := ids[1+p%2]
			seq, err := dbs[0].ForwardTxForTest(f, to, p, engine.Batch{engine.Insert("kv", kv(k, int64(p)))})
			if err != nil || seq == 0 {
				failf(t, "partition %d: a forwarded insert on %x: %d, %v", p, to, seq, err)
			}
			want := engine.Record{Version: seq, Fields: kv(k, int64(p))}
			for i, db := range dbs {
				if rec, err := db.Get(f, "kv", engine.String(k)); err != nil || !reflect.DeepEqual(rec, want) {
					failf(t, "partition %d: member %d reads %+v, %v; want %+v", p, i, rec, err, want)
				}
			}
			other := ids[2-p%2]
			if rec, err := dbs[0].ForwardGetForTest(f, other, p, "kv", engine.String(k)); err != nil || !reflect.DeepEqual(rec, want) {
				failf(t, "partition %d: a forwarded get on %x: %+v, %v; want %+v", p, other, rec, err, want)
			}
			q := engine.Query{Table: "kv", Where: []engine.Filter{engine.Ge("v", engine.Int(0))}, Limit: 10}
			local, lerr := dbs[0].PartForTest(p).Query(f, q)
			remote, rerr := dbs[0].ForwardQueryForTest(f, other, p, q)
			if lerr != nil || rerr != nil || !reflect.DeepEqual(local, remote) {
				failf(t, "partition %d: a forwarded query: %+v, %v; locally %+v, %v", p, remote, rerr, local, lerr)
			}

			// The engine's errors, as a local call gets them.
			_, lerr = dbs[0].Tx(f, engine.Batch{engine.Insert("kv", kv(k, 1))})
			_, rerr = dbs[0].ForwardTxForTest(f, to, p, engine.Batch{engine.Insert("kv", kv(k, 1))})
			if !errors.Is(rerr, engine.ErrDuplicateKey) || !strings.Contains(lerr.Error(), rerr.Error()) {
				failf(t, "partition %d: a forwarded duplicate insert: %v; locally %v", p, rerr, lerr)
			}
			if _, err := dbs[0].ForwardGetForTest(f, other, p, "kv", engine.String(k+"-missing")); !errors.Is(err, engine.ErrNotFound) {
				failf(t, "partition %d: a forwarded get of a missing key: %v", p, err)
			}
		}
		if _, err := dbs[0].ForwardGetForTest(f, 99, 0, "kv", engine.String("a")); !errors.Is(err, transport.ErrNoAnswer) {
			failf(t, "a call to a member that does not exist: %v", err)
		}
		if _, err := dbs[0].ForwardGetForTest(f, ids[1], parts+3, "kv", engine.String("a")); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("this member has %d", parts)) {
			failf(t, "a call of a partition the member does not have: %v", err)
		}
		return 0
	})
}

// keyIn is a key of partition p of n.
func keyIn(p, n int) string {
	for i := 0; ; i++ {
		if k := fmt.Sprintf("key-%d", i); dbowner.PartitionOf(engine.String(k), n) == p {
			return k
		}
	}
}
