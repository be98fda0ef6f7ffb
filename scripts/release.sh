#!/usr/bin/env bash
# Build and pack a kubectl-meta release for one platform, and render the krew manifest for every
# platform packed so far.
#
#   scripts/release.sh                        build (profile dist) for the host, pack, manifest
#   scripts/release.sh --target TRIPLE        the same for another Rust target (CI matrix)
#   scripts/release.sh --binary PATH          pack an already built binary (no build)
#   scripts/release.sh --manifest-only        only render the manifest from the archives in --out
#
# Writes into --out (default dist/):
#   kubectl-meta-<version>-<os>-<arch>.tar.gz   kubectl-meta[.exe], LICENSE, kubectl_complete-meta
#   kubectl-meta-<version>-<os>-<arch>.tar.gz.sha256   (sha256sum format)
#   meta.yaml      the krew manifest: plugin-manifest/meta.yaml's metadata and description with
#                  this version, one platform per archive of this version in --out (uri, sha256)
#
# A script rather than a cargo xtask: the steps are cargo build, tar, gzip and sha256, which every
# release machine (CI runners, macOS, Git Bash on Windows) has; an xtask would be one more crate
# for CI to compile, and a workspace, for what is a few lines of shell like install.sh.
set -euo pipefail

REPO_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
TEMPLATE="$REPO_DIR/plugin-manifest/meta.yaml"

usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'
    cat <<'EOF'

Options:
  --target TRIPLE      Rust target to build and name the archive for (default: the host's).
  --binary PATH        Pack this binary instead of building (any profile; e.g. for tests).
  --out DIR            Output directory (default: dist/ in the repository).
  --base-url URL       Where the archives will be downloadable, https (default: the homepage
                       of plugin-manifest/meta.yaml + /releases/download/<version>).
  --manifest PATH      Where to write the manifest (default: OUT/meta.yaml). Pass
                       plugin-manifest/meta.yaml to update the checked-in one.
  --manifest-only      Do not build or pack; render the manifest from the archives in OUT.
  -h, --help           Show this help.
EOF
}

say() { printf '==> %s\n' "$*" >&2; }
die() {
    printf 'error: %s\n' "$*" >&2
    exit 2
}

TARGET=""
BINARY=""
OUT="$REPO_DIR/dist"
BASE_URL=""
MANIFEST=""
MANIFEST_ONLY=0
while [[ $# -gt 0 ]]; do
    case "$1" in
    --target | --binary | --out | --base-url | --manifest)
        [[ $# -ge 2 && -n "$2" ]] || die "$1 needs a value (see --help)"
        case "$1" in
        --target) TARGET="$2" ;;
        --binary) BINARY="$2" ;;
        --out) OUT="$2" ;;
        --base-url) BASE_URL="$2" ;;
        --manifest) MANIFEST="$2" ;;
        esac
        shift 2
        ;;
    --manifest-only)
        MANIFEST_ONLY=1
        shift
        ;;
    -h | --help)
        usage
        exit 0
        ;;
    *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ -z "$BINARY" || $MANIFEST_ONLY -eq 0 ]] || die "--binary and --manifest-only exclude each other"
[[ -f "$TEMPLATE" ]] || die "$TEMPLATE not found"

# The package version from Cargo.toml ([package] comes first), as krew wants it: v + semver.
VERSION="v$(sed -n 's/^version *= *"\([^"]*\)".*/\1/p' "$REPO_DIR/Cargo.toml" | head -n1)"
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?$ ]] ||
    die "Cargo.toml's version gives \"$VERSION\", not a semantic version"

