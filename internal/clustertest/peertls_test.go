package clustertest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/testpki"
)

func fingerprints(cas ...*testpki.CA) []string {
	var out []string
	for _, ca := range cas {
		out = append(out, adminapi.Fingerprint(ca.Cert.Raw))
	}
	return out
}

// secretVolume writes files the way the kubelet updates a mounted Secret:
// the files of one version in a fresh hidden directory, a "..data" symlink
// to it swapped by rename, and every file a symlink through "..data" — so
// a reader sees all the files of one version or all of the next, never a
// mix, and every update is a rename.
type secretVolume struct {
	dir string
	n   int
}

// update makes files (name to content) the volume's new version.
func (s *secretVolume) update(files map[string][]byte) error {
	s.n++
	ver := "..v" + strconv.Itoa(s.n)
	if err := os.Mkdir(filepath.Join(s.dir, ver), 0o700); err != nil {
		return fmt.Errorf("secret volume %s: %w", s.dir, err)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(s.dir, ver, name), b, 0o600); err != nil {
			return fmt.Errorf("secret volume %s: %w", s.dir, err)
		}
	}
	tmp := filepath.Join(s.dir, "..data_tmp")
	if err := os.Symlink(ver, tmp); err != nil {
		return fmt.Errorf("secret volume %s: %w", s.dir, err)
	}
	if err := os.Rename(tmp, filepath.Join(s.dir, "..data")); err != nil {
		return fmt.Errorf("secret volume %s: %w", s.dir, err)
	}
	for name := range files {
		link := filepath.Join(s.dir, name)
		if _, err := os.Lstat(link); err == nil {
			continue
		}
		if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
			return fmt.Errorf("secret volume %s: %w", s.dir, err)
		}
	}
	return nil
}

func (s *secretVolume) path(name string) string { return filepath.Join(s.dir, name) }

// peerTLSView is what a member's GET /admin/cluster must show in a phase.
type peerTLSView struct {
	cert string   // fingerprint of its leaf
	cas  []string // fingerprints of its bundle, in file order
}

// waitPeerTLS waits until the peer_tls of every member of want is what
// want says for it.
func waitPeerTLS(ctx context.Context, want map[*Member]peerTLSView) error {
	for m, w := range want {
		var last *adminapi.PeerTLS
		var lastErr error
		for {
			v, err := m.clusterWithin(ctx, 5*time.Second)
			if err == nil && v.PeerTLS != nil && v.PeerTLS.Cert == w.cert && slices.Equal(v.PeerTLS.CAs, w.cas) {
				break
			}
			last, lastErr = v.PeerTLS, err
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return fmt.Errorf("%s: peer_tls %+v (last error %v), want cert %s cas %v: %w", m, last, lastErr, w.cert, w.cas, err)
			}
		}
	}
	return nil
}

