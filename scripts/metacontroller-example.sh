#!/usr/bin/env bash
# Run one of Metacontroller's examples, its own test.sh unmodified, with its controllers run by
# `kubectl-meta dev` and its hooks run locally instead of in-cluster.
#
#   scripts/metacontroller-example.sh METACONTROLLER_SRC EXAMPLE [KUBECTL_META]
#
# METACONTROLLER_SRC: a checkout of github.com/metacontroller/metacontroller (examples/ and
# manifests/ are used). EXAMPLE: a directory name under examples/ (bluegreen, catset, ...).
# KUBECTL_META: the binary (default: kubectl-meta on PATH).
#
# Against an embedded sandbox (`kubectl-meta sandbox --ephemeral`) unless EXAMPLE_KUBECONFIG
# names a cluster to use instead (e.g. ../shared/real-apiserver's, context `real`).
# Hooks, by the image of the example's hook Deployment:
#   metacontroller/nodejs-server  node, with Metacontroller's own examples/nodejs/server.js
#   python:*                      python3 running manifest/sync.py, its port 80 moved to a free one;
#                                 the Secret volumes its Deployment mounts (webhook-auth's server
#                                 certificate and token) are written to files once test.sh has
#                                 created them, the hook started then, its paths moved to them
#   metacontroller/jsonnetd       python3 with the `jsonnet` package (pip install jsonnet),
#                                 evaluating manifest/<hook>.jsonnet with the request as TLA
# Prints the example's output; exit status is test.sh's (124: timed out after
# EXAMPLE_TIMEOUT seconds, default 300; 3: a prerequisite is missing).
set -euo pipefail

SRC=$(cd "$1" && pwd)
EX=$2
BIN=${3:-kubectl-meta}
DIR="$SRC/examples/$EX"
TIMEOUT=${EXAMPLE_TIMEOUT:-300}
[[ -f "$DIR/test.sh" ]] || { echo "no $DIR/test.sh" >&2; exit 3; }

TMP=$(mktemp -d)
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [[ -n "${EXAMPLE_KEEP:-}" ]] && echo "kept $TMP" >&2 || rm -rf "$TMP"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

export XDG_DATA_HOME="$TMP/data"
if [[ -n "${EXAMPLE_KUBECONFIG:-}" ]]; then
  export KUBECONFIG="$EXAMPLE_KUBECONFIG"
else
  export KUBECONFIG="$TMP/kubeconfig"
  "$BIN" sandbox --ephemeral --write-kubeconfig "$KUBECONFIG" >"$TMP/sandbox.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 100); do [[ -s "$KUBECONFIG" ]] && kubectl get ns default >/dev/null 2>&1 && break; sleep 0.1; done
fi
kubectl get ns metacontroller >/dev/null 2>&1 || kubectl create ns metacontroller >/dev/null
kubectl apply -f "$SRC/manifests/production/metacontroller-crds-v1.yaml" >/dev/null

