#!/usr/bin/env bash
# chromium.sh: make sure Debian's chromium is installed, for the chat page's
# browser test (internal/chat, driven by chromedp). Prints the binary's path.
# Installs with apt-get when it is missing and we may (root, or sudo without a
# password: hack/lib/apt.sh); exits 1 naming the package when it cannot be
# had.
set -euo pipefail
# shellcheck source=hack/lib/apt.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/apt.sh"
bin=/usr/bin/chromium
if [ ! -x "$bin" ]; then
	apt_install hack/chromium.sh chromium
fi
[ -x "$bin" ] || { echo "hack/chromium.sh: Debian package 'chromium' installed but $bin is missing" >&2; exit 1; }
echo "$bin"