HOMEPAGE="$(sed -n 's/^  homepage: *//p' "$TEMPLATE" | head -n1)"
[[ -n "$BASE_URL" ]] || BASE_URL="${HOMEPAGE%/}/releases/download/$VERSION"
[[ "$BASE_URL" == https://* ]] || die "--base-url must be an https URL (krew downloads over https): $BASE_URL"
BASE_URL="${BASE_URL%/}"

mkdir -p -- "$OUT"
OUT="$(cd -- "$OUT" && pwd -P)"
[[ -n "$MANIFEST" ]] || MANIFEST="$OUT/meta.yaml"

sha256_of() {
    if command -v sha256sum >/dev/null 2>&1; then
        sha256sum -- "$1" | cut -d' ' -f1
    else
        shasum -a 256 -- "$1" | cut -d' ' -f1
    fi
}

# ---------------------------------------------------------------- build and pack

if [[ $MANIFEST_ONLY -eq 0 ]]; then
    if [[ -z "$TARGET" ]]; then
        TARGET="$(rustc -vV | sed -n 's/^host: //p')"
        [[ -n "$TARGET" ]] || die "cannot tell the host target from 'rustc -vV'; pass --target"
    fi
    case "$TARGET" in
    *-linux-*) OS=linux ;;
    *-apple-darwin) OS=darwin ;;
    *-windows-*) OS=windows ;;
    *) die "no krew os for target $TARGET (linux, darwin and windows targets are supported)" ;;
    esac
    case "$TARGET" in
    x86_64-*) ARCH=amd64 ;;
    aarch64-*) ARCH=arm64 ;;
    *) die "no krew arch for target $TARGET (x86_64 and aarch64 are supported)" ;;
    esac
    EXE=""
    HELPER="$REPO_DIR/completion/kubectl_complete-meta"
    if [[ $OS == windows ]]; then
        EXE=".exe"
        HELPER="$REPO_DIR/completion/kubectl_complete-meta.cmd"
    fi

    if [[ -z "$BINARY" ]]; then
        host="$(rustc -vV | sed -n 's/^host: //p')"
        target_dir="${CARGO_TARGET_DIR:-$REPO_DIR/target}"
        build=(cargo build --profile dist --locked --manifest-path "$REPO_DIR/Cargo.toml")
        if [[ "$TARGET" == "$host" ]]; then
            BINARY="$target_dir/dist/kubectl-meta$EXE"
        else
            build+=(--target "$TARGET")
            BINARY="$target_dir/$TARGET/dist/kubectl-meta$EXE"
        fi
        say "${build[*]}"
        "${build[@]}"
    fi
    [[ -f "$BINARY" && -x "$BINARY" ]] || die "no executable binary at $BINARY"

    ARCHIVE="kubectl-meta-$VERSION-$OS-$ARCH.tar.gz"
    STAGE="$(mktemp -d "${TMPDIR:-/tmp}/kubectl-meta-release.XXXXXX")"
    trap 'rm -rf -- "$STAGE"' EXIT
    cp -- "$BINARY" "$STAGE/kubectl-meta$EXE"
    cp -- "$REPO_DIR/LICENSE" "$STAGE/LICENSE"
    cp -- "$HELPER" "$STAGE/$(basename -- "$HELPER")"
    chmod 0755 "$STAGE/kubectl-meta$EXE" "$STAGE/$(basename -- "$HELPER")"
    chmod 0644 "$STAGE/LICENSE"
    # gzip -n: no name or timestamp in the gzip header.
    (cd -- "$STAGE" && tar -cf - "kubectl-meta$EXE" LICENSE "$(basename -- "$HELPER")") | gzip -n >"$OUT/$ARCHIVE"
    sum="$(sha256_of "$OUT/$ARCHIVE")"
    printf '%s  %s\n' "$sum" "$ARCHIVE" >"$OUT/$ARCHIVE.sha256"
    say "packed $OUT/$ARCHIVE ($(wc -c <"$OUT/$ARCHIVE" | tr -d ' ') bytes, sha256 $sum)"
fi

# ---------------------------------------------------------------- krew manifest

platforms=""
count=0
for archive in "$OUT"/kubectl-meta-"$VERSION"-*-*.tar.gz; do
    [[ -f "$archive" ]] || continue
    name="$(basename -- "$archive")"
    rest="${name#kubectl-meta-"$VERSION"-}"
    rest="${rest%.tar.gz}"
    os="${rest%-*}"
    arch="${rest##*-}"
    if [[ -f "$archive.sha256" ]]; then
        sum="$(cut -d' ' -f1 <"$archive.sha256")"
        [[ "$sum" == "$(sha256_of "$archive")" ]] || die "$archive.sha256 does not match $name"
    else
        sum="$(sha256_of "$archive")"
    fi
    exe=""
    helper="kubectl_complete-meta"
    if [[ $os == windows ]]; then
        exe=".exe"
        helper="kubectl_complete-meta.cmd"
    fi
    platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $BASE_URL/$name
    sha256: \"$sum\"
    files:
    - from: kubectl-meta$exe
      to: .
    - from: LICENSE
      to: .
    - from: $helper
      to: .
    bin: kubectl-meta$exe
"
    count=$((count + 1))
done
[[ $count -gt 0 ]] || die "no archive kubectl-meta-$VERSION-<os>-<arch>.tar.gz in $OUT to put in the manifest"

# Everything above `  platforms:` from the template (comments, metadata, description), with
# this version; then the platforms.
header="$(sed -n '/^  platforms:/q;p' "$TEMPLATE" | sed "s/^  version: .*/  version: $VERSION/")"
tmp="$MANIFEST.tmp.$$"
printf '%s\n  platforms:\n%s' "$header" "$platforms" >"$tmp"
mv -f -- "$tmp" "$MANIFEST"
say "wrote $MANIFEST ($VERSION, $count platform(s))"
