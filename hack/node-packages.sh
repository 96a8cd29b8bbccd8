#!/usr/bin/env bash
# node-packages.sh: make sure the Debian packages hack/cluster-up.sh's node
# runs on are installed (containerd, runc, the CNI plugins, iptables,
# conntrack, openssl, and iproute2 and procps for ip and sysctl, which a
# minimal image may lack), installing the missing ones with apt-get when we may
# (hack/lib/apt.sh). cluster-up.sh calls it; exits 1 naming what it could
# not have.
set -euo pipefail
# shellcheck source=hack/lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
apt_install hack/node-packages.sh containerd runc containernetworking-plugins iptables conntrack openssl iproute2 procps