// handshake dials a member's peer port presenting cl, trusting roots, and
// returns the server's verdict on cl: in TLS 1.3 the server checks the
// client's certificate after the client's handshake returns, so the
// verdict is read from the connection. A refusal is the server's alert
// (a "remote error"); an accepted client gets no alert: the peer server
// waits for the first frame, which the read deadline (longer than any
// alert takes) ends.
func handshake(ctx context.Context, addr string, cl testpki.Leaf, roots *x509.CertPool) error {
	cert, err := tls.X509KeyPair(cl.CertPEM, cl.KeyPEM)
	if err != nil {
		return err
	}
	// GetClientCertificate, not Certificates: crypto/tls would withhold a
	// certificate whose issuer the server does not list as acceptable,
	// and the refusal tested would be of no certificate, not of this one.
	d := tls.Dialer{Config: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS13,
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = conn.Read(make([]byte, 1))
	return err
}

// remoteAlert reports whether err is an alert the TLS peer sent.
func remoteAlert(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "remote error"
}

// A group with mutual TLS on the peer port rotates its CA the way the
// operator does, under a writer, each phase waited on until every member's
// GET /admin/cluster peer_tls shows it: the bundle {A} becomes {A, B}, the
// leaves are re-issued by B, the bundle becomes {B} — every file rewritten
// in place through a Secret volume's symlink swap, no restart. Then, under
// {B} alone, a leaf of A is refused by every member and one of B is not;
// the leader is SIGKILLed, a new one elected over TLS, and the killed one
// restarts on the rotated files and catches up (new handshakes on every
// link it has). Every acknowledged write is then on every member, and the
// history is linearizable.
func TestPeerTLSCARotationUnderLoad(t *testing.T) {
	caA, caB := testpki.NewCA(t, "peer CA A"), testpki.NewCA(t, "peer CA B")
	filesDir := t.TempDir()
	vols := map[int]*secretVolume{}
	leavesA, leavesB := map[int]testpki.Leaf{}, map[int]testpki.Leaf{}
	setup := func(m *Member) {
		v := &secretVolume{dir: filepath.Join(filesDir, "member-"+strconv.Itoa(m.Ordinal))}
		must(t, os.Mkdir(v.dir, 0o700))
		vols[m.Ordinal] = v
		// testpki's default leaf is for 127.0.0.1, which cluster.peers
		// names members by and the dialler verifies, and serves as the
		// server and the client end of a peer connection.
		leavesA[m.Ordinal] = caA.Leaf(t, testpki.LeafOptions{CommonName: "wo-" + strconv.Itoa(m.Ordinal) + " A"})
		leavesB[m.Ordinal] = caB.Leaf(t, testpki.LeafOptions{CommonName: "wo-" + strconv.Itoa(m.Ordinal) + " B"})
		l := leavesA[m.Ordinal]
		must(t, v.update(map[string][]byte{"tls.crt": l.CertPEM, "tls.key": l.KeyPEM, "ca.crt": testpki.Bundle(caA)}))
		m.Env = append(m.Env, "WO_PEER_CERT="+v.path("tls.crt"), "WO_PEER_KEY="+v.path("tls.key"), "WO_PEER_CA="+v.path("ca.crt"))
	}
	c := Start(t, Options{Setup: setup})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	phase := func(name string, leaves map[int]testpki.Leaf, cas ...*testpki.CA) {
		t.Helper()
		want := map[*Member]peerTLSView{}
		for _, m := range c.Members() {
			l := leaves[m.Ordinal]
			must(t, vols[m.Ordinal].update(map[string][]byte{"tls.crt": l.CertPEM, "tls.key": l.KeyPEM, "ca.crt": testpki.Bundle(cas...)}))
			want[m] = peerTLSView{cert: adminapi.Fingerprint(l.DER), cas: fingerprints(cas...)}
		}
		if err := waitPeerTLS(ctx, want); err != nil {
			t.Fatalf("phase %s: %v", name, err)
		}
	}
	want := map[*Member]peerTLSView{}
	for _, m := range c.Members() {
		want[m] = peerTLSView{cert: adminapi.Fingerprint(leavesA[m.Ordinal].DER), cas: fingerprints(caA)}
	}
	if err := waitPeerTLS(ctx, want); err != nil {
		t.Fatalf("at start: %v", err)
	}

	const clients = 8
	l := &load{c: c, h: NewHistory()}
	stopLoad := l.start(ctx, clients)
	defer stopLoad()
	progress := func(what string) {
		t.Helper()
		if !l.waitAcks(ctx, 50, time.Minute) {
			t.Fatalf("%s: fewer than 50 writes acknowledged in a minute", what)
		}
	}

	progress("under CA A")
	phase("{A, B}, leaves of A", leavesA, caA, caB)
	progress("bundle {A, B}")
	phase("{A, B}, leaves of B", leavesB, caA, caB)
	progress("leaves of B")
	phase("{B}, leaves of B", leavesB, caB)
	progress("bundle {B}")

	// Under {B} alone every member refuses a client of A and accepts one
	// of B (the probes are new handshakes, which is what the bundle
	// governs; the members' own links may predate it).
	rootsB := x509.NewCertPool()
	rootsB.AddCert(caB.Cert)
	for _, m := range c.Members() {
		if err := handshake(ctx, m.PeerAddr, leavesA[m.Ordinal], rootsB); !remoteAlert(err) {
			t.Errorf("%s under {B}: a client with a leaf of A: %v, want the server's refusal", m, err)
		}
		if err := handshake(ctx, m.PeerAddr, leavesB[m.Ordinal], rootsB); remoteAlert(err) {
			t.Errorf("%s under {B}: a client with a leaf of B refused: %v", m, err)
		}
	}

	old, ov, err := c.Leader(ctx)
	must(t, err)
	must(t, old.Kill())
	var nl *Member
	var nv adminapi.Cluster
	if !within(ctx, time.Minute, func() bool {
		nl, nv, err = c.Leader(ctx)
		return err == nil && nv.Term > ov.Term
	}) {
		t.Fatalf("no leader of a term after %d within a minute of killing %s (last: %s at term %d, err %v)", ov.Term, old, nl, nv.Term, err)
	}
	progress("after the leader kill")
	must(t, old.Start())
	must(t, old.WaitReady(ctx))
	must(t, c.WaitCaughtUp(ctx, old))
	if err := waitPeerTLS(ctx, map[*Member]peerTLSView{old: {cert: adminapi.Fingerprint(leavesB[old.Ordinal].DER), cas: fingerprints(caB)}}); err != nil {
		t.Fatalf("the restarted member: %v", err)
	}
	progress("with the killed member back")
	stopLoad()

	for _, m := range c.Members() {
		must(t, c.WaitCaughtUp(ctx, m))
	}
	for _, m := range c.Members() {
		recs, err := m.List(ctx, "u", false)
		must(t, err)
		got := map[string]bool{}
		for _, r := range recs {
			got[r.Key] = true
		}
		lost := 0
		for _, k := range l.fresh {
			if !got[k] {
				if lost++; lost <= 10 {
					t.Errorf("acknowledged write of %s missing on %s", k, m)
				}
			}
		}
	}
	for i, m := range c.Members() {
		for k := range regKeys {
			op := l.h.Invoke(clients+i, KVInput{Key: regKey(k)})
			r, err := m.Get(ctx, regKey(k), false)
			if Code(err) == http.StatusNotFound {
				err = nil
			}
			must(t, err)
			op.Ok(r.Fields["v"])
		}
	}
	answered, pendingPuts := l.check(t, time.Minute)
	t.Logf("CA rotated A -> {A,B} -> leaves of B -> {B}, leader %s killed at term %d, %s leads at term %d: %d writes acknowledged (%d fresh keys checked), %d register operations answered, %d unanswered writes, %d requests without a definite answer",
		old, ov.Term, nl, nv.Term, l.acks.Load(), len(l.fresh), answered, pendingPuts, l.errs.Load())
}
