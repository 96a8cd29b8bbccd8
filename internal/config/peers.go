package config

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/writeonce/wo/replication/transport"
)

// MaxOrdinal bounds a member ordinal: it is the high 16 bits of the raft
// member ID (see replication/identity).
const MaxOrdinal = 1<<16 - 1

// Peer is one initial member from cluster.peers: the ordinal it is known by
// (a StatefulSet pod's ordinal) and its peer-port address.
type Peer struct {
	Ordinal int
	Addr    string
}

// ParsePeers parses cluster.peers: comma-separated ordinal=host:port, in
// any order, each ordinal and each address at most once. Spaces around
// entries are ignored; an empty string is no peers (a single worker). The
// error names the entry by position and text.
func ParsePeers(s string) ([]Peer, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var peers []Peer
	byOrdinal := map[int]int{}
	byAddr := map[string]int{}
	err := eachPair(s, "peer", "ordinal=host:port", func(n int, id, addr string) error {
		ord, err := strconv.Atoi(id)
		if err != nil || ord < 0 || ord > MaxOrdinal || id != strconv.Itoa(ord) {
			return fmt.Errorf("ordinal %q: want an integer from 0 to %d without sign or leading zeros", id, MaxOrdinal)
		}
		if err := checkPeerAddr(addr); err != nil {
			return fmt.Errorf("address %q: %w", addr, err)
		}
		if j, dup := byOrdinal[ord]; dup {
			return fmt.Errorf("ordinal %d is also peer %d", ord, j)
		}
		if j, dup := byAddr[addr]; dup {
			return fmt.Errorf("address %s is also peer %d", addr, j)
		}
		byOrdinal[ord], byAddr[addr] = n, n
		peers = append(peers, Peer{Ordinal: ord, Addr: addr})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return peers, nil
}

// checkPeerAddr is transport.CheckPeerAddr: the wire's peer addresses
// (a dialer's, learned from its hello) follow the same rule.
func checkPeerAddr(addr string) error { return transport.CheckPeerAddr(addr) }

// ParseDialMap parses peer.dial_map: comma-separated from=to pairs of
// host:port addresses, rewriting the address the peer transport dials
// (tests run pods' DNS names on loopback). Spaces around entries are
// ignored; an empty string is no rewriting. Each from at most once. The
// error names the entry by position and text.
func ParseDialMap(s string) (map[string]string, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	m := map[string]string{}
	at := map[string]int{}
	err := eachPair(s, "dial map entry", "host:port=host:port", func(n int, from, to string) error {
		for _, a := range []string{from, to} {
			if err := checkPeerAddr(a); err != nil {
				return fmt.Errorf("address %q: %w", a, err)
			}
		}
		if j, dup := at[from]; dup {
			return fmt.Errorf("%s is also entry %d", from, j)
		}
		at[from], m[from] = n, to
		return nil
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// eachPair calls fn on each entry of a comma-separated list of key=value
// entries (cluster.peers, peer.dial_map) with its position from 1 and its
// two sides, spaces trimmed. Errors name the entry as "<what> <n>
// (<entry>)"; want is the entry's form, for the messages.
func eachPair(s, what, want string, fn func(n int, key, value string) error) error {
	for i, raw := range strings.Split(s, ",") {
		n := i + 1
		entry := strings.TrimSpace(raw)
		if entry == "" {
			return fmt.Errorf("%s %d is empty (a stray comma?); want %s,...", what, n, want)
		}
		k, v, ok := strings.Cut(entry, "=")
		if !ok {
			return fmt.Errorf("%s %d (%q): want %s", what, n, entry, want)
		}
		if err := fn(n, strings.TrimSpace(k), strings.TrimSpace(v)); err != nil {
			return fmt.Errorf("%s %d (%q): %w", what, n, entry, err)
		}
	}
	return nil
}

// CheckPeerAddr says what is wrong with a peer address (host:port, a host
// to dial, a port from 1 to 65535), nil when nothing is: the rule
// cluster.peers follows, for other places that take one (the admin API's
// add-member body).
func CheckPeerAddr(addr string) error { return checkPeerAddr(addr) }
