// Command nodeimage packs one static binary into a single-layer image
// tarball that `ctr images import` reads, for the images hack/cluster-up.sh's
// node needs and cannot pull (its sandbox "pause" image, CoreDNS):
//
//	nodeimage --binary bin/pause --ref wo.local/pause:1 --out pause.tar -- /pause
//
// The arguments after the flags are the image's entrypoint. The layer holds
// the binary at /NAME (its base name), world-executable, owned by root, and
// the CA bundle of this machine is not copied: these images talk only to
// the node's own API server.
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func main() {
	binary := flag.String("binary", "", "static binary to put at /NAME")
	ref := flag.String("ref", "", "image reference to tag, e.g. wo.local/pause:1")
	out := flag.String("out", "", "image tarball to write")
	user := flag.String("user", "", "the image's user (empty: root)")
	flag.Parse()
	if *binary == "" || *ref == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: nodeimage --binary FILE --ref REF --out FILE [--user UID] -- ENTRYPOINT...")
		os.Exit(2)
	}
	if err := build(*binary, *ref, *out, *user, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "nodeimage:", err)
		os.Exit(1)
	}
}

func build(binary, ref, out, user string, entrypoint []string) error {
	tag, err := name.NewTag(ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("image reference %q: %w", ref, err)
	}
	body, err := os.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("read the binary: %w", err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	hdr := &tar.Header{
		Name: filepath.Base(binary), Mode: 0o755, Size: int64(len(body)),
		Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0),
	}
	if err := tw.WriteHeader(hdr); err != nil {
		return fmt.Errorf("layer header: %w", err)
	}
	if _, err := tw.Write(body); err != nil {
		return fmt.Errorf("layer body: %w", err)
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close the layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(buf.Bytes())), nil
	})
	if err != nil {
		return fmt.Errorf("layer: %w", err)
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return fmt.Errorf("append the layer: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return fmt.Errorf("config: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Architecture, cf.OS = "amd64", "linux"
	cf.Config = v1.Config{Entrypoint: entrypoint, User: user}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return fmt.Errorf("set the config: %w", err)
	}
	if err := tarball.WriteToFile(out, tag, img); err != nil {
		return fmt.Errorf("write %s: %w", out, err)
	}
	return nil
}
