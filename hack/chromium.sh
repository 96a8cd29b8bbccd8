#!/usr/bin/env bash
# chromium.sh: make sure Debian's chromium is installed, for the chat page's
# browser test (internal/chat, driven by chromedp). Prints the binary's path.
# Installs with apt-get when it is missing and we may (root, or sudo without a
# password); exits 1 naming the package when it cannot be had. Concurrent runs
# wait on one lock, so two test binaries never race apt.
set -euo pipefail
bin=/usr/bin/chromium
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
		echo "hack/chromium.sh: Debian package 'chromium' is not installed and this user cannot install it (not root, no sudo)" >&2
		exit 1
	fi
fi
if ! command -v apt-get >/dev/null; then
	echo "hack/chromium.sh: Debian package 'chromium' is not installed and there is no apt-get here" >&2
	exit 1
fi
lock="${XDG_CACHE_HOME:-$HOME/.cache}/wo-tools/chromium.lock"
mkdir -p "$(dirname "$lock")"
exec 9>"$lock"
flock 9
if [ ! -x "$bin" ]; then
	export DEBIAN_FRONTEND=noninteractive
	if ! $sudo apt-get install -y --no-install-recommends chromium >&2; then
		$sudo apt-get update >&2 || true
		$sudo apt-get install -y --no-install-recommends chromium >&2 || {
			echo "hack/chromium.sh: could not install Debian package 'chromium'" >&2
			exit 1
		}
	fi
fi
[ -x "$bin" ] || { echo "hack/chromium.sh: Debian package 'chromium' installed but $bin is missing" >&2; exit 1; }
echo "$bin"
