#!/usr/bin/env python3
"""The file -> file import graph of the workspace's crates, and its circles.

For every `.rs` file under a crate's `src/`, the paths it names with `crate::`, `super::` or
`self::` (in `use` items and inline, e.g. `crate::engine::events::EngineEvent`) are resolved to
the longest module prefix that is a file of that crate; an edge per (file, target file), self
edges and edges to the crate root (`lib.rs`) dropped. Paths into another workspace crate
(`kubectl_meta_engine::plan::writes`) are resolved the same way, so an edge across crates shows
too (and a circle through two crates would be found).

Circles are the strongly connected components with more than one file (Tarjan).

Usage:
    scripts/import_graph.py [--edges] [--no-tests] [--depth N] [--crate NAME] [ROOT]

ROOT is the workspace root (default: the current directory). `--edges` prints every edge;
`--no-tests` leaves out the paths inside `#[cfg(test)] mod` blocks; `--depth N` collapses files to their folders N levels below `src/` (`--depth 1`: the
top-level folders, whose circles are upward arrows between them); `--crate` restricts the report to one crate's files (e.g. `kubectl-meta-engine`). The exit code
is 1 when there is a circle, 0 otherwise.
"""

import os
import re
import sys
from collections import defaultdict

# `crate::a::b`, `super::super::a`, `self::a`, `kubectl_meta_engine::a` ... up to the first
# character that cannot continue a path. Group imports (`crate::a::{b, c::d}`) are expanded
# below.
PATH_HEAD = re.compile(r"\b(crate|super|self|[a-z_][a-z0-9_]*)::")


