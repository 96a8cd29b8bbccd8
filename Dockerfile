# syntax=docker/dockerfile:1
# The wo images for users who build with Docker (or BuildKit, podman,
# buildah). `make image` builds the same two images without a daemon
# (hack/imagebuild): same files, user, entrypoints, ports and labels.
#
#   docker build --target worker   -t ghcr.io/writeonce/wo-worker:0.1.0 .
#   docker build --target operator -t ghcr.io/writeonce/wo-operator:0.1.0 .
#
# Both are an empty base plus static (CGO_ENABLED=0) binaries and the CA
# certificates (/etc/ssl/certs/ca-certificates.crt), running as
# the numeric nonroot user 65532 (the operator's pods run as it), with the
# worker's data in /var/lib/wo.

ARG GO_VERSION=1.26
FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETARCH
# The version (worker --version, wo_build_info) is the image's; the commit
# comes from .git when the context has it, else from REVISION if given.
ARG VERSION=0.1.0
ARG REVISION=
RUN CGO_ENABLED=0 GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags "-s -w -X github.com/writeonce/wo/internal/buildinfo.version=${VERSION} -X github.com/writeonce/wo/internal/buildinfo.commit=${REVISION}" \
      -o /out/ ./cmd/worker ./cmd/operator
# The filesystem of hack/imagebuild's base layer, with the golang image's
# Debian CA bundle (an https OTLP collector is verified against it).
RUN mkdir -p /rootfs/etc/wo /rootfs/etc/ssl/certs /rootfs/home/nonroot /rootfs/tmp /rootfs/usr/local/bin /rootfs/var/lib/wo && \
    cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt && \
    printf 'root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >/rootfs/etc/passwd && \
    printf 'root:x:0:\nnonroot:x:65532:\n' >/rootfs/etc/group && \
    chmod 1777 /rootfs/tmp && chmod 0750 /rootfs/var/lib/wo && chmod 0700 /rootfs/home/nonroot && \
    chown 65532:65532 /rootfs/var/lib/wo /rootfs/home/nonroot

FROM scratch AS base
COPY --from=build /rootfs/ /
ARG VERSION=0.1.0
ARG REVISION=""
LABEL org.opencontainers.image.source="https://github.com/writeonce/wo" \
      org.opencontainers.image.url="https://github.com/writeonce/wo" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
ENV PATH=/usr/local/bin
USER 65532:65532
WORKDIR /

FROM base AS operator
COPY --from=build /out/operator /usr/local/bin/wo-operator
LABEL org.opencontainers.image.title="wo-operator" \
      org.opencontainers.image.description="wo operator: reconciles Worker resources (wo.writeonce.dev/v1alpha1)"
EXPOSE 8080/tcp 8081/tcp
ENTRYPOINT ["/usr/local/bin/wo-operator"]

# The worker is the last stage, so a plain `docker build .` builds it.
FROM base AS worker
COPY --from=build /out/worker /usr/local/bin/wo-worker
LABEL org.opencontainers.image.title="wo-worker" \
      org.opencontainers.image.description="wo worker: the shard-per-core actor runtime serving records, chat and the ops endpoints"
ENV WO_DATA_DIR=/var/lib/wo
VOLUME /var/lib/wo
EXPOSE 8080/tcp 7070/tcp 9090/tcp
ENTRYPOINT ["/usr/local/bin/wo-worker"]
