package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A malformed OTLP endpoint is a configuration error: exit 2, naming the
// variable and the value, before anything is bound or opened.
func TestMalformedOTLPEndpointExits2(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "w.toml")
	os.WriteFile(conf, nil, 0o644)
	cmd := exec.Command(workerBin, "--config", conf, "--data-dir", filepath.Join(dir, "data"),
		"--http-addr", "127.0.0.1:0", "--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "OTEL_EXPORTER_OTLP_ENDPOINT=localhost:4317")
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("exit: %v, want status 2\n%s", err, out)
	}
	for _, w := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", `localhost:4317`} {
		if !strings.Contains(string(out), w) {
			t.Errorf("output lacks %q:\n%s", w, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
		t.Error("the data directory was created before the configuration was checked")
	}
}
