package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/writeonce/wo/internal/adminapi"
	"github.com/writeonce/wo/internal/testpki"
)

// The wiring of peer_tls: a worker with peer TLS (a one-member group named
// in cluster.peers, so the peer port is opened) reports its leaf and CA
// bundle as fingerprints in GET /admin/cluster, and a bundle rewritten on
// disk shows at the next GET with no traffic and no restart.
func TestPeerTLSInClusterView(t *testing.T) {
	caA, caB := testpki.NewCA(t, "CA A"), testpki.NewCA(t, "CA B")
	notAfter := time.Now().Add(30 * time.Minute).Truncate(time.Second)
	leaf := caA.Leaf(t, testpki.LeafOptions{Serial: 2, CommonName: "wo-0", NotAfter: notAfter})
	dir := t.TempDir()
	cert, key, ca := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"), filepath.Join(dir, "ca.crt")
	writeAtomic := func(path string, b []byte) {
		if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeAtomic(cert, leaf.CertPEM)
	writeAtomic(key, leaf.KeyPEM)
	writeAtomic(ca, caA.CertPEM())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	peer := ln.Addr().String()
	ln.Close()
	w := startWorker(t, t.TempDir(), "WO_PEERS=0="+peer, "WO_ORDINAL=0", "WO_PEER_ADDR="+peer,
		"WO_PEER_CERT="+cert, "WO_PEER_KEY="+key, "WO_PEER_CA="+ca)
	defer w.stop(t)
	c := &adminapi.Client{Base: w.ops, HTTP: client}
	cl, err := c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := adminapi.PeerTLS{Cert: adminapi.Fingerprint(leaf.DER), CertNotAfter: notAfter.UTC().Format(time.RFC3339), CAs: []string{adminapi.Fingerprint(caA.Cert.Raw)}}
	if p := cl.PeerTLS; p == nil || p.Cert != want.Cert || p.CertNotAfter != want.CertNotAfter || !slices.Equal(p.CAs, want.CAs) {
		t.Fatalf("peer_tls: %+v, want %+v", cl.PeerTLS, want)
	}
	writeAtomic(ca, testpki.Bundle(caA, caB))
	cl, err = c.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{adminapi.Fingerprint(caA.Cert.Raw), adminapi.Fingerprint(caB.Cert.Raw)}; cl.PeerTLS == nil || !slices.Equal(cl.PeerTLS.CAs, want) {
		t.Fatalf("peer_tls after the bundle gained CA B: %+v, want cas %v", cl.PeerTLS, want)
	}
}
