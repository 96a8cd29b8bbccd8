package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/writeonce/wo/internal/tlsfiles"
)

// The image contract, shared with internal/operator's rendering (DataDir,
// NonRootUID) and the chart's values (the repositories).
const (
	UID     = 65532
	DataDir = "/var/lib/wo"
	BinDir  = "/usr/local/bin"

	DefaultRegistry = "ghcr.io/writeonce"
	DefaultSource   = "https://github.com/writeonce/wo"

	// CABundle is where the image holds the CA certificates, and where the
	// build takes them from by default (Debian's ca-certificates package):
	// the first file Go's crypto/x509 reads on Linux, so the worker can
	// verify an https OTLP collector (or any TLS peer signed by a public
	// CA) without a mounted bundle or SSL_CERT_FILE.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// Options say what to build.
type Options struct {
	WorkerBinary   string // path of a static cmd/worker
	OperatorBinary string // path of a static cmd/operator
	Out            string // output directory
	Registry       string // repository prefix, e.g. ghcr.io/writeonce
	Version        string // image tag and version label
	Revision       string // VCS revision label
	Source         string // source URL label
	Created        time.Time
	Arch           string // GOARCH of the binaries
	CABundle       string // PEM CA certificates to copy to CABundle in the image (default: this machine's CABundle)
}

// spec describes one of the two images.
type spec struct {
	name        string // repository name, also the binary's name in BinDir
	binary      string
	description string
	ports       []string
	env         []string
	volumes     []string
}

func main() {
	var o Options
	var created string
	flag.StringVar(&o.WorkerBinary, "worker", "", "path of the static worker binary (required)")
	flag.StringVar(&o.OperatorBinary, "operator", "", "path of the static operator binary (required)")
	flag.StringVar(&o.Out, "out", "build/image", "output directory (oci/ and images.tar)")
	flag.StringVar(&o.Registry, "registry", DefaultRegistry, "repository prefix of both images")
	flag.StringVar(&o.Version, "version", "dev", "image tag and org.opencontainers.image.version")
	flag.StringVar(&o.Revision, "revision", "", "org.opencontainers.image.revision (the git commit)")
	flag.StringVar(&o.Source, "source", DefaultSource, "org.opencontainers.image.source")
	flag.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time, Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	flag.StringVar(&o.Arch, "arch", "amd64", "GOARCH of the binaries")
	flag.StringVar(&o.CABundle, "ca-bundle", CABundle, "PEM file of CA certificates, placed at "+CABundle+" in both images")
	flag.Parse()
	if flag.NArg() > 0 {
		fatalf("unexpected arguments %q", flag.Args())
	}
	if created != "" {
		sec, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			fatalf("--created %q: not Unix seconds", created)
		}
		o.Created = time.Unix(sec, 0).UTC()
	}
	refs, err := Build(o)
	if err != nil {
		fatalf("%v", err)
	}
	for _, r := range refs {
		fmt.Println(r)
	}
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "imagebuild: "+format+"\n", args...)
	os.Exit(1)
}

// Build writes both images under o.Out and returns their references.
func Build(o Options) ([]string, error) {
	if o.WorkerBinary == "" || o.OperatorBinary == "" {
		return nil, errors.New("both --worker and --operator binaries are required")
	}
	if o.Registry == "" {
		o.Registry = DefaultRegistry
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.Created.IsZero() {
		o.Created = time.Unix(0, 0).UTC()
	}
	if o.CABundle == "" {
		o.CABundle = CABundle
	}
	cas, err := readCABundle(o.CABundle)
	if err != nil {
		return nil, err
	}
	specs := []spec{
		{
			name: "wo-worker", binary: o.WorkerBinary,
			description: "wo worker: the shard-per-core actor runtime serving records, chat and the ops endpoints",
			ports:       []string{"8080/tcp", "7070/tcp", "9090/tcp"},
			env:         []string{"WO_DATA_DIR=" + DataDir},
			volumes:     []string{DataDir},
		},
		{
			name: "wo-operator", binary: o.OperatorBinary,
			description: "wo operator: reconciles Worker resources (wo.writeonce.dev/v1alpha1)",
			ports:       []string{"8080/tcp", "8081/tcp"},
		},
	}
	base, err := baseLayer(o.Created, cas)
	if err != nil {
		return nil, err
	}

	ociDir := filepath.Join(o.Out, "oci")
	if err := os.RemoveAll(ociDir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", ociDir, err)
	}
	lp, err := layout.Write(ociDir, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("create OCI layout %s: %w", ociDir, err)
	}
	tagged := map[name.Reference]v1.Image{}
	var refs []string
	for _, s := range specs {
		img, err := buildImage(o, s, base)
		if err != nil {
			return nil, err
		}
		repo := o.Registry + "/" + s.name
		ref := repo + ":" + o.Version
		if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": ref,
			"io.containerd.image.name":          ref,
		})); err != nil {
			return nil, fmt.Errorf("write %s to the OCI layout: %w", ref, err)
		}
		for _, tag := range []string{o.Version, "latest"} {
			t, err := name.NewTag(repo+":"+tag, name.StrictValidation)
			if err != nil {
				return nil, fmt.Errorf("image reference %s:%s: %w", repo, tag, err)
			}
			tagged[t] = img
		}
		refs = append(refs, ref)
	}
	tarPath := filepath.Join(o.Out, "images.tar")
	if err := tarball.MultiRefWriteToFile(tarPath, tagged); err != nil {
		return nil, fmt.Errorf("write %s: %w", tarPath, err)
	}
	return refs, nil
}

