package config

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestParsePeers(t *testing.T) {
	got, err := ParsePeers(" 0=wo-0.wo:7080, 2=[::1]:7080,1=10.0.0.7:7081 ")
	if err != nil {
		t.Fatal(err)
	}
	want := []Peer{{0, "wo-0.wo:7080"}, {2, "[::1]:7080"}, {1, "10.0.0.7:7081"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if p, err := ParsePeers("  "); p != nil || err != nil {
		t.Fatalf("blank: %v, %v; want no peers", p, err)
	}
}

func TestParsePeersNamesTheBadEntry(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"0=a:1,", "peer 2 is empty"},
		{"0=a:1,,1=b:1", "peer 2 is empty"},
		{"a:1", `peer 1 ("a:1"): want ordinal=host:port`},
		{"x=a:1", `ordinal "x"`},
		{"-1=a:1", `ordinal "-1"`},
		{"01=a:1", "leading zeros"},
		{"65536=a:1", "from 0 to 65535"},
		{"0=a", `address "a": want host:port`},
		{"0=:7080", "the host is empty"},
		{"0=a:0", "port from 1 to 65535"},
		{"0=a:http", "port from 1 to 65535"},
		{"0=a:1,0=b:1", "ordinal 0 is also peer 1"},
		{"0=a:1,1=a:1", "address a:1 is also peer 1"},
	} {
		_, err := ParsePeers(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ParsePeers(%q) = %v, want an error containing %q", c.in, err, c.want)
		}
	}
}

func TestPeerSettings(t *testing.T) {
	clearEnv(t)
	t.Setenv("WO_PEERS", "0=wo-0:7080,1=wo-1:7080")
	c, err := load(t, "--config", writeFile(t, "[cluster]\nstate = \"existing\"\nordinal = 1\n[peer]\naddr = \":7081\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Peers) != 2 || c.Ordinal != 1 || c.ClusterState != "existing" || c.PeerAddr != ":7081" {
		t.Fatalf("got %+v", c)
	}
	if c.Sources["cluster.peers"] != "env WO_PEERS" {
		t.Fatalf("peers from %s", c.Sources["cluster.peers"])
	}
	_, err = load(t, "--config", writeFile(t, ""), "--peers", "0=wo-0:7080,0=wo-1:7080")
	if err == nil || !strings.Contains(err.Error(), "cluster.peers") || !strings.Contains(err.Error(), "flag --peers") {
		t.Fatalf("duplicate ordinal: %v", err)
	}
	_, err = load(t, "--config", writeFile(t, ""), "--cluster-state", "joining")
	if err == nil || !strings.Contains(err.Error(), "want new or existing") {
		t.Fatalf("bad state: %v", err)
	}
	_, err = load(t, "--config", writeFile(t, ""), "--ordinal", "70000")
	if err == nil || !strings.Contains(err.Error(), "cluster.ordinal") {
		t.Fatalf("bad ordinal: %v", err)
	}
}

func TestPeerTLSAllOrNone(t *testing.T) {
	clearEnv(t)
	if _, err := load(t, "--config", writeFile(t, ""), "--peer-cert", "c.pem", "--peer-key", "k.pem", "--peer-ca", "ca.pem"); err != nil {
		t.Fatal(err)
	}
	t.Setenv("WO_PEER_CERT", "c.pem")
	_, err := load(t, "--config", writeFile(t, ""))
	if err == nil || !strings.Contains(err.Error(), "peer.cert (env WO_PEER_CERT) set, peer.key, peer.ca missing") {
		t.Fatalf("partial TLS: %v", err)
	}
}

// FuzzParsePeers: never panic; what parses has unique ordinals and
// addresses, each dialable-looking, and reparses to the same thing.
func FuzzParsePeers(f *testing.F) {
	for _, s := range []string{"", "0=a:1", "0=wo-0.wo:7080,1=wo-1.wo:7080", "0=[::1]:7080", "1=a:1,1=b:2", "0=:1", ",", "=", "0==a:1", "0=a:1:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		peers, err := ParsePeers(s)
		if err != nil {
			if !strings.Contains(err.Error(), "peer ") {
				t.Fatalf("error does not name the entry: %v", err)
			}
			return
		}
		var parts []string
		seen := map[int]bool{}
		for _, p := range peers {
			if seen[p.Ordinal] || p.Ordinal < 0 || p.Ordinal > MaxOrdinal || checkPeerAddr(p.Addr) != nil {
				t.Fatalf("accepted %q as %+v", s, peers)
			}
			seen[p.Ordinal] = true
			parts = append(parts, strings.Join([]string{itoa(p.Ordinal), p.Addr}, "="))
		}
		again, err := ParsePeers(strings.Join(parts, ","))
		if err != nil || !reflect.DeepEqual(again, peers) {
			t.Fatalf("%q: %+v did not reparse: %+v, %v", s, peers, again, err)
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestParseDialMap(t *testing.T) {
	m, err := ParseDialMap(" wo-0.wo:7080=127.0.0.1:4001, wo-1.wo:7080=127.0.0.1:4002 ")
	if err != nil || len(m) != 2 || m["wo-1.wo:7080"] != "127.0.0.1:4002" {
		t.Fatalf("got %v, %v", m, err)
	}
	for in, want := range map[string]string{
		"a:1":             `entry 1 ("a:1"): want host:port=host:port`,
		"a:1=b:2,":        "entry 2 is empty",
		"a:1=b:2,a:1=c:3": `entry 2 ("a:1=c:3"): a:1 is also entry 1`,
		"a:1=:2":          `address ":2": the host is empty`,
		"a=b:2":           `address "a": want host:port`,
	} {
		if _, err := ParseDialMap(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDialMap(%q) = %v, want an error with %q", in, err, want)
		}
	}
}

// FuzzParseDialMap: never panic; errors name the entry; what parses holds
// valid addresses and reparses to the same map.
func FuzzParseDialMap(f *testing.F) {
	for _, s := range []string{"", "a:1=b:2", "wo-0.wo:7080=127.0.0.1:1,wo-1.wo:7080=127.0.0.1:2", "a:1=b:2,a:1=c:3", "=", ",", "a:1=[::1]:2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseDialMap(s)
		if err != nil {
			if !strings.Contains(err.Error(), "dial map entry ") {
				t.Fatalf("error does not name the entry: %v", err)
			}
			return
		}
		var parts []string
		for from, to := range m {
			if checkPeerAddr(from) != nil || checkPeerAddr(to) != nil {
				t.Fatalf("accepted %q as %v", s, m)
			}
			parts = append(parts, from+"="+to)
		}
		again, err := ParseDialMap(strings.Join(parts, ","))
		if err != nil || (len(m) > 0 && !reflect.DeepEqual(again, m)) {
			t.Fatalf("%q: %v did not reparse: %v, %v", s, m, again, err)
		}
	})
}
