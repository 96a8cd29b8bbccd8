package tlsfiles

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"

	"github.com/writeonce/wo/fileid"
)

// Bundle is a trust bundle (one or more CA certificates in one PEM file),
// read again when its file changes. It is safe for concurrent use.
type Bundle struct {
	file string
	name string // how errors name the file: "transport: peer TLS CA", "tls.client_ca_file"
	warn string // how the reload warning names it
	log  *slog.Logger

	mu      sync.Mutex
	cur     *Trust
	seen    fileid.ID
	failing bool
}

// Trust is one loaded bundle; never changed once built.
type Trust struct {
	Pool *x509.CertPool
	DERs [][]byte // every CA certificate, in file order
}

// LoadBundle reads the bundle now; an error names the file by name. warn
// names the bundle in the warning of a failed reload; log receives it (nil:
// slog.Default()).
func LoadBundle(file, name, warn string, log *slog.Logger) (*Bundle, error) {
	if log == nil {
		log = slog.Default()
	}
	b := &Bundle{file: file, name: name, warn: warn, log: log}
	if err := b.reload(); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *Bundle) reload() error {
	id, err := fileid.Stat(b.file)
	if err != nil {
		return fmt.Errorf("%s %s: %w", b.name, b.file, err)
	}
	if b.cur != nil && id == b.seen {
		return nil
	}
	data, err := os.ReadFile(b.file)
	if err != nil {
		return fmt.Errorf("%s: %w", b.name, err)
	}
	t, err := ParseBundle(data)
	if err != nil {
		return fmt.Errorf("%s %s: %w", b.name, b.file, err)
	}
	b.cur, b.seen = t, id
	return nil
}

// Get returns the current bundle, reloading it first if its file changed;
// a bundle that fails to load keeps the previous one.
func (b *Bundle) Get() *Trust {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failing = noteReload(b.log, b.reload(), b.failing, b.warn)
	return b.cur
}

// SetLogger replaces the logger of later reload warnings (tests).
func (b *Bundle) SetLogger(log *slog.Logger) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.log = log
}

// ParseBundle reads every CERTIFICATE block of a PEM file (other blocks
// and the text between blocks are skipped, as openssl writes them). A
// certificate that does not parse fails the whole bundle: trusting part of
// what the file says is not what its writer meant.
func ParseBundle(data []byte) (*Trust, error) {
	t := &Trust{Pool: x509.NewCertPool()}
	for n := 1; ; {
		var blk *pem.Block
		blk, data = pem.Decode(data)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("certificate %d of the bundle: %w", n, err)
		}
		t.Pool.AddCert(c)
		t.DERs = append(t.DERs, blk.Bytes)
		n++
	}
	if len(t.DERs) == 0 {
		return nil, errors.New("no PEM certificate in it")
	}
	return t, nil
}
