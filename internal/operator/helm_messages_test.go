package operator_test

import (
	"strings"
	"testing"
)

// TestHelmRefusesWithAMessage: the values the chart refuses in a template
// (wo.validate in _helpers.tpl) fail `helm template` with a message that
// names the value and says what is wrong, not JSON Schema's "'not' failed".
func TestHelmRefusesWithAMessage(t *testing.T) {
	helmPath(t)
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--set", "worker.voters=4"},
			[]string{"at '/worker/voters': 4 is even", "voters must be odd"}},
		{[]string{"--set", "worker.env[0].name=A", "--set", "worker.env[1].name=WO_SHARDS"},
			[]string{"at '/worker/env/1/name': WO_SHARDS is set by the operator", "remove it from worker.env"}},
		{[]string{"--set", "worker.env[0].name=WO_ADMIN_TOKEN_FILE"},
			[]string{"at '/worker/env/0/name': WO_ADMIN_TOKEN_FILE is set by the operator"}},
		// A Worker in a namespace the operator does not watch would sit
		// there unreconciled: the render fails instead.
		{[]string{"--namespace", "apps", "--set", "worker.create=true", "--set", "operator.watchNamespace=other"},
			[]string{"worker.create renders Worker r-wo in the release's namespace apps, but operator.watchNamespace=other",
				"the operator would never reconcile it", "Install the release in namespace other"}},
	} {
		out, err := runHelm(t, append([]string{"template", "r", chartDir}, c.args...)...)
		if err == nil {
			t.Errorf("helm template %v succeeded, want an error", c.args)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("helm template %v: the error lacks %q:\n%s", c.args, w, out)
			}
		}
		if strings.Contains(out, "'not' failed") {
			t.Errorf("helm template %v: %s", c.args, out)
		}
	}
	// What the checks let through: an odd voters, an env of the user's
	// own, and a Worker in the namespace the operator watches.
	for _, args := range [][]string{
		{"--set", "worker.create=true", "--set", "worker.voters=5", "--set", "worker.env[0].name=GOGC", "--set", "worker.env[0].value=200"},
		{"--namespace", "apps", "--set", "worker.create=true", "--set", "operator.watchNamespace=apps"},
		{"--namespace", "apps", "--set", "operator.watchNamespace=other"},
	} {
		mustHelm(t, append([]string{"template", "r", chartDir}, args...)...)
	}
}

// TestHelmNotes reads the NOTES.txt `helm install` prints (a client-side
// dry run, which needs an API server to ask its version): its commands name
// the Worker the chart rendered, or the example's "chat", and the
// port-forward, which runs until stopped, is not chained to the curl. (The
// release names are not "wo": the suite's operator user holds the
// ClusterRole wo-operator, and a dry run still refuses to adopt it.)
func TestHelmNotes(t *testing.T) {
	needEnv(t)
	helmPath(t)
	notes := func(release string, set ...string) string {
		t.Helper()
		out := mustHelm(t, append([]string{"install", release, chartDir, "--dry-run=client", "--namespace", "wo-notes"}, set...)...)
		_, n, ok := strings.Cut(out, "NOTES:\n")
		if !ok {
			t.Fatalf("helm install %s %v printed no NOTES:\n%s", release, set, out)
		}
		return n
	}
	for _, c := range []struct {
		release string
		set     []string
		name    string // the Worker the commands name
		ns      string // their -n flag
	}{
		{"wonotes", []string{"--set", "worker.create=true"}, "wonotes", " -n wo-notes"},
		{"r", []string{"--set", "worker.create=true"}, "r-wo", " -n wo-notes"},
		{"r", []string{"--set", "worker.create=true", "--set", "worker.name=shop"}, "shop", " -n wo-notes"},
		{"wonotes", nil, "chat", ""},
	} {
		n := notes(c.release, c.set...)
		for _, want := range []string{
			"kubectl get workers -w" + c.ns + " ",
			"kubectl describe worker " + c.name + c.ns + " ",
			"kubectl scale worker/" + c.name + " --replicas=3" + c.ns + "\n",
			"kubectl logs " + c.name + "-0" + c.ns + " | grep backend",
			"kubectl port-forward pod/" + c.name + "-0 9090" + c.ns + " &",
			"\n  curl -s localhost:9090/debug/runtime\n",
		} {
			if !strings.Contains(n, want) {
				t.Errorf("release %s %v: NOTES lack %q:\n%s", c.release, c.set, want, n)
			}
		}
		if c.name != "chat" && strings.Contains(n, "chat") {
			t.Errorf("release %s %v: NOTES name chat, not the chart's Worker %s:\n%s", c.release, c.set, c.name, n)
		}
		for _, line := range strings.Split(n, "\n") {
			if strings.Contains(line, "port-forward") && (strings.Contains(line, "&&") || strings.Contains(line, "curl")) {
				t.Errorf("release %s: the port-forward blocks, so nothing after it on its line runs: %q", c.release, line)
			}
		}
	}
}
