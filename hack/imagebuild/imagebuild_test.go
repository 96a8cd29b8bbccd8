package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// buildStatic builds the worker the way `make image` does. The operator's
// image gets a copy of it: building cmd/operator (all of client-go and
// controller-runtime, again without cgo) would add minutes to a cold CI run
// and test nothing more of the image builder; `make image` builds the real one.
func buildStatic(t *testing.T) (worker, operator string) {
	t.Helper()
	dir := t.TempDir()
	worker = filepath.Join(dir, "worker")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", worker, "github.com/writeonce/wo/cmd/worker")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	b, err := os.ReadFile(worker)
	if err != nil {
		t.Fatal(err)
	}
	operator = filepath.Join(dir, "operator")
	if err := os.WriteFile(operator, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return worker, operator
}

// TestImage builds both images from static binaries, opens the OCI layout
// and the docker tarball with go-containerregistry, checks each config and
// layer, then extracts the worker from the image's filesystem and runs it.
func TestImage(t *testing.T) {
	worker, operator := buildStatic(t)
	out := t.TempDir()
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	refs, err := Build(Options{
		WorkerBinary: worker, OperatorBinary: operator, Out: out,
		Version: "1.2.3", Revision: "0123456789abcdef", Created: created, Arch: runtime.GOARCH,
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ghcr.io/writeonce/wo-worker:1.2.3", "ghcr.io/writeonce/wo-operator:1.2.3"}
	if strings.Join(refs, " ") != strings.Join(want, " ") {
		t.Fatalf("refs %q, want %q", refs, want)
	}

	lp, err := layout.FromPath(filepath.Join(out, "oci"))
	if err != nil {
		t.Fatal(err)
	}
	idx, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 2 {
		t.Fatalf("OCI index has %d manifests, want 2", len(im.Manifests))
	}
	byRef := map[string]v1.Image{}
	for _, d := range im.Manifests {
		if d.MediaType != types.OCIManifestSchema1 {
			t.Errorf("manifest media type %s", d.MediaType)
		}
		ref := d.Annotations["org.opencontainers.image.ref.name"]
		if ref == "" || d.Annotations["io.containerd.image.name"] != ref {
			t.Errorf("manifest annotations %v", d.Annotations)
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		byRef[ref] = img
	}

	for _, c := range []struct {
		ref, binary, bin string
		ports            []string
	}{
		{want[0], worker, "/usr/local/bin/wo-worker", []string{"8080/tcp", "7070/tcp", "9090/tcp"}},
		{want[1], operator, "/usr/local/bin/wo-operator", []string{"8080/tcp", "8081/tcp"}},
	} {
		img := byRef[c.ref]
		if img == nil {
			t.Fatalf("no image %s in the layout", c.ref)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
			t.Errorf("%s: platform %s/%s", c.ref, cf.OS, cf.Architecture)
		}
		if strings.Join(cf.Config.Entrypoint, " ") != c.bin || len(cf.Config.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q", c.ref, cf.Config.Entrypoint, cf.Config.Cmd)
		}
		if cf.Config.User != "65532:65532" {
			t.Errorf("%s: user %q, want the numeric nonroot user", c.ref, cf.Config.User)
		}
		for _, p := range c.ports {
			if _, ok := cf.Config.ExposedPorts[p]; !ok {
				t.Errorf("%s: port %s not exposed", c.ref, p)
			}
		}
		labels := cf.Config.Labels
		for k, v := range map[string]string{
			"org.opencontainers.image.version":  "1.2.3",
			"org.opencontainers.image.revision": "0123456789abcdef",
			"org.opencontainers.image.source":   DefaultSource,
			"org.opencontainers.image.created":  "2026-12-01T00:00:00Z",
		} {
			if labels[k] != v {
				t.Errorf("%s: label %s = %q, want %q", c.ref, k, labels[k], v)
			}
		}
		if !cf.Created.Time.Equal(created) {
			t.Errorf("%s: created %v", c.ref, cf.Created)
		}
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		if len(layers) != 2 || len(cf.History) != 2 || len(cf.RootFS.DiffIDs) != 2 {
			t.Fatalf("%s: %d layers, %d history entries, want 2 of each", c.ref, len(layers), len(cf.History))
		}
		for _, l := range layers {
			if mt, _ := l.MediaType(); mt != types.OCILayer {
				t.Errorf("%s: layer media type %s", c.ref, mt)
			}
		}
		files := extract(t, img)
		for path, wantMode := range map[string]int64{
			"var/lib/wo": 0o750, "tmp": 0o1777, "etc/passwd": 0o644, "etc/wo": 0o755,
			"etc/ssl/certs/ca-certificates.crt": 0o644,
		} {
			h, ok := files[path]
			if !ok {
				t.Errorf("%s: no %s", c.ref, path)
				continue
			}
			if h.Mode&0o7777 != wantMode {
				t.Errorf("%s: %s mode %o, want %o", c.ref, path, h.Mode, wantMode)
			}
		}
		if h := files["var/lib/wo"]; h != nil && (h.Uid != UID || h.Gid != UID) {
			t.Errorf("%s: /var/lib/wo owned by %d:%d", c.ref, h.Uid, h.Gid)
		}
		if !strings.Contains(string(contents(t, img, "etc/passwd")), "nonroot:x:65532:65532:") {
			t.Errorf("%s: /etc/passwd has no nonroot user", c.ref)
		}
		// The CA bundle is this machine's, and Go's TLS stack can use it:
		// an https OTLP endpoint's certificate can be verified.
		hostCAs, err := os.ReadFile(CABundle)
		if err != nil {
			t.Fatal(err)
		}
		cas := contents(t, img, strings.TrimPrefix(CABundle, "/"))
		if !bytes.Equal(cas, hostCAs) {
			t.Errorf("%s: %s differs from this machine's (%d bytes, want %d)", c.ref, CABundle, len(cas), len(hostCAs))
		}
		if !x509.NewCertPool().AppendCertsFromPEM(cas) {
			t.Errorf("%s: %s holds no certificate crypto/x509 accepts", c.ref, CABundle)
		}
		orig, err := os.ReadFile(c.binary)
		if err != nil {
			t.Fatal(err)
		}
		if got := contents(t, img, strings.TrimPrefix(c.bin, "/")); !bytes.Equal(got, orig) {
			t.Errorf("%s: %s differs from the built binary (%d bytes, want %d)", c.ref, c.bin, len(got), len(orig))
		}
	}

	// The worker, taken out of the image, runs.
	bin := filepath.Join(t.TempDir(), "wo-worker")
	if err := os.WriteFile(bin, contents(t, byRef[want[0]], "usr/local/bin/wo-worker"), 0o755); err != nil {
		t.Fatal(err)
	}
	help, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("wo-worker --help from the image: %v\n%s", err, help)
	}
	if !strings.Contains(string(help), "--data-dir") {
		t.Errorf("wo-worker --help does not list --data-dir:\n%s", help)
	}

	// The docker tarball holds both images under both tags, with the same
	// digests as the layout.
	for _, r := range []string{"wo-worker", "wo-operator"} {
		for _, tag := range []string{"1.2.3", "latest"} {
			ref, err := name.NewTag("ghcr.io/writeonce/"+r+":"+tag, name.StrictValidation)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(filepath.Join(out, "images.tar"), &ref)
			if err != nil {
				t.Fatalf("images.tar: %s: %v", ref, err)
			}
			got, err := img.ConfigName()
			if err != nil {
				t.Fatal(err)
			}
			wantCfg, _ := byRef["ghcr.io/writeonce/"+r+":1.2.3"].ConfigName()
			if got != wantCfg {
				t.Errorf("images.tar %s: config %s, layout has %s", ref, got, wantCfg)
			}
		}
	}

	// Reproducible: the same inputs give the same digests.
	out2 := t.TempDir()
	if _, err := Build(Options{
		WorkerBinary: worker, OperatorBinary: operator, Out: out2,
		Version: "1.2.3", Revision: "0123456789abcdef", Created: created, Arch: runtime.GOARCH,
	}); err != nil {
		t.Fatal(err)
	}
	a, _ := os.ReadFile(filepath.Join(out, "oci", "index.json"))
	b, _ := os.ReadFile(filepath.Join(out2, "oci", "index.json"))
	if !bytes.Equal(a, b) {
		t.Errorf("two builds differ:\n%s\n%s", a, b)
	}
}

// TestRefusesDynamicBinary: a binary with an ELF interpreter cannot run on
// the empty base, and the error says why.
func TestRefusesDynamicBinary(t *testing.T) {
	dynamic := ""
	for _, p := range []string{"/bin/sh", "/usr/bin/env", "/bin/ls"} {
		if CheckStatic(p) != nil {
			dynamic = p
			break
		}
	}
	if dynamic == "" {
		t.Skip("no dynamically linked binary on this machine")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Build(Options{WorkerBinary: dynamic, OperatorBinary: self, Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "CGO_ENABLED=0") || !strings.Contains(err.Error(), dynamic) {
		t.Fatalf("Build with %s: %v, want an error naming it and CGO_ENABLED=0", dynamic, err)
	}
	if err := CheckStatic("imagebuild_test.go"); err == nil || !strings.Contains(err.Error(), "not an ELF") {
		t.Errorf("CheckStatic(a text file): %v", err)
	}
	if _, err := Build(Options{Out: t.TempDir()}); err == nil {
		t.Error("Build without binaries succeeded")
	}
}

// TestRefusesEmptyCABundle: a bundle without a certificate would build an
// image whose TLS clients fail only at run time; Build says so instead.
func TestRefusesEmptyCABundle(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "missing.crt")
	for bundle, want := range map[string]string{notPEM: "no PEM certificate", missing: "ca-certificates"} {
		_, err := Build(Options{WorkerBinary: self, OperatorBinary: self, Out: t.TempDir(), CABundle: bundle})
		if err == nil || !strings.Contains(err.Error(), bundle) || !strings.Contains(err.Error(), want) {
			t.Errorf("Build with CA bundle %s: %v, want an error naming it and %q", bundle, err, want)
		}
	}
}

// extract lists the image's flattened filesystem.
func extract(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	files := map[string]*tar.Header{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = h // directories with or without the slash
	}
}

// contents reads one file of the image's flattened filesystem.
func contents(t *testing.T, img v1.Image, path string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", path, err)
		}
		if h.Name == path {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
