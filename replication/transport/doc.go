// Package transport carries raft messages (go.etcd.io/raft/v3's
// raftpb.Message) between the members of a wo replication group.
//
// TCP is the real transport: the peer port is a fiber listener
// (runtime.Listen), every peer has one outbound fiber connection
// (runtime.Dial) written by a writer fiber of its own, and frames are
// length-prefixed (a 4-byte big-endian length, a kind byte, a body). All the
// messages queued for a peer while its writer was busy (every message of a
// Ready, at least) go out as one batch in one write. A dropped connection is
// redialled with exponential backoff, and raft hears the peer was
// unreachable. Snapshots travel in chunks on a connection of their own, with
// a CRC32C over the whole and an acknowledgement at the end, so a large
// snapshot never delays heartbeats. Frames over a size limit, bad frames and
// messages that lie about their sender close that one connection with a log
// line; nothing a peer sends can crash the member.
//
// One transport carries any number of raft groups (multi-raft): group 0
// is the TCP's own Net; TCP.Group adds others on its shard, and Shared
// lets groups on other shards use it through two actors: such a group
// encodes its messages on its own shard, a frame body per peer, and the
// transport writes the bytes as they are. Every group shares the one
// message connection per peer pair; frames of groups other than 0 carry
// the group number. Heartbeats and their answers, of every group, go
// coalesced: a run of them in one beats frame of a few bytes each
// (beats.go), to a listener whose helloAck says it reads them.
//
// Members authenticate each other with mutual TLS (crypto/tls over the fiber
// connection; OpenTLS reads the PEM files named in the settings, and reads
// them again when they change, at the next handshake: the key pair and the
// CA bundle, so both a renewal and a CA rotation need no restart). Without
// certificates the peer port is plaintext and New logs a warning saying so:
// that is for a single machine only.
//
// Tests of whole groups run without it: transporttest.Memory is an
// in-process network, and transporttest.Faults wraps any Net with
// partitions, random drops and delays that tests switch on and off.
//
// The wire format is specified in docs/replication.md.
//
// The worker runs it under dbowner; docs/replication.md says what remains.
package transport
