package transport

import (
	"fmt"

	"go.etcd.io/raft/v3/raftpb"
)

// Envelope carries a batch of raft messages between shards, encoded as a
// msgs frame body (the same bytes the TCP transport writes): what an
// in-process network (transporttest.Memory) delivers to a member's inbox. The body is
// built fresh for each envelope and owned by it once sent.
//
//wo:shardsafe
type Envelope struct {
	From uint64
	Body []byte
}

// Messages decodes the batch.
func (e Envelope) Messages() ([]*raftpb.Message, error) {
	msgs, err := DecodeMessages(e.Body)
	if err != nil {
		return nil, fmt.Errorf("transport: envelope from %x: %w", e.From, err)
	}
	return msgs, nil
}
