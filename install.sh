#!/usr/bin/env bash
# Build kubectl-meta from this checkout and install it onto your PATH, so that
# `kubectl meta ...` works, with the kubectl_complete-meta helper beside it (shell completion
# of `kubectl meta <TAB>`). Safe to re-run: every run rebuilds and replaces both.
#
#   ./install.sh                   install into $CARGO_HOME/bin (default ~/.cargo/bin)
#   ./install.sh --root DIR        install into DIR/bin
#   ./install.sh --run-sandbox     install, then start a throwaway sandbox and smoke-test it with kubectl
#   ./install.sh --run-example     install, then run the hello-world controller on a throwaway sandbox
set -euo pipefail

REPO_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
BIN_NAME="kubectl-meta"

usage() {
    cat <<'EOF'
Usage: ./install.sh [--root DIR] [--run-sandbox] [--run-example] [--help]

Builds kubectl-meta from this checkout with `cargo install --path . --locked`
and installs it onto your PATH so that `kubectl meta ...` works, with the
kubectl_complete-meta helper beside it (kubectl 1.26+ runs it to complete
`kubectl meta <TAB>`). Re-running rebuilds and replaces both.

Options:
  --root DIR      Install into DIR/bin instead of the cargo default
                  ($CARGO_INSTALL_ROOT, else $CARGO_HOME, else ~/.cargo).
  --run-sandbox   After installing, start `kubectl-meta sandbox --ephemeral` in
                  the background, wait for it (at most 60s), run a short kubectl
                  smoke test against it (apply a ConfigMap, read it back, list
                  namespaces) and stop it again. Needs kubectl.
  --run-example   After installing, run the main job on a throwaway sandbox:
                  `kubectl-meta dev --sandbox --apply -f examples/hello-world --once`
                  (the CompositeController example with its Python hook: the
                  engine creates a Pod for the sample HelloWorld parent, writes its
                  status, and exits when everything converged). Needs python3.
  -h, --help      Show this help.

Environment:
  CARGO_HOME, CARGO_INSTALL_ROOT, CARGO_TARGET_DIR are honoured as by cargo.

Requirements: the Rust toolchain (cargo, via https://rustup.rs) and a C
compiler (the build compiles the bundled SQLite and aws-lc).
EOF
}

say() { printf '==> %s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

ROOT=""
RUN_SANDBOX=0
RUN_EXAMPLE=0
while [[ $# -gt 0 ]]; do
    case "$1" in
    --root)
        [[ $# -ge 2 && -n "$2" ]] || die "--root needs a directory (see --help)"
        ROOT="$2"
        shift 2
        ;;
    --root=*)
        ROOT="${1#--root=}"
        [[ -n "$ROOT" ]] || die "--root needs a directory (see --help)"
        shift
        ;;
    --run-sandbox)
        RUN_SANDBOX=1
        shift
        ;;
    --run-example)
        RUN_EXAMPLE=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown argument: $1 (see --help)" ;;
    esac
done

# ---------------------------------------------------------------- prerequisites

[[ -f "$REPO_DIR/Cargo.toml" ]] || die "$REPO_DIR/Cargo.toml not found; run install.sh from a kubectl-meta checkout"

if ! command -v cargo >/dev/null 2>&1; then
    die "cargo not found on PATH.
  Install the Rust toolchain with rustup (https://rustup.rs):
    curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh
  then open a new shell (or run: . \"\$HOME/.cargo/env\") and re-run ./install.sh"
fi

# Minimum Rust version, from Cargo.toml's rust-version (cargo would also refuse, less clearly).
need_rust="$(sed -n 's/^rust-version *= *"\([0-9.]*\)".*/\1/p' "$REPO_DIR/Cargo.toml" | head -n1)"
have_rust="$(rustc --version 2>/dev/null | awk '{print $2}' || true)"
if [[ -n "$need_rust" && -n "$have_rust" ]]; then
    lowest="$(printf '%s\n%s\n' "$need_rust" "${have_rust%%-*}" | sort -V | head -n1)"
    if [[ "$lowest" != "$need_rust" ]]; then
        die "Rust $have_rust is too old: kubectl-meta needs Rust >= $need_rust.
  Update it with: rustup update stable"
    fi
fi

# rusqlite builds SQLite from source and rustls' aws-lc backend builds C code: a C compiler is required.
cc_found=""
if [[ -n "${CC:-}" ]] && command -v "${CC%% *}" >/dev/null 2>&1; then
    cc_found="${CC%% *}"
else
    for c in cc gcc clang; do
        if command -v "$c" >/dev/null 2>&1; then
            cc_found="$c"
            break
        fi
    done
fi
if [[ -z "$cc_found" ]]; then
    die "no C compiler found (looked for \$CC, cc, gcc, clang).
  The build compiles the bundled SQLite (rusqlite) and aws-lc (TLS), so it needs one:
    Debian/Ubuntu:  sudo apt-get install build-essential
    Fedora/RHEL:    sudo dnf install gcc make
    macOS:          xcode-select --install"
fi

# ---------------------------------------------------------------- install

install_args=(install --path "$REPO_DIR" --locked --force)
if [[ -n "$ROOT" ]]; then
    mkdir -p -- "$ROOT"
    ROOT="$(cd -- "$ROOT" && pwd -P)"
    install_args+=(--root "$ROOT")
    BIN_DIR="$ROOT/bin"
elif [[ -n "${CARGO_INSTALL_ROOT:-}" ]]; then
    BIN_DIR="$CARGO_INSTALL_ROOT/bin"
else
    BIN_DIR="${CARGO_HOME:-$HOME/.cargo}/bin"
fi

say "building and installing $BIN_NAME (release build; the first one takes a few minutes)"
say "cargo ${install_args[*]}"
cargo "${install_args[@]}"

BIN="$BIN_DIR/$BIN_NAME"
if [[ ! -x "$BIN" ]]; then
    # An install.root in a cargo config file can move the install; fall back to PATH.
    if command -v "$BIN_NAME" >/dev/null 2>&1; then
        BIN="$(command -v "$BIN_NAME")"
        BIN_DIR="$(dirname -- "$BIN")"
    else
        die "cargo install finished but $BIN does not exist (is install.root set in a cargo config file?)"
    fi
fi
say "installed $BIN ($("$BIN" --version))"

# kubectl (1.26+) completes `kubectl meta <TAB>` by running kubectl_complete-meta from PATH;
# the helper asks the kubectl-meta beside it.
HELPER="$BIN_DIR/kubectl_complete-meta"
cp -- "$REPO_DIR/completion/kubectl_complete-meta" "$HELPER.tmp.$$"
chmod 0755 "$HELPER.tmp.$$"
mv -f -- "$HELPER.tmp.$$" "$HELPER"
say "installed $HELPER (shell completion for 'kubectl meta <TAB>' through kubectl's completion)"

# ---------------------------------------------------------------- post-install checks

on_path="$(command -v "$BIN_NAME" 2>/dev/null || true)"
PATH_OK=1
if [[ -z "$on_path" ]]; then
    PATH_OK=0
    warn "$BIN_DIR is not on your PATH, so kubectl cannot find the plugin. Add it (e.g. in ~/.bashrc or ~/.profile):"
    # shellcheck disable=SC2016 # $PATH is meant literally, for the user to paste
    printf '    export PATH="%s:$PATH"\n' "$BIN_DIR" >&2
elif [[ "$(cd -- "$(dirname -- "$on_path")" && pwd -P)/$BIN_NAME" != "$(cd -- "$BIN_DIR" && pwd -P)/$BIN_NAME" ]]; then
    PATH_OK=0
    warn "another $BIN_NAME comes first on your PATH: $on_path (just installed: $BIN). Remove it, or put $BIN_DIR first:"
    # shellcheck disable=SC2016 # $PATH is meant literally, for the user to paste
    printf '    export PATH="%s:$PATH"\n' "$BIN_DIR" >&2
else
    say "$BIN_NAME is on your PATH"
fi

if command -v kubectl >/dev/null 2>&1; then
    # `kubectl plugin list` exits non-zero when it finds no plugins at all; look at its output only.
    plugins="$(PATH="$BIN_DIR:$PATH" kubectl plugin list 2>&1 || true)"
    if grep -q "$BIN_NAME" <<<"$plugins"; then
        if [[ $PATH_OK -eq 1 ]]; then
            say "kubectl plugin list shows $BIN_NAME: run 'kubectl meta --help'"
        else
            say "kubectl will find the plugin once $BIN_DIR is first on your PATH (see above)"
        fi
    else
        warn "kubectl plugin list does not show $BIN_NAME; its output was:"
        printf '%s\n' "$plugins" >&2
    fi
    # kubectl's hidden completion command, as the shell calls it on `kubectl meta <TAB>`.
    if PATH="$BIN_DIR:$PATH" kubectl __complete meta "" 2>/dev/null | grep -q '^dev'; then
        say "'kubectl meta <TAB>' completes (with kubectl's shell completion loaded: source <(kubectl completion bash))"
    else
        warn "kubectl does not complete 'kubectl meta <TAB>' (needs kubectl 1.26 or newer and $HELPER on PATH)"
    fi
else
    warn "kubectl not found on PATH: $BIN_NAME is installed, but 'kubectl meta' needs kubectl (https://kubernetes.io/docs/tasks/tools/)."
fi

# ---------------------------------------------------------------- --run-example

if [[ $RUN_EXAMPLE -eq 1 ]]; then
    command -v python3 >/dev/null 2>&1 || die "--run-example needs python3 on PATH (the example hooks are Python scripts)"
    say "running: $BIN dev --sandbox --apply -f examples/hello-world --once"
    EXAMPLE_HOME="$(mktemp -d "${TMPDIR:-/tmp}/kubectl-meta-example.XXXXXX")"
    if ! "$BIN" dev --sandbox --write-kubeconfig "$EXAMPLE_HOME/kubeconfig" \
        --apply -f "$REPO_DIR/examples/hello-world" --once; then
        rm -rf -- "$EXAMPLE_HOME"
        die "the hello-world example did not converge (output above)"
    fi
    rm -rf -- "$EXAMPLE_HOME"
    say "the hello-world controller ran: it created Pod default/hello for HelloWorld default/hello"
    say "next: kubectl meta dev --sandbox --apply -f $REPO_DIR/examples/hello-world   (keeps running; Ctrl-C stops)"
fi

[[ $RUN_SANDBOX -eq 1 ]] || exit 0

# ---------------------------------------------------------------- --run-sandbox

command -v kubectl >/dev/null 2>&1 || die "--run-sandbox needs kubectl on PATH"

WORK="$(mktemp -d "${TMPDIR:-/tmp}/kubectl-meta-sandbox.XXXXXX")"
KC="$WORK/kubeconfig"
LOG="$WORK/sandbox.log"
SANDBOX_PID=""

cleanup() {
    local rc=$?
    if [[ -n "$SANDBOX_PID" ]] && kill -0 "$SANDBOX_PID" 2>/dev/null; then
        say "stopping the sandbox (pid $SANDBOX_PID)"
        kill -TERM "$SANDBOX_PID" 2>/dev/null || true
        for _ in $(seq 1 50); do
            kill -0 "$SANDBOX_PID" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$SANDBOX_PID" 2>/dev/null || true
        wait "$SANDBOX_PID" 2>/dev/null || true
    fi
    rm -rf -- "$WORK"
    exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "starting: $BIN sandbox --ephemeral --write-kubeconfig $KC"
"$BIN" sandbox --ephemeral --write-kubeconfig "$KC" >"$LOG" 2>&1 &
SANDBOX_PID=$!

say "waiting for the sandbox to answer (at most 60s)"
deadline=$((SECONDS + 60))
ready=0
while ((SECONDS < deadline)); do
    if ! kill -0 "$SANDBOX_PID" 2>/dev/null; then
        cat "$LOG" >&2 || true
        die "the sandbox exited before it became ready (log above)"
    fi
    if [[ -s "$KC" ]] && kubectl --kubeconfig "$KC" get ns >/dev/null 2>&1; then
        ready=1
        break
    fi
    sleep 0.5
done
if [[ $ready -ne 1 ]]; then
    cat "$LOG" >&2 || true
    die "the sandbox did not become ready within 60s (log above)"
fi
say "sandbox ready: $(head -n1 "$LOG")"

k() { kubectl --kubeconfig "$KC" "$@"; }

say "kubectl apply -f - (ConfigMap kubectl-meta-smoke)"
k apply -f - <<'EOF'
{
  "apiVersion": "v1",
  "kind": "ConfigMap",
  "metadata": {"name": "kubectl-meta-smoke", "namespace": "default", "labels": {"app": "kubectl-meta-smoke"}},
  "data": {"greeting": "hello from kubectl-meta"}
}
EOF

say "kubectl get configmap kubectl-meta-smoke -o yaml"
k get configmap kubectl-meta-smoke -o yaml

got="$(k get configmap kubectl-meta-smoke -o 'jsonpath={.data.greeting}')"
[[ "$got" == "hello from kubectl-meta" ]] || die "read back data.greeting=\"$got\", expected \"hello from kubectl-meta\""

say "kubectl get namespaces"
k get namespaces

say "smoke test passed: the sandbox works with kubectl"
say "for a sandbox that keeps running, start 'kubectl meta sandbox' in another terminal and use the kubeconfig it prints"
