package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestParseFlagsDefaults(t *testing.T) {
	c, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	want := config{
		metricsAddr:      ":8080",
		probeAddr:        ":8081",
		leaderElectionID: "wo-operator.wo.writeonce.dev",
		workerImage:      DefaultWorkerImage,
		logLevel:         slog.LevelInfo,
	}
	if c != want {
		t.Fatalf("defaults = %+v, want %+v", c, want)
	}
}

func TestParseFlags(t *testing.T) {
	c, err := parseFlags([]string{
		"--metrics-bind-address=0", "--health-probe-bind-address=:9000", "--leader-elect",
		"--leader-election-namespace=wo-system", "--worker-image=example/wo:1", "--namespace=apps",
		"--log-level=debug", "--worker-image-pull-policy=Never", "--sync-crd",
	}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.metricsAddr != "0" || c.probeAddr != ":9000" || !c.leaderElect || c.leaderElectionNS != "wo-system" ||
		c.workerImage != "example/wo:1" || c.namespace != "apps" || c.logLevel != slog.LevelDebug || c.workerPullPolicy != "Never" || !c.syncCRD {
		t.Fatalf("parsed %+v", c)
	}
}

func TestParseFlagsErrors(t *testing.T) {
	for _, args := range [][]string{{"--log-level=loud"}, {"--worker-image-pull-policy=Sometimes"}, {"extra"}, {"--no-such-flag"}} {
		if _, err := parseFlags(args, &bytes.Buffer{}); err == nil {
			t.Errorf("parseFlags(%q) succeeded", args)
		}
	}
}

func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	if code := run([]string{"--help"}, &out); code != 0 {
		t.Fatalf("--help exit %d", code)
	}
	for _, f := range []string{"metrics-bind-address", "health-probe-bind-address", "leader-elect", "worker-image", "worker-image-pull-policy", "sync-crd", "namespace", "log-level"} {
		if !strings.Contains(out.String(), "-"+f) {
			t.Errorf("--help does not mention %s:\n%s", f, out.String())
		}
	}
}