def strip_comments_and_strings(src):
    """Removes comments and string/char literals (keeps line structure roughly)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = '"' + m.group(1)
            j = src.find(end, i + len(m.group(0)))
            i = n if j < 0 else j + len(end)
            out.append('""')
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            i += 1
            out.append('""')
        elif c == "'" and re.match(r"'(\\.|[^\\'])'", src[i:i + 4]):
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            i += len(m.group(0)) if m else 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def expand_path(text, start):
    """The full paths of the path (or group import) starting at `start`: a list of segment lists."""
    # Read a path with possible braces.
    def parse(i):
        segs, results = [], []
        while True:
            m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_]*|\*)\s*", text[i:])
            if m and text[i + len(m.group(0)):].startswith("{") is False:
                pass
            if text[i:].lstrip().startswith("{"):
                i = text.index("{", i) + 1
                while True:
                    sub, i = parse(i)
                    results.extend(segs + s for s in sub)
                    rest = text[i:].lstrip()
                    i = len(text) - len(rest)
                    if rest.startswith(","):
                        i += 1
                        if text[i:].lstrip().startswith("}"):
                            i = text.index("}", i) + 1
                            return results, i
                        continue
                    if rest.startswith("}"):
                        return results, i + 1
                    return results, i
            if not m:
                return results + ([segs] if segs else []), i
            segs = segs + [m.group(1)]
            i += len(m.group(0))
            if text.startswith("::", i):
                i += 2
                continue
            # `as name`
            m2 = re.match(r"\s*as\s+[A-Za-z_][A-Za-z0-9_]*", text[i:])
            if m2:
                i += len(m2.group(0))
            return results + [segs], i

    paths, _ = parse(start)
    return paths


class Crate:
    def __init__(self, name, src):
        self.name = name  # package name, e.g. kubectl-meta-engine
        self.ident = name.replace("-", "_")
        self.src = src
        self.files = {}  # module path tuple -> file path (relative)
        for dirpath, _, names in os.walk(src):
            for f in names:
                if not f.endswith(".rs"):
                    continue
                full = os.path.join(dirpath, f)
                rel = os.path.relpath(full, src)
                parts = rel[:-3].split(os.sep)
                if parts[-1] == "mod":
                    parts = parts[:-1]
                if parts in (["lib"], ["main"]):
                    parts = []
                if parts[:1] == ["bin"]:
                    continue
                self.files[tuple(parts)] = full
        self.module_of = {v: k for k, v in self.files.items()}

    def resolve(self, segs):
        """The file of the longest module prefix of `segs`, or None."""
        for k in range(len(segs), -1, -1):
            f = self.files.get(tuple(segs[:k]))
            if f is not None:
                return f
        return None


def crates_of(root):
    out = []
    def pkg_name(toml):
        with open(toml) as fh:
            in_pkg = False
            for line in fh:
                s = line.strip()
                if s.startswith("["):
                    in_pkg = s == "[package]"
                elif in_pkg and s.startswith("name"):
                    return s.split("=", 1)[1].strip().strip('"')
        return None
    if os.path.exists(os.path.join(root, "src")):
        out.append(Crate(pkg_name(os.path.join(root, "Cargo.toml")), os.path.join(root, "src")))
    cdir = os.path.join(root, "crates")
    if os.path.isdir(cdir):
        for c in sorted(os.listdir(cdir)):
            toml = os.path.join(cdir, c, "Cargo.toml")
            if os.path.exists(toml):
                out.append(Crate(pkg_name(toml), os.path.join(cdir, c, "src")))
    return out


def inline_mods(text):
    """(start, end, name) of every inline `mod name { ... }` block."""
    out = []
    for m in re.finditer(r"\bmod\s+([A-Za-z_][A-Za-z0-9_]*)\s*\{", text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
            i += 1
        is_test = re.search(r"#\[cfg\(test\)\]\s*$", text[max(0, m.start() - 40):m.start()]) is not None
        out.append((m.start(), i, m.group(1), is_test))
    return out


def edges_of(crate, by_ident):
    edges = set()
    for mod, path in crate.files.items():
        with open(path) as fh:
            text = strip_comments_and_strings(fh.read())
        # A file's own module for `self::`/`super::`: mod.rs / lib.rs is its module, x.rs's
        # `self` is x too (Rust: `self` is the current module).
        inline = inline_mods(text)
        for m in PATH_HEAD.finditer(text):
            head = m.group(1)
            # Inline modules (`mod tests { use super::*; }`) around the path: `super` there is
            # the file's own module.
            around = [(name, t) for (a, b, name, t) in inline if a <= m.start() < b]
            if NO_TESTS and any(t for _, t in around):
                continue
            here = list(mod) + [name for name, _ in around]
            if head == "crate":
                target_crate, base = crate, []
            elif head == "self":
                target_crate, base = crate, here
            elif head == "super":
                target_crate, base = crate, here[:-1]
            elif head in by_ident and head != crate.ident:
                target_crate, base = by_ident[head], []
            else:
                continue
            for segs in expand_path(text, m.end()):
                # leading super:: chains
                b = list(base)
                while segs and segs[0] == "super":
                    b = b[:-1]
                    segs = segs[1:]
                tgt = target_crate.resolve(b + segs)
                if tgt is None or tgt == path:
                    continue
                if target_crate.module_of[tgt] == ():
                    continue  # the crate root: re-exports only
                edges.add((path, tgt))
    return edges


def sccs(nodes, edges):
    adj = defaultdict(list)
    for a, b in edges:
        adj[a].append(b)
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    sys.setrecursionlimit(100000)

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in adj[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            strong(v)
    return out


NO_TESTS = False
DEPTH = None


def main(argv):
    global NO_TESTS
    NO_TESTS = "--no-tests" in argv
    argv = [a for a in argv if a != "--no-tests"]
    global DEPTH
    if "--depth" in argv:
        i = argv.index("--depth")
        DEPTH = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    show_edges = "--edges" in argv
    only = None
    args = [a for a in argv if a != "--edges"]
    if "--crate" in args:
        i = args.index("--crate")
        only = args[i + 1]
        del args[i:i + 2]
    root = args[0] if args else "."
    crates = crates_of(root)
    by_ident = {c.ident: c for c in crates}
    all_edges, nodes = set(), set()
    for c in crates:
        if only and c.name != only:
            continue
        all_edges |= edges_of(c, by_ident)
        nodes |= set(c.files.values())
    rel = lambda p: os.path.relpath(p, root)
    if DEPTH is not None:
        # Collapse each file to its folder, DEPTH levels below its crate's `src/`
        # (`src/engine/plan/writes.rs` at depth 1: `src/engine`); top-level files stay.
        def fold(p):
            for c in crates:
                if p.startswith(c.src + os.sep):
                    parts = os.path.relpath(p, c.src).split(os.sep)
                    if len(parts) > DEPTH:
                        return os.path.join(c.src, *parts[:DEPTH]) + "/"
            return p
        nodes = {fold(n) for n in nodes}
        all_edges = {(fold(a), fold(b)) for a, b in all_edges if fold(a) != fold(b)}
    if show_edges:
        for a, b in sorted(all_edges):
            print(f"{rel(a)} -> {rel(b)}")
    circles = sccs(nodes, all_edges)
    print(f"files: {len(nodes)}  edges: {len(all_edges)}  circles: {len(circles)}")
    for comp in circles:
        print(f"circle ({len(comp)} files):")
        for f in comp:
            print(f"  {rel(f)}")
    return 1 if circles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