func buildImage(o Options, s spec, base v1.Layer) (v1.Image, error) {
	if err := CheckStatic(s.binary); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(s.binary)
	if err != nil {
		return nil, fmt.Errorf("read %s binary: %w", s.name, err)
	}
	binLayer, err := layerOf(o.Created, []entry{
		{path: BinDir + "/" + s.name, mode: 0o755, data: bin},
	})
	if err != nil {
		return nil, fmt.Errorf("%s layer: %w", s.name, err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "imagebuild: /etc/passwd, /etc/group, " + CABundle + ", " + DataDir + ", /etc/wo, /tmp", Comment: "base filesystem"}},
		mutate.Addendum{Layer: binLayer, History: v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "imagebuild: " + BinDir + "/" + s.name}},
	)
	if err != nil {
		return nil, fmt.Errorf("%s layers: %w", s.name, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("%s config: %w", s.name, err)
	}
	cf = cf.DeepCopy()
	cf.Architecture = o.Arch
	cf.OS = "linux"
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.User = strconv.Itoa(UID) + ":" + strconv.Itoa(UID)
	cf.Config.Entrypoint = []string{BinDir + "/" + s.name}
	cf.Config.Cmd = nil
	cf.Config.WorkingDir = "/"
	cf.Config.Env = append([]string{"PATH=" + BinDir}, s.env...)
	cf.Config.ExposedPorts = map[string]struct{}{}
	for _, p := range s.ports {
		cf.Config.ExposedPorts[p] = struct{}{}
	}
	if len(s.volumes) > 0 {
		cf.Config.Volumes = map[string]struct{}{}
		for _, v := range s.volumes {
			cf.Config.Volumes[v] = struct{}{}
		}
	}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       s.name,
		"org.opencontainers.image.description": s.description,
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.source":      o.Source,
		"org.opencontainers.image.url":         o.Source,
		"org.opencontainers.image.created":     o.Created.Format(time.RFC3339),
	}
	if o.Revision != "" {
		cf.Config.Labels["org.opencontainers.image.revision"] = o.Revision
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("%s config: %w", s.name, err)
	}
	return img, nil
}

// CheckStatic refuses a binary that is not a static ELF executable: one
// with a PT_INTERP program header needs a dynamic loader and libc, which an
// empty base does not have (the container would fail with a confusing "no
// such file or directory").
func CheckStatic(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("%s: not an ELF executable: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked (it has an ELF interpreter): build it with CGO_ENABLED=0 for the empty base image", path)
		}
	}
	return nil
}

// readCABundle reads the CA certificates for the image and refuses a file
// that holds none: an image with an empty or mistaken bundle would build
// and only fail at run time, on the first TLS handshake with a collector.
func readCABundle(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA bundle: %w (install the ca-certificates package, or pass --ca-bundle)", err)
	}
	// The worker's own reader of trust bundles (tls.client_ca_file), the
	// stricter one: it refuses a bundle with a certificate that does not
	// parse, where Go's system roots would skip it.
	if _, err := tlsfiles.ParseBundle(b); err != nil {
		return nil, fmt.Errorf("CA bundle %s: %w", path, err)
	}
	return b, nil
}

// entry is one file or directory of a layer.
type entry struct {
	path string
	mode int64
	dir  bool
	uid  int
	data []byte
}

// baseLayer is the filesystem the binaries need besides themselves; cas
// is the PEM CA bundle.
func baseLayer(created time.Time, cas []byte) (v1.Layer, error) {
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", UID, UID)
	group := fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", UID)
	return layerOf(created, []entry{
		{path: "/etc", dir: true, mode: 0o755},
		{path: "/etc/passwd", mode: 0o644, data: []byte(passwd)},
		{path: "/etc/group", mode: 0o644, data: []byte(group)},
		{path: "/etc/ssl", dir: true, mode: 0o755},
		{path: "/etc/ssl/certs", dir: true, mode: 0o755},
		{path: CABundle, mode: 0o644, data: cas},
		{path: "/etc/wo", dir: true, mode: 0o755},
		{path: "/home", dir: true, mode: 0o755},
		{path: "/home/nonroot", dir: true, mode: 0o700, uid: UID},
		{path: "/tmp", dir: true, mode: 0o1777},
		{path: "/usr", dir: true, mode: 0o755},
		{path: "/usr/local", dir: true, mode: 0o755},
		{path: BinDir, dir: true, mode: 0o755},
		{path: "/var", dir: true, mode: 0o755},
		{path: "/var/lib", dir: true, mode: 0o755},
		{path: DataDir, dir: true, mode: 0o750, uid: UID},
	})
}

// layerOf makes a gzip-compressed OCI layer of the entries, in order, every
// timestamp set to created so the digest depends only on the content.
func layerOf(created time.Time, entries []entry) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{
			Name:    e.path[1:], // relative, as in `docker save` layers
			Mode:    e.mode,
			Uid:     e.uid,
			Gid:     e.uid,
			ModTime: created,
			Format:  tar.FormatPAX,
		}
		if e.dir {
			h.Typeflag = tar.TypeDir
			h.Name += "/"
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("tar header %s: %w", e.path, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("tar %s: %w", e.path, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("tar: %w", err)
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
