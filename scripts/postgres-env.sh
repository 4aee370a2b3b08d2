#!/usr/bin/env bash
# Makes sure PostgreSQL's server binaries are on this machine and prints their directory.
# The self-hosted store's tests (crates/sked-postgres, the end-to-end tests) start a private
# cluster from them on a free 127.0.0.1 port (scripts/postgres-server.sh); nothing is started
# here. When no /usr/lib/postgresql/<major>/bin/initdb exists, Debian's `postgresql` package
# is installed with apt-get (root needed; safe from several processes at once: flock).
#
# Usage: scripts/postgres-env.sh     (prints e.g. /usr/lib/postgresql/15/bin)
# SKED_PG_BIN=<dir> uses that directory instead.
set -euo pipefail

find_bin() {
    if [ -n "${SKED_PG_BIN:-}" ]; then
        echo "$SKED_PG_BIN"
        return
    fi
    # The newest major version installed.
    ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1
}

bin="$(find_bin)"
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
    exec 9>/tmp/sked-postgres-install.lock
    flock 9
    bin="$(find_bin)"
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
        echo "installing PostgreSQL (Debian package postgresql)" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2 \
            || { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql >&2; }
        bin="$(find_bin)"
    fi
fi
[ -x "$bin/initdb" ] || { echo "no PostgreSQL server binaries found" >&2; exit 1; }
echo "$bin"
