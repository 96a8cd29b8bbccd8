package operator_test

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	wov1 "github.com/writeonce/wo/api/v1alpha1"
	"github.com/writeonce/wo/internal/operator/render"
)

// The Kubernetes restore of docs/operations.md ("Kubernetes restore
// steps"), with real worker processes: a backup of a single worker is
// restored (`worker restore --ordinal 0 --peer-addr` pod 0's address in
// cluster.peers) into the data volume of pod 0 of a new Worker before the
// Worker exists; the operator then starts pod 0 on it and grows it into a
// three-voter group by its ordinary join path, and every member reads every
// backed-up record. The steps the test cannot run here (kubectl cp into a
// pod, a PersistentVolumeClaim made by hand) are the doc's manual part.
func TestRestoredBackupGrowsIntoAGroup(t *testing.T) {
	needEnv(t)
	if missing := workerSettingsMissing(); len(missing) > 0 {
		t.Skipf("SKIPPED: the worker has no %s setting yet", strings.Join(missing, ", "))
	}
	bin := workerBinary(t)
	backup := filepath.Join(t.TempDir(), "wo.backup")
	records := map[string]string{}
	for i := range 20 {
		records[fmt.Sprintf("k%02d", i)] = fmt.Sprintf(`{"n":"value %d"}`, i)
	}
	takeBackup(t, bin, records, backup)

	ns := newNamespace(t)
	w := newWorker(ns, workerName(), "1", wov1.PinningNone)
	w.Spec.Replicas = new(int32)
	*w.Spec.Replicas = 3
	startOperator(t, ns, operatorConfig)
	k := startProcKubelet(t, ns, w.Name, 3)
	// Step 3 of the doc: the restore into pod 0's (empty) data volume.
	out, err := exec.Command(bin, "restore", "--from", backup, "--data-dir", filepath.Join(k.root, "data", "0"),
		"--ordinal", "0", "--peer-addr", render.PeerAddr(w, 0)).CombinedOutput()
	if err != nil {
		t.Fatalf("worker restore: %v\n%s", err, out)
	}
	createWorker(t, w)
	eventually(t, "the restored member grows into three voters", func() error {
		got := getWorker(t, w)
		var roles []string
		for _, m := range got.Status.Members {
			roles = append(roles, strings.TrimPrefix(m.Pod, w.Name+"-")+":"+m.Role)
		}
		slices.Sort(roles)
		if want := []string{"0:voter", "1:voter", "2:voter"}; !slices.Equal(roles, want) || len(k.endpoints()) != 3 {
			return fmt.Errorf("members %v, ready %d", roles, len(k.endpoints()))
		}
		return nil
	})
	for _, ep := range k.endpoints() {
		for key, want := range records {
			eventually(t, "GET "+key+" on "+ep, func() error {
				code, body, err := getBody(ep + "/v1/records/" + key)
				if err != nil || code != 200 || !strings.Contains(body, want[1:len(want)-1]) {
					return fmt.Errorf("%d %v %s, want %s", code, err, body, want)
				}
				return nil
			})
		}
	}
}

// takeBackup runs a single worker of bin, writes records, and takes a
// backup of it into file with `worker backup`.
func takeBackup(t *testing.T, bin string, records map[string]string, file string) {
	t.Helper()
	conf := filepath.Join(t.TempDir(), "none.toml")
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config", conf, "--data-dir", t.TempDir(), "--http-addr", "127.0.0.1:0",
		"--ops-addr", "127.0.0.1:0", "--chat-addr", "127.0.0.1:0", "--peer-addr", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addrs := make(chan []string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := listeningLine.FindStringSubmatch(sc.Text()); m != nil {
				addrs <- m[1:3]
			}
		}
	}()
	var ops, data string
	select {
	case a := <-addrs:
		ops, data = "http://"+a[0], "http://"+a[1]
	case <-time.After(2 * time.Minute):
		t.Fatal("the source worker did not report its ports")
	}
	for key, v := range records {
		eventually(t, "PUT "+key, func() error {
			req, err := http.NewRequest(http.MethodPut, data+"/v1/records/"+key, strings.NewReader(v))
			if err != nil {
				return err
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 {
				b, _ := io.ReadAll(resp.Body)
				return fmt.Errorf("%d %s", resp.StatusCode, b)
			}
			return nil
		})
	}
	if out, err := exec.Command(bin, "backup", "--from", ops, "--out", file).CombinedOutput(); err != nil {
		t.Fatalf("worker backup: %v\n%s", err, out)
	}
}

func getBody(url string) (int, string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
