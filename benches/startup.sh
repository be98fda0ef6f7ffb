#!/usr/bin/env bash
# Start-up time of kubectl-meta's quick commands, and the size of the binary (and archive).
#
#   benches/startup.sh [BINARY] [ARCHIVE]
#
# BINARY defaults to target/release/kubectl-meta (build it with scripts/release.sh, or
# `cargo build --release`); ARCHIVE, if given, is a release archive whose size is reported.
# Uses hyperfine when it is installed (more careful statistics), else runs each command N times
# (N=${RUNS:-200}) in a shell loop and reports the mean, minus the mean of running /bin/true the
# same way (the fork+exec cost of any program), so the figure is what kubectl-meta itself adds.
# A benchmark, not a test: it prints figures and has no thresholds.
set -euo pipefail

REPO_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
BIN="${1:-${CARGO_TARGET_DIR:-$REPO_DIR/target}/release/kubectl-meta}"
ARCHIVE="${2:-}"
RUNS="${RUNS:-200}"
[[ -x "$BIN" ]] || {
    echo "error: no executable at $BIN (build one with scripts/release.sh, or pass its path)" >&2
    exit 2
}

BIN="$(cd -- "$(dirname -- "$BIN")" && pwd -P)/$(basename -- "$BIN")"

size() { wc -c <"$1" | tr -d ' '; }
mib() { awk -v b="$1" 'BEGIN { printf "%.2f MiB", b / 1048576 }'; }

echo "binary:  $BIN"
echo "         $(size "$BIN") bytes ($(mib "$(size "$BIN")"))"
if [[ -n "$ARCHIVE" ]]; then
    echo "archive: $ARCHIVE"
    echo "         $(size "$ARCHIVE") bytes ($(mib "$(size "$ARCHIVE")"))"
fi
echo "version: $("$BIN" --version)"
echo

# kubectl-meta's state must not leak into (or come from) the user's.
XDG_DATA_HOME="$(mktemp -d)"
export XDG_DATA_HOME
trap 'rm -rf -- "$XDG_DATA_HOME"' EXIT

commands=(
    "--help"
    "version"
    "version -o json"
    "__complete -- dev --"
)

# Through kubectl, as users run it: kubectl's own start-up (a Go binary) is most of it, so
# `kubectl version --client` is measured beside it.
via_kubectl=()
if command -v kubectl >/dev/null 2>&1; then
    ln -s -- "$BIN" "$XDG_DATA_HOME/kubectl-meta"
    export PATH="$XDG_DATA_HOME:$PATH"
    via_kubectl=("kubectl meta version" "kubectl version --client")
fi

if command -v hyperfine >/dev/null 2>&1; then
    args=()
    for c in "${commands[@]}"; do
        args+=("$BIN $c")
    done
    hyperfine --warmup 20 --runs "$RUNS" -N "${args[@]}"
    if [[ ${#via_kubectl[@]} -gt 0 ]]; then
        hyperfine --warmup 5 --runs "$((RUNS / 4 + 1))" -N "${via_kubectl[@]}"
    fi
    exit 0
fi

now_ns() { date +%s%N; }
loop_ms() { # mean wall time of one run, in ms (3 decimals)
    local start end
    start=$(now_ns)
    for ((i = 0; i < RUNS; i++)); do
        "$@" >/dev/null 2>&1
    done
    end=$(now_ns)
    awk -v s="$start" -v e="$end" -v n="$RUNS" 'BEGIN { printf "%.3f", (e - s) / n / 1e6 }'
}

for ((i = 0; i < 20; i++)); do "$BIN" --help >/dev/null; done # warm the page cache
base=$(loop_ms /bin/true)
printf '%-28s %10s %12s\n' "command ($RUNS runs each)" "mean ms" "minus exec"
printf '%-28s %10s %12s\n' "/bin/true (fork+exec)" "$base" "-"
for c in "${commands[@]}"; do
    # shellcheck disable=SC2086 # the command's words are meant to split
    t=$(loop_ms "$BIN" $c)
    printf '%-28s %10s %12s\n' "kubectl-meta $c" "$t" "$(awk -v t="$t" -v b="$base" 'BEGIN { printf "%.3f", t - b }')"
done
for c in "${via_kubectl[@]}"; do
    # shellcheck disable=SC2086
    t=$(loop_ms $c)
    printf '%-28s %10s %12s\n' "$c" "$t" "$(awk -v t="$t" -v b="$base" 'BEGIN { printf "%.3f", t - b }')"
done
