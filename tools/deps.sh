#!/bin/sh
# deps.sh ITEM... — make sure what deepdesk needs from Debian is installed.
# An ITEM is a package name, or CMD=PACKAGE: satisfied when the command CMD is on
# PATH however it got there (node from another repository, say), else PACKAGE.
# As root the missing packages are installed with apt-get; otherwise the exact
# apt-get line is printed and the script fails, so `make run` stops with it.
missing=""
for item in "$@"; do
	case "$item" in
	*=*)
		cmd=${item%%=*}
		pkg=${item#*=}
		command -v "$cmd" >/dev/null 2>&1 && continue
		;;
	*) pkg=$item ;;
	esac
	dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing="$missing $pkg"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
	echo "Installing Debian packages:$missing"
	export DEBIAN_FRONTEND=noninteractive
	# Packages with daemons (munge, slurmctld, slurmd for the Slurm tests) must not
	# start them: the tests run their own in a temporary folder.  A policy-rc.d
	# that answers 101 ("action forbidden") keeps invoke-rc.d from starting any,
	# and goes again afterwards unless one was there before.
	policy=/usr/sbin/policy-rc.d
	own_policy=""
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\n# deepdesk tools/deps.sh: no daemon starts during this install\nexit 101\n' >"$policy" &&
			chmod 755 "$policy" && own_policy=1
	fi
	ok=1
	apt-get update -qq && apt-get install -y -qq --no-install-recommends $missing >/dev/null || ok=""
	[ -n "$own_policy" ] && rm -f "$policy"
	if [ -z "$ok" ]; then
		echo "apt-get could not install:$missing" >&2
		exit 1
	fi
	exit 0
fi
echo "deepdesk needs these Debian packages. Install them, then run make again:" >&2
echo "" >&2
echo "    sudo apt-get install$missing" >&2
echo "" >&2
exit 1
