package chat

import (
	"fmt"
	"strings"

	"github.com/writeonce/wo/dbowner"
	"github.com/writeonce/wo/dbowner/engine"
	"github.com/writeonce/wo/runtime"
)

// Before the keyspace had partitions a message's id was room + "/" + seq,
// with no hash tag: in a partitioned database a room's messages would be
// spread over every partition, and a batch of them refused as a
// cross-partition transaction. Such ids sort below every tagged one ('{'
// is above every character a room name may hold), so they are found by
// range. A room moves its own the first time it loads (room.load: its
// actor, or the idle-room pass while it holds the room), a batch at a
// time: the tagged copies are written first (one transaction, in the
// room's partition), then the old ids deleted (one transaction per
// partition they fall in). A crash between the two leaves both, and the
// next load writes the copies again (Put) and deletes the old ones: no
// message is lost or doubled.

// migrateBatch is how many messages one step of a migration moves.
const migrateBatch = 256

func isLegacyID(id string) bool { return !strings.HasPrefix(id, "{") }

// legacyRange is the key range of a room's messages stored with the old ids.
func legacyRange(room string) []engine.Filter {
	return []engine.Filter{
		engine.Gt("id", engine.String(room+"/")),
		engine.Lt("id", engine.String(room+"0")),
	}
}

// migrate moves the room's messages stored under the old ids to tagged
// ones.
func (r *room) migrate(f *runtime.Fiber) error {
	db, room := r.call, r.name
	for {
		res, err := db.Query(f, engine.Query{Table: Table, Where: legacyRange(room), Limit: migrateBatch})
		if err != nil {
			return fmt.Errorf("finding messages stored under the old ids: %w", err)
		}
		if len(res.Records) == 0 {
			return nil
		}
		put := make(engine.Batch, 0, len(res.Records))
		del := make(map[int]engine.Batch)
		for _, rec := range res.Records {
			seq := uint64(rec.Get("seq").Int())
			put = append(put, engine.Put(Table, historyRecord(room, seq, rec.Get("nick").Str(), rec.Get("text").Str(), rec.Get("at").Time())))
			old := rec.Get("id")
			p := dbowner.PartitionOf(old, db.Partitions())
			del[p] = append(del[p], engine.Delete(Table, old))
		}
		if _, err := db.Tx(f, put); err != nil {
			return fmt.Errorf("copying %d messages to tagged ids: %w", len(put), err)
		}
		for _, b := range del {
			if _, err := db.Tx(f, b); err != nil {
				return fmt.Errorf("deleting %d messages' old ids: %w", len(b), err)
			}
		}
		r.stats.migrated.Add(int64(len(put)))
	}
}
