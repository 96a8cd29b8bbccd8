package transport

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.etcd.io/raft/v3/raftpb"

	"github.com/writeonce/wo/internal/testpki"
	"github.com/writeonce/wo/runtime"
)

// peerLeaf issues a reload test's leaf: for peer.test and 127.0.0.1, the
// names handshake and handshakeErr dial, with the serial the test follows.
func peerLeaf(t *testing.T, ca *testpki.CA, serial int64) (certPEM, keyPEM []byte) {
	t.Helper()
	l := ca.Leaf(t, testpki.LeafOptions{Serial: serial, CommonName: "peer", DNSNames: []string{"peer.test"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}})
	return l.CertPEM, l.KeyPEM
}

// secretDir lays files out the way the kubelet writes a Secret volume:
// the visible names are symlinks through ..data, a symlink to a timestamped
// directory, and an update swaps ..data atomically to a new directory.
type secretDir struct {
	t   *testing.T
	dir string
	gen int
}

func (s *secretDir) write(files map[string][]byte) {
	s.t.Helper()
	s.gen++
	version := filepath.Join(s.dir, "..v"+string(rune('0'+s.gen)))
	if err := os.Mkdir(version, 0o755); err != nil {
		s.t.Fatal(err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(version, name), b, 0o600); err != nil {
			s.t.Fatal(err)
		}
		link := filepath.Join(s.dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				s.t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		s.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		s.t.Fatal(err)
	}
}

func serialOf(t *testing.T, c *tls.Certificate) int64 {
	t.Helper()
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.Int64()
}

// handshake runs a mutual-TLS handshake between two ends of one config and
// returns the serial of the certificate each side presented.
func handshake(t *testing.T, cfg *tls.Config) (server, client int64) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ccfg := cfg.Clone()
	ccfg.ServerName = "peer.test"
	srv, cli := tls.Server(a, cfg), tls.Client(b, ccfg)
	errc := make(chan error, 1)
	go func() { errc <- srv.Handshake() }()
	if err := cli.Handshake(); err != nil {
		t.Fatalf("client handshake: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("server handshake: %v", err)
	}
	return cli.ConnectionState().PeerCertificates[0].SerialNumber.Int64(),
		srv.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

// A certificate renewed in its Secret volume is used from the next
// handshake on, at both ends, without building a new config; a pair that
// does not load keeps the previous one.
func TestLoadTLSReloadsRenewedCertificate(t *testing.T) {
	ca := testpki.NewCA(t, "reload CA")
	s := &secretDir{t: t, dir: t.TempDir()}
	c1, k1 := peerLeaf(t, ca, 101)
	s.write(map[string][]byte{"tls.crt": c1, "tls.key": k1, "ca.crt": ca.CertPEM()})
	cfg, err := LoadTLS(filepath.Join(s.dir, "tls.crt"), filepath.Join(s.dir, "tls.key"), filepath.Join(s.dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	if srv, cli := handshake(t, cfg); srv != 101 || cli != 101 {
		t.Fatalf("first handshake presented %d / %d, want 101", srv, cli)
	}

	c2, k2 := peerLeaf(t, ca, 102)
	s.write(map[string][]byte{"tls.crt": c2, "tls.key": k2, "ca.crt": ca.CertPEM()})
	if srv, cli := handshake(t, cfg); srv != 102 || cli != 102 {
		t.Fatalf("after renewal presented %d / %d, want 102", srv, cli)
	}

	// A certificate whose key is another's: the renewed pair stays.
	c3, _ := peerLeaf(t, ca, 103)
	s.write(map[string][]byte{"tls.crt": c3, "tls.key": k1, "ca.crt": ca.CertPEM()})
	c, err := cfg.GetCertificate(nil)
	if err != nil || serialOf(t, c) != 102 {
		t.Fatalf("mismatched pair: got %v, %v; want 102 kept", c, err)
	}
	// Fixed: picked up at once.
	c4, k4 := peerLeaf(t, ca, 104)
	s.write(map[string][]byte{"tls.crt": c4, "tls.key": k4, "ca.crt": ca.CertPEM()})
	if c, _ := cfg.GetClientCertificate(nil); serialOf(t, c) != 104 {
		t.Fatalf("after the fix presented %d, want 104", serialOf(t, c))
	}
}

// member is one test member's TLS files in a Secret-like directory.
type tlsMember struct {
	s     *secretDir
	files *TLSFiles
}

func newTLSMember(t *testing.T, leafCA *testpki.CA, serial int64, bundle ...*testpki.CA) *tlsMember {
	t.Helper()
	m := &tlsMember{s: &secretDir{t: t, dir: t.TempDir()}}
	m.set(leafCA, serial, bundle...)
	files, err := OpenTLS(filepath.Join(m.s.dir, "tls.crt"), filepath.Join(m.s.dir, "tls.key"), filepath.Join(m.s.dir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	m.files = files
	return m
}

// set writes a leaf issued by leafCA and the bundle, as one Secret update.
func (m *tlsMember) set(leafCA *testpki.CA, serial int64, bundle ...*testpki.CA) {
	c, k := peerLeaf(m.s.t, leafCA, serial)
	m.s.write(map[string][]byte{"tls.crt": c, "tls.key": k, "ca.crt": testpki.Bundle(bundle...)})
}

// setBundle rewrites only the bundle (the leaf files are kept as they are).
func (m *tlsMember) setBundle(bundle ...*testpki.CA) {
	cur := filepath.Join(m.s.dir, "..data")
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(cur, name))
		if err != nil {
			m.s.t.Fatal(err)
		}
		return b
	}
	m.s.write(map[string][]byte{"tls.crt": read("tls.crt"), "tls.key": read("tls.key"), "ca.crt": testpki.Bundle(bundle...)})
}

func fingerprints(ders [][]byte) []string {
	var out []string
	for _, d := range ders {
		out = append(out, fingerprint(d))
	}
	return out
}

func fingerprint(der []byte) string {
	sum := sha256.Sum256(der)
	return hex.EncodeToString(sum[:])
}

// The CA rotation the operator drives, between two members talking over
// real TLS the whole time: bundle {A} -> {A,B} -> leaves re-issued by B ->
// bundle {B}. At every phase the members' open connections go on carrying
// messages, and fresh connections both ways (a new dialer with member 1's
// files, member 2 dialling it back) succeed: each side verifies the other
// against the bundle as it is at that handshake. Info shows each phase's
// material without any traffic. At the end a leaf of an unknown CA, and a
// leaf of the dropped CA A, are refused at both ends.
func TestCARotationOverTCP(t *testing.T) {
	caA, caB, caC := testpki.NewCA(t, "CA A"), testpki.NewCA(t, "CA B"), testpki.NewCA(t, "CA C")
	m1 := newTLSMember(t, caA, 11, caA)
	m2 := newTLSMember(t, caA, 21, caA)
	testRuntime(t, func(f *runtime.Fiber) {
		e1 := startEndpoint(t, f, 0, Config{ID: 1, TLS: m1.files.Config()})
		e2 := startEndpoint(t, f, 1, Config{ID: 2, TLS: m2.files.Config()})
		defer e1.close(f)
		defer e2.close(f)
		e1.addPeer(f, 2, e2.tcp.Addr().String())
		e2.addPeer(f, 1, e1.tcp.Addr().String())
		var index uint64
		exchange := func(phase string, id uint64) {
			t.Helper()
			// The long-lived connections, both ways.
			n1, n2 := e1.rec.count(), e2.rec.count()
			index++
			e1.send(f, []*raftpb.Message{heartbeat(1, 2, index)})
			e2.send(f, []*raftpb.Message{heartbeat(2, 1, index)})
			waitFor(t, f, phase+": messages on the open connections", func() bool { return e1.rec.count() > n1 && e2.rec.count() > n2 })
			// A fresh dialer with member 1's files, and member 2
			// dialling it: two new handshakes, each end verifying.
			d := startEndpoint(t, f, 0, Config{ID: id, TLS: m1.files.Config()})
			defer d.close(f)
			d.addPeer(f, 2, e2.tcp.Addr().String())
			e2.addPeer(f, id, d.tcp.Addr().String())
			n2 = e2.rec.count()
			d.send(f, []*raftpb.Message{heartbeat(id, 2, index)})
			e2.send(f, []*raftpb.Message{heartbeat(2, id, index)})
			waitFor(t, f, phase+": messages on new connections both ways", func() bool { return e2.rec.count() > n2 && d.rec.count() > 0 })
		}
		wantInfo := func(phase string, m *tlsMember, cas ...*testpki.CA) {
			t.Helper()
			info := m.files.Info()
			var want []string
			for _, ca := range cas {
				want = append(want, fingerprint(ca.Cert.Raw))
			}
			if got := fingerprints(info.CAs); !slices.Equal(got, want) {
				t.Fatalf("%s: Info CAs %v, want %v", phase, got, want)
			}
			cur, err := os.ReadFile(filepath.Join(m.s.dir, "tls.crt"))
			if err != nil {
				t.Fatal(err)
			}
			blk, _ := pem.Decode(cur)
			if fingerprint(info.Cert) != fingerprint(blk.Bytes) || info.NotAfter.IsZero() {
				t.Fatalf("%s: Info shows another leaf than the file's (or no expiry)", phase)
			}
		}

		exchange("bundle {A}", 10)
		wantInfo("bundle {A}", m1, caA)

		m1.setBundle(caA, caB)
		m2.setBundle(caA, caB)
		wantInfo("bundle {A,B}", m1, caA, caB) // seen before any handshake
		wantInfo("bundle {A,B}", m2, caA, caB)
		exchange("bundle {A,B}", 11)

		m1.set(caB, 12, caA, caB)
		m2.set(caB, 22, caA, caB)
		wantInfo("leaves by B", m1, caA, caB)
		exchange("leaves by B", 12)

		m1.setBundle(caB)
		m2.setBundle(caB)
		wantInfo("bundle {B}", m2, caB)
		exchange("bundle {B}", 13)

		// Refused: a leaf of an unknown CA, and one of the dropped CA A,
		// by member 2 as a server and as a client.
		for i, issuer := range []*testpki.CA{caC, caA} {
			rogue := newTLSMember(t, issuer, int64(90+i), caA, caB, caC)
			id := uint64(90 + i)
			r := startEndpoint(t, f, 0, Config{ID: id, TLS: rogue.files.Config()})
			refused := e2.tcp.Stats.ConnsRefused.Load()
			r.addPeer(f, 2, e2.tcp.Addr().String())
			r.send(f, []*raftpb.Message{heartbeat(id, 2, index)})
			waitFor(t, f, "member 2 refusing a dialer whose leaf it does not trust", func() bool { return e2.tcp.Stats.ConnsRefused.Load() > refused })
			e2.addPeer(f, id, r.tcp.Addr().String())
			e2.send(f, []*raftpb.Message{heartbeat(2, id, index)})
			waitFor(t, f, "member 2 refusing a server whose leaf it does not trust", func() bool {
				// The client side's own verification, not the server side's.
				return strings.Contains(e2.logs.String(), "the peer's certificate: x509: certificate signed by unknown authority")
			})
			if n := r.rec.count(); n != 0 {
				t.Fatalf("a member with a leaf of %s received %d messages", issuer.Cert.Subject.CommonName, n)
			}
			r.close(f)
		}
	})
}

// handshakeErr runs a handshake between a server with srv's files and a
// client with cli's, dialling name; the client's error, or the server's.
func handshakeErr(t *testing.T, srv, cli *TLSFiles, name string) error {
	t.Helper()
	// Loopback TCP, not net.Pipe: an end that fails writes its alert while
	// the other may still be writing its flight, which an unbuffered pipe
	// deadlocks on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		a, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer a.Close()
		a.SetDeadline(time.Now().Add(time.Minute))
		s := tls.Server(a, srv.Config())
		err = s.Handshake()
		if err == nil {
			// TLS 1.3: the client's certificate is checked when the
			// server reads its Finished; a read makes the client hear
			// of a refusal.
			_, err = s.Write([]byte{1})
		}
		errc <- err
	}()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	b.SetDeadline(time.Now().Add(time.Minute))
	c := tls.Client(b, clientConfig(cli.Config(), name))
	cerr := c.Handshake()
	if cerr == nil {
		_, cerr = c.Read(make([]byte, 1))
	}
	b.Close()
	serr := <-errc
	if cerr != nil {
		return cerr
	}
	return serr
}

// The client's own verification (VerifyConnection, InsecureSkipVerify
// set) refuses what crypto/tls would: a server certificate of a CA outside
// the bundle, one for another host name or IP address; and it follows the
// bundle when it changes.
func TestClientVerificationRefuses(t *testing.T) {
	caA, caC := testpki.NewCA(t, "CA A"), testpki.NewCA(t, "CA C")
	server := newTLSMember(t, caA, 1, caA)
	client := newTLSMember(t, caA, 2, caA)
	for _, name := range []string{"peer.test", "127.0.0.1"} {
		if err := handshakeErr(t, server.files, client.files, name); err != nil {
			t.Fatalf("dialling %s: %v", name, err)
		}
	}
	for _, name := range []string{"other.test", "127.0.0.2"} {
		err := handshakeErr(t, server.files, client.files, name)
		if err == nil || !strings.Contains(err.Error(), "certificate is valid for") {
			t.Fatalf("dialling %s with a certificate for peer.test / 127.0.0.1: %v", name, err)
		}
	}
	rogue := newTLSMember(t, caC, 3, caA, caC)
	if err := handshakeErr(t, rogue.files, client.files, "peer.test"); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Fatalf("a server certificate of an unknown CA: %v", err)
	}
	// The server refuses the rogue as a client, too.
	if err := handshakeErr(t, server.files, rogue.files, "peer.test"); err == nil {
		t.Fatal("a client certificate of an unknown CA was accepted")
	}
	// The client trusts C once its bundle says so.
	client.setBundle(caA, caC)
	if err := handshakeErr(t, rogue.files, client.files, "peer.test"); err != nil {
		t.Fatalf("after C joined the client's bundle: %v", err)
	}
	// A bundle that does not load keeps the previous one, logged once.
	logs := &logBuf{t: t}
	client.files.ca.SetLogger(slog.New(slog.NewTextHandler(logs, nil)))
	client.s.write(map[string][]byte{"ca.crt": []byte("-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n")})
	if got := fingerprints(client.files.Info().CAs); !slices.Equal(got, []string{fingerprint(caA.Cert.Raw), fingerprint(caC.Cert.Raw)}) {
		t.Fatalf("a bad bundle replaced the good one: %v", got)
	}
	if err := handshakeErr(t, rogue.files, client.files, "peer.test"); err != nil {
		t.Fatalf("with a bad bundle file (the last good one in use): %v", err)
	}
	if n := strings.Count(logs.String(), "the peer TLS CA bundle changed and cannot be loaded"); n != 1 {
		t.Fatalf("%d warnings for one bad bundle, want 1:\n%s", n, logs)
	}
}