# The hook server.
PORT=$(free_port)
export PORT
MAN="$DIR/manifest"
IMAGE=$(grep -ho 'image: *[^ ]*' "$MAN"/*.yaml | head -1 | sed 's/image: *//')
case "$IMAGE" in
  metacontroller/nodejs-server*)
    command -v node >/dev/null || { echo "node is needed for $EX" >&2; exit 3; }
    mkdir -p "$TMP/node/hooks"
    cp "$MAN"/*.js "$TMP/node/hooks/"
    sed 's/\.listen(80)/.listen(process.env.PORT, "127.0.0.1")/' "$SRC/examples/nodejs/server.js" >"$TMP/node/server.js"
    (cd "$TMP/node" && exec node server.js) >"$TMP/hook.log" 2>&1 &
    ;;
  python:*)
    cat >"$TMP/pyrun.py" <<'EOF'
import os, runpy, socketserver, sys
port = int(os.environ["PORT"])
orig = socketserver.TCPServer.__init__
def init(self, addr, *a, **k):
    orig(self, ("127.0.0.1", port), *a, **k)
socketserver.TCPServer.__init__ = init
script = sys.argv[1]
sys.argv = [script]
runpy.run_path(script, run_name="__main__")
EOF
    HOOK="$MAN/sync.py"
    if [[ ! -f "$HOOK" ]]; then
      # The hook is inline, in a ConfigMap of the manifest (update-strategy).
      HOOK="$TMP/sync.py"
      python3 - "$MAN"/*.yaml >"$HOOK" <<'PY'
import sys, yaml  # PyYAML
for f in sys.argv[1:]:
    for d in yaml.safe_load_all(open(f)):
        if d and d.get("kind") == "ConfigMap" and "sync.py" in (d.get("data") or {}):
            sys.stdout.write(d["data"]["sync.py"])
            sys.exit(0)
sys.exit("no sync.py in the manifest")
PY
    fi
    # The Secret volumes of the hook's Deployment: "SECRET NAMESPACE MOUNTPATH" lines.
    MOUNTS=$(python3 - "$MAN"/*.yaml <<'PY'
import sys, yaml  # PyYAML
for f in sys.argv[1:]:
    for d in yaml.safe_load_all(open(f)):
        if not d or d.get("kind") != "Deployment":
            continue
        spec = d["spec"]["template"]["spec"]
        secrets = {v["name"]: v["secret"]["secretName"] for v in spec.get("volumes", []) if "secret" in v}
        for c in spec["containers"]:
            for m in c.get("volumeMounts", []):
                if m["name"] in secrets:
                    print(secrets[m["name"]], d["metadata"].get("namespace", "default"), m["mountPath"])
PY
)
    if [[ -z "$MOUNTS" ]]; then
      (cd "$MAN" && exec python3 -u "$TMP/pyrun.py" "$HOOK") >"$TMP/hook.log" 2>&1 &
    else
      # The hook reads its mounts by absolute path: move them under $TMP/mnt.
      sed_args=()
      while read -r _ _ path; do sed_args+=(-e "s|\"$path|\"$TMP/mnt$path|g"); done <<<"$MOUNTS"
      sed "${sed_args[@]}" "$HOOK" >"$TMP/hook-mounted.py"
      HOOK="$TMP/hook-mounted.py"
      DEFERRED_HOOK=1
      (
        while read -r secret ns path; do
          until kubectl get secret "$secret" -n "$ns" >/dev/null 2>&1; do sleep 0.5; done
          mkdir -p "$TMP/mnt$path"
          kubectl get secret "$secret" -n "$ns" -o json | python3 -c '
import base64, json, os, sys
for k, v in (json.load(sys.stdin).get("data") or {}).items():
    open(os.path.join(sys.argv[1], k), "wb").write(base64.b64decode(v))' "$TMP/mnt$path"
        done <<<"$MOUNTS"
        cd "$MAN" && exec python3 -u "$TMP/pyrun.py" "$HOOK"
      ) >"$TMP/hook.log" 2>&1 &
    fi
    ;;
  metacontroller/jsonnetd*)
    python3 -c 'import _jsonnet' 2>/dev/null || { echo "python3 -m pip install jsonnet is needed for $EX" >&2; exit 3; }
    cat >"$TMP/jsonnetd.py" <<'EOF'
import http.server, json, os, sys, _jsonnet
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        name = self.path.strip("/").split("/")[0]
        body = self.rfile.read(int(self.headers.get("content-length", 0))).decode()
        try:
            out = _jsonnet.evaluate_file(os.path.join(os.getcwd(), name + ".jsonnet"), tla_codes={"request": body})
            code = 200
        except Exception as e:  # jsonnetd answers 500 with the error
            out, code = str(e), 500
        self.send_response(code)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(out.encode())
http.server.HTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
EOF
    (cd "$MAN" && exec python3 -u "$TMP/jsonnetd.py") >"$TMP/hook.log" 2>&1 &
    ;;
  *) echo "unknown hook image $IMAGE for $EX" >&2; exit 3 ;;
esac
PIDS+=($!)
if [[ -z "${DEFERRED_HOOK:-}" ]]; then
  for _ in $(seq 1 100); do (echo >"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
fi

# The controllers, run by kubectl-meta dev (--force: test.sh also applies them to the cluster).
CTRL=()
for f in "$MAN"/*.yaml "$DIR"/v1/*.yaml; do
  [[ -f "$f" ]] || continue
  grep -qE '^kind: *(CompositeController|DecoratorController)' "$f" && CTRL+=(-f "$f")
done
# https when the definitions call their hooks so (webhook-auth: the certificate is checked
# against the host the definition names, the hook server asks for a client certificate).
SCHEME=http
for f in "${CTRL[@]}"; do
  [[ "$f" != -f ]] && grep -qE 'url: *https://' "$f" && SCHEME=https
done
"$BIN" dev "${CTRL[@]}" --hook-base-url "$SCHEME://127.0.0.1:$PORT" --no-tui --no-watch --force >"$TMP/dev.log" 2>&1 &
PIDS+=($!)

set +e
T0=$(date +%s%N)
(cd "$DIR" && timeout "$TIMEOUT" bash ${EXAMPLE_TEST:-test.sh})
rc=$?
# The time of test.sh alone (what tests/cli/e2e.rs compares with the e2e tests' time).
echo "test.sh of $EX: $(( ($(date +%s%N) - T0) / 1000000 )) ms" >&2
set -e
if [[ $rc -ne 0 ]]; then
  echo "--- $EX failed ($rc); last lines of dev's log:"; tail -n 20 "$TMP/dev.log"
  echo "--- hook log:"; tail -n 10 "$TMP/hook.log"
fi
exit $rc
