package transport

import "crypto/tls"

// LoadTLS is OpenTLS(...).Config(), nil when the three files are "": the
// one-call form the tests use (the worker keeps the *TLSFiles, whose Info
// the admin API reports, so production code has no use for it).
func LoadTLS(certFile, keyFile, caFile string) (*tls.Config, error) {
	m, err := OpenTLS(certFile, keyFile, caFile)
	if m == nil {
		return nil, err
	}
	return m.Config(), nil
}
