// Command imagebuild builds wo's two container images, wo-worker and
// wo-operator, without a Docker daemon, on github.com/google/go-containerregistry.
//
//	CGO_ENABLED=0 go build -trimpath -o build/bin/ ./cmd/worker ./cmd/operator
//	go run ./hack/imagebuild --worker build/bin/worker --operator build/bin/operator \
//	    --out build/image --version 0.1.0 --revision "$(git rev-parse HEAD)"
//
// (`make image` does both.) Each image is an empty base plus two layers:
//
//  1. the filesystem the binaries expect: /etc/passwd and /etc/group with the
//     nonroot user (uid and gid 65532, the operator's NonRootUID), the data
//     directory /var/lib/wo owned by it, /etc/wo for worker.toml, /tmp, and
//     the CA certificates at /etc/ssl/certs/ca-certificates.crt (copied from
//     the build machine's ca-certificates package, or --ca-bundle) so an
//     https OTLP collector's certificate can be verified;
//  2. one static binary in /usr/local/bin (wo-worker or wo-operator).
//
// The config runs as "65532:65532" (numeric, so runAsNonRoot can be checked
// by the kubelet), sets the entrypoint to the binary, WO_DATA_DIR, the
// exposed ports, the data volume, and the OCI labels
// org.opencontainers.image.{title,description,version,revision,source,created}.
//
// It writes, under --out:
//
//	oci/          an OCI image layout holding both images, each annotated with
//	              its reference (org.opencontainers.image.ref.name and
//	              io.containerd.image.name): `ctr image import` and skopeo read it;
//	images.tar    a `docker save` style tarball of both images under every tag
//	              (the version and latest): `docker load -i` and `ctr import` read it.
//
// The binaries must be static (no ELF interpreter): an empty base has no
// libc. A dynamically linked binary is refused with an error naming it.
// A CA bundle that is missing or holds no certificate is refused too.
// Output is reproducible for the same CA bundle: every timestamp is --created (default: the
// SOURCE_DATE_EPOCH environment variable, else the Unix epoch).
package main
