#!/usr/bin/env bash
# Runs a private PostgreSQL cluster in the foreground, for tests and benchmarks: creates it in
# <dir> on first use (initdb, trust authentication for local connections, superuser `sked`),
# then serves on 127.0.0.1:<port> only (no Unix socket) until stopped with SIGINT (fast
# shutdown) or SIGTERM. initdb and postgres refuse to run as root: as root the cluster runs as
# the `postgres` user (created by Debian's package), which then owns <dir>.
#
# Usage: scripts/postgres-server.sh <dir> <port> [postgres -c options...]
set -euo pipefail

dir="$1"
port="$2"
shift 2
bin="$("$(dirname "${BASH_SOURCE[0]}")/postgres-env.sh")"

as_owner() {
    if [ "$(id -u)" = 0 ]; then
        setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
    else
        "$@"
    fi
}

mkdir -p "$dir"
if [ "$(id -u)" = 0 ]; then
    chown postgres:postgres "$dir"
fi
if [ ! -f "$dir/PG_VERSION" ]; then
    as_owner "$bin/initdb" -D "$dir" -A trust -U sked -E UTF8 --no-sync >/dev/null
fi
exec_args=(-D "$dir" -h 127.0.0.1 -p "$port" -k "" -c fsync=on -c synchronous_commit=on "$@")
if [ "$(id -u)" = 0 ]; then
    exec setpriv --reuid=postgres --regid=postgres --init-groups -- "$bin/postgres" "${exec_args[@]}"
fi
exec "$bin/postgres" "${exec_args[@]}"
