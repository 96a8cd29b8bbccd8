# shellcheck shell=bash
# apt.sh: apt_install WHO PKG...: installs the Debian packages PKG that are
# not installed yet, with apt-get, when this user may (root, or sudo without
# a password); otherwise fails naming them. WHO prefixes the messages.
# Every caller takes the same lock, so two scripts run at once (.ci/run
# starts its tools together) never race apt-get for dpkg's lock, which
# fails rather than waits. Sourced, not run.

apt_install() {
	local who="$1" missing=() p sudo=""
	shift
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "${p}" 2>/dev/null | grep -q "install ok installed" || missing+=("${p}")
	done
	((${#missing[@]})) || return 0
	if [[ "$(id -u)" != 0 ]]; then
		if command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo="sudo -n"; else
			echo "${who}: Debian packages not installed and this user cannot install them (not root, no sudo): ${missing[*]}" >&2
			return 1
		fi
	fi
	if ! command -v apt-get >/dev/null; then
		echo "${who}: Debian packages not installed and there is no apt-get here: ${missing[*]}" >&2
		return 1
	fi
	local lock="${XDG_CACHE_HOME:-$HOME/.cache}/wo-tools/apt.lock"
	mkdir -p "$(dirname "${lock}")"
	(
		flock 9
		export DEBIAN_FRONTEND=noninteractive
		# A fresh machine's package lists may be stale or absent: update
		# once and try again before giving up.
		if ! ${sudo} apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
			${sudo} apt-get update >&2 || true
			${sudo} apt-get install -y --no-install-recommends "${missing[@]}" >&2 || {
				echo "${who}: could not install the Debian packages ${missing[*]}" >&2
				exit 1
			}
		fi
	) 9>"${lock}"
}
