# Sourced by the scripts that test a real `sked server` (schemathesis.sh, dashboard-test.sh):
# builds `sked` (debug), starts it on a free 127.0.0.1 port with a temporary data dir, and
# stops it (and removes the dir) when the sourcing script exits.
#
#   start_sked_server <who> <workers>
#
# Reads $cargo. Sets $sked (the binary), $work (the temporary dir; data in $work/data, the
# server's stderr in $work/server.log), $server_pid and $url (http://127.0.0.1:<port>).

start_sked_server() {
    local who="$1" workers="$2" target_dir line
    "$cargo" build --quiet -p sked
    target_dir="$("$cargo" metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')"
    sked="$target_dir/debug/sked"

    work="$(mktemp -d)"
    server_pid=""
    trap stop_sked_server EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    mkdir -p "$work/data"
    # The server prints one line once it serves: `sked listening on http://127.0.0.1:<port>`.
    mkfifo "$work/stdout"
    "$sked" server --data-dir "$work/data" --listen 127.0.0.1:0 --workers "$workers" \
        >"$work/stdout" 2>"$work/server.log" &
    server_pid=$!
    line=""
    read -r -t 60 line <"$work/stdout" || true
    url="${line#sked listening on }"
    if [ -z "$line" ] || [ "$url" = "$line" ]; then
        echo "$who: the server did not start:" >&2
        cat "$work/server.log" >&2
        exit 1
    fi
    case "$url" in
        http://127.0.0.1:*) ;;
        *) echo "$who: unexpected address $url" >&2; exit 1 ;;
    esac
    # Keep draining the server's stdout so it never blocks on a full pipe.
    cat "$work/stdout" >/dev/null &
}

stop_sked_server() {
    if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    rm -rf "$work"
}
