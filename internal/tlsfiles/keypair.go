package tlsfiles

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"sync"

	"github.com/writeonce/wo/fileid"
)

// Names are how errors and warnings name the files of a KeyPair: the
// setting that holds each path ("tls.cert_file"), or a description
// ("transport: peer TLS certificate").
type Names struct {
	Cert, Key string
	// Pair names both in the warning for a failed reload ("transport: the
	// peer TLS certificate and key").
	Pair string
}

// KeyPair is a certificate and its private key, read again when either
// file changes. It is safe for concurrent use.
type KeyPair struct {
	certFile, keyFile string
	names             Names
	log               *slog.Logger

	mu      sync.Mutex
	cert    *tls.Certificate
	seen    [2]fileid.ID // of certFile and keyFile when cert was loaded
	failing bool         // the last reload failed (logged once per streak)
}

// LoadKeyPair reads the pair now; an error names the file that failed by
// names. log receives the warnings of later reloads (nil: slog.Default()).
func LoadKeyPair(certFile, keyFile string, names Names, log *slog.Logger) (*KeyPair, error) {
	if log == nil {
		log = slog.Default()
	}
	kp := &KeyPair{certFile: certFile, keyFile: keyFile, names: names, log: log}
	if err := kp.reload(); err != nil {
		return nil, err
	}
	return kp, nil
}

// reload loads the pair if either file changed since the last load.
func (kp *KeyPair) reload() error {
	c, err := fileid.Stat(kp.certFile)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kp.names.Cert, kp.certFile, err)
	}
	k, err := fileid.Stat(kp.keyFile)
	if err != nil {
		return fmt.Errorf("%s %s: %w", kp.names.Key, kp.keyFile, err)
	}
	if kp.cert != nil && kp.seen == [2]fileid.ID{c, k} {
		return nil
	}
	cert, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("%s %s / %s %s: %w", kp.names.Cert, kp.certFile, kp.names.Key, kp.keyFile, err)
	}
	kp.cert, kp.seen = &cert, [2]fileid.ID{c, k}
	return nil
}

// Get returns the current pair, reloading it first if its files changed. A
// failed reload keeps the pair already loaded: a handshake with the old
// certificate (still valid, renewals come well before expiry) beats none.
func (kp *KeyPair) Get() *tls.Certificate {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.failing = noteReload(kp.log, kp.reload(), kp.failing, kp.names.Pair)
	return kp.cert
}

// SetLogger replaces the logger of later reload warnings (tests).
func (kp *KeyPair) SetLogger(log *slog.Logger) {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	kp.log = log
}

// noteReload logs a failed reload at the first failure of a streak and
// returns whether this one failed.
func noteReload(log *slog.Logger, err error, failing bool, what string) bool {
	if err != nil && !failing {
		log.Warn(what+" changed and cannot be loaded; the ones loaded before stay in use", "err", err)
	}
	return err != nil
}
