#!/usr/bin/env bash
# Fuzzes sked-core's parsers and job validation with cargo-fuzz (libFuzzer): the targets in
# fuzz/fuzz_targets/ (cron, duration, timestamp, job_spec; each file's header says what it checks).
#
# Installs cargo-fuzz (crates.io, the pinned version below) into .tools/cargo-fuzz/ at the
# repository root, once: idempotent (does nothing when that version is there) and safe to run
# from several processes at once (flock), like scripts/moto-env.sh. The machine has the stable
# toolchain only; RUSTC_BOOTSTRAP=1 lets it take the -Z flags cargo-fuzz builds with.
#
# Usage: scripts/fuzz.sh SECONDS [TARGET...]  builds the targets, then runs each (all by
#                                             default) for SECONDS seconds (-max_total_time)
#        scripts/fuzz.sh install              installs cargo-fuzz only, prints its path
# Each run reads the committed seeds (fuzz/corpus/TARGET/, never written to) and keeps what it
# finds in fuzz/target/corpus/TARGET/, so later runs start from there; with FUZZ_FRESH=1 it
# starts from the seeds alone and throws its finds away (a run whose length does not grow with
# that corpus: `make fuzz-quick`). libFuzzer's output goes to fuzz/target/logs/TARGET.log.
# A failing input (a panic, or one input running over 30 s) is saved under
# fuzz/artifacts/TARGET/, its report printed, and the script exits non-zero after the remaining
# targets have run. Replay one: scripts/fuzz.sh replay TARGET fuzz/artifacts/TARGET/crash-…
# (fuzz/findings/ keeps inputs that fail against sked-core as it is; see its README).
# FUZZ_ARGS adds libFuzzer flags (e.g. FUZZ_ARGS="-jobs=2 -workers=2").
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=0.13.2
tools="${CARGO_FUZZ_ROOT:-$root/.tools/cargo-fuzz}"
bin="$tools/bin/cargo-fuzz"
targets=(cron duration timestamp job_spec)
# Sanitizer of the build: the code under test is safe Rust, so AddressSanitizer would mostly
# slow the runs down; libFuzzer's coverage and Rust's own checks (debug assertions, overflow
# checks) stay on.
build_flags=(--release --debug-assertions --sanitizer none)

install() {
    if [ -x "$bin" ] && [ "$("$bin" --version 2>/dev/null)" = "cargo-fuzz $version" ]; then
        return
    fi
    cargo install cargo-fuzz --version "$version" --locked --root "$tools" --quiet
}

mkdir -p "$tools"
(
    if command -v flock >/dev/null 2>&1; then
        flock 9
    fi
    install
) 9>"$tools/.lock"

export RUSTC_BOOTSTRAP=1
fuzz() { (cd "$root" && "$bin" fuzz "$@"); }

case "${1:-}" in
    install)
        echo "$bin"
        exit 0
        ;;
    replay)
        [ $# -ge 3 ] || { echo "usage: $0 replay TARGET FILE..." >&2; exit 2; }
        target="$2"
        shift 2
        fuzz run "${build_flags[@]}" "$target" "$@"
        exit
        ;;
    '' | *[!0-9]*)
        echo "usage: $0 SECONDS [TARGET...] | install | replay TARGET FILE..." >&2
        exit 2
        ;;
esac
seconds="$1"
shift
[ $# -eq 0 ] || targets=("$@")

fuzz build "${build_flags[@]}"
mkdir -p "$root/fuzz/target/logs"
failed=()
for target in "${targets[@]}"; do
    work="$root/fuzz/target/corpus/$target"
    if [ "${FUZZ_FRESH:-0}" = 1 ]; then
        work="$root/fuzz/target/corpus-fresh/$target"
        rm -rf "$work"
    fi
    seeds="$root/fuzz/corpus/$target"
    log="$root/fuzz/target/logs/$target.log"
    dict="$root/fuzz/dict/$target.dict"
    mkdir -p "$work" "$seeds"
    args=(-max_total_time="$seconds" -timeout=30 -print_final_stats=1)
    [ ! -f "$dict" ] || args+=(-dict="$dict")
    # shellcheck disable=SC2206 # FUZZ_ARGS is a list of flags
    args+=(${FUZZ_ARGS:-})
    start=$(date +%s)
    if fuzz run "${build_flags[@]}" "$target" "$work" "$seeds" -- "${args[@]}" >"$log" 2>&1; then
        status=ok
    else
        status=FAILED
        failed+=("$target")
    fi
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n1)
    speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -n1)
    # -fork prints no final stats: the last status line's count, and runs over the run's time.
    [ -n "$runs" ] || runs=$(sed -n 's/^#\([0-9]*\)[: ].*/\1/p' "$log" | tail -n1)
    [ -n "$speed" ] || [ -z "$runs" ] || speed=$((runs / ($(date +%s) - start + 1)))
    slowest=$(sed -n 's/^stat::slowest_unit_time_sec: *//p' "$log" | tail -n1)
    echo "fuzz $target: $status, ${runs:-?} runs in $(($(date +%s) - start)) s (${speed:-?} exec/s," \
        "slowest input ${slowest:-?} s), corpus $(find "$work" -type f | wc -l) inputs"
    if [ "$status" != ok ]; then
        # The report: libFuzzer's lines from the failure on.
        sed -n '/panicked at\|==ERROR\|ALARM\|out-of-memory\|deadly signal/,$p' "$log" | sed -n 1,60p
        echo "(full output: $log)"
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: failing targets: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
    exit 1
fi
