#!/usr/bin/env python3
"""Generate definitions.json, the OpenAPI definitions of the built-in kinds the sandbox serves.

Source: k8s-openapi 0.29.0 (unpacked in the local cargo registry), module v1_36 -- its
`impl schemars::JsonSchema` blocks carry every definition of the upstream swagger spec
(name, description, type, format, properties, required, references), and its
`impl Resource` blocks the group/version/kind of every top-level kind.

The kinds are those served by resources.rs (its BUILTINS table, read by this script) plus
autoscaling/v1 Scale. Everything they reference is pulled in transitively.

Output: one JSON object, definition name -> swagger 2.0 schema (`$ref`s point to
`#/definitions/<name>`); top-level kinds carry `x-kubernetes-group-version-kind`.
openapi.rs turns it into /openapi/v2 and /openapi/v3 documents on first request.

Usage: python3 generate.py [--k8s-openapi DIR] [--out FILE]
(DIR is the crate's src/v1_36 directory; by default looked up in ~/.cargo/registry/src/*/).
"""

import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

SUBSCHEMA_DESC = re.compile(
    r"\(\{\s*let mut schema_obj = __gen\.subschema_for::<crate::([A-Za-z0-9_:]+)>\(\);\s*"
    r"schema_obj\.ensure_object\(\)\.insert\(\"description\"\.into\(\), (\"(?:[^\"\\]|\\.)*\")\.into\(\)\);\s*"
    r"schema_obj\s*\}\)",
    re.S,
)
SUBSCHEMA = re.compile(r"\(?__gen\.subschema_for::<crate::([A-Za-z0-9_:]+)>\(\)\)?")
IMPL = re.compile(
    r"impl crate::schemars::JsonSchema for (\w+) \{\s*fn schema_name\(\) -> std::borrow::Cow<'static, str> \{\s*"
    r"\"([^\"]+)\"\.into\(\)\s*\}\s*fn json_schema\(__gen: &mut crate::schemars::SchemaGenerator\) -> crate::schemars::Schema \{\s*"
    r"crate::schemars::json_schema!\((\{.*?\n        \})\)\s*\}\s*\}",
    re.S,
)
RESOURCE = re.compile(
    r"impl crate::Resource for (\w+) \{.*?const GROUP: &'static str = \"([^\"]*)\";\s*"
    r"const KIND: &'static str = \"([^\"]*)\";\s*const VERSION: &'static str = \"([^\"]*)\";",
    re.S,
)


def find_src():
    hits = sorted(glob.glob(os.path.expanduser("~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_36")))
    if not hits:
        sys.exit("k8s-openapi 0.29.0 not found in ~/.cargo/registry/src; run `cargo fetch` first")
    return hits[0]


def served_kinds():
    src = open(os.path.join(HERE, "..", "resources.rs")).read()
    kinds = {(g, v, k) for g, v, k in re.findall(
        r'Builtin\(\s*"([^"]*)",\s*"([^"]*)",\s*"[^"]*",\s*"([^"]*)"', src)}
    kinds.add(("autoscaling", "v1", "Scale"))
    return kinds


def rust_json(body, names, module):
    """The json_schema! body as JSON, references resolved to definition names."""
    def ref(path, desc=None):
        name = names.get(path)
        if name is None:
            sys.exit(f"{module}: unknown type crate::{path}")
        out = '{"$ref": "#/definitions/%s"' % name
        if desc is not None:
            out += ', "description": %s' % desc
        return out + "}"

    body = SUBSCHEMA_DESC.sub(lambda m: ref(m.group(1), m.group(2)), body)
    body = SUBSCHEMA.sub(lambda m: ref(m.group(1)), body)
    body = re.sub(r"\\u\{([0-9a-fA-F]+)\}", lambda m: "\\u%04x" % int(m.group(1), 16), body)
    body = re.sub(r",(\s*[}\]])", r"\1", body)
    try:
        return json.loads(body)
    except json.JSONDecodeError as e:
        sys.exit(f"{module}: cannot read json_schema!: {e}\n{body[max(0, e.pos - 200):e.pos + 200]}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--k8s-openapi")
    ap.add_argument("--out", default=os.path.join(HERE, "definitions.json"))
    args = ap.parse_args()
    src = args.k8s_openapi or find_src()

    impls = []  # (crate path, schema name, body, file)
    gvk = {}
    for path in sorted(glob.glob(os.path.join(src, "**", "*.rs"), recursive=True)):
        rel = os.path.relpath(path, src)
        module = "::".join(os.path.dirname(rel).split(os.sep))
        text = open(path).read()
        for ty, name, body in IMPL.findall(text):
            impls.append((f"{module}::{ty}", name, body, rel))
        for ty, group, kind, version in RESOURCE.findall(text):
            gvk[f"{module}::{ty}"] = (group, version, kind)
    names = {p: n for p, n, _, _ in impls}
    schemas = {}
    for p, n, body, rel in impls:
        s = rust_json(body, names, rel)
        if p in gvk:
            g, v, k = gvk[p]
            s["x-kubernetes-group-version-kind"] = [{"group": g, "kind": k, "version": v}]
            # k8s-openapi requires `metadata` of a kind (its field is not an Option); the
            # apiserver's spec does not.
            required = [r for r in s.get("required", []) if r != "metadata"]
            if required:
                s["required"] = required
            else:
                s.pop("required", None)
        schemas[n] = s

    wanted = served_kinds()
    roots = [n for n, s in schemas.items()
             if any((x["group"], x["version"], x["kind"]) in wanted
                    for x in s.get("x-kubernetes-group-version-kind", []))]
    missing = wanted - {(x["group"], x["version"], x["kind"])
                        for n in roots for x in schemas[n]["x-kubernetes-group-version-kind"]}
    if missing:
        sys.exit(f"kinds without a definition: {sorted(missing)}")
    keep = {}
    todo = list(roots)
    while todo:
        n = todo.pop()
        if n in keep:
            continue
        keep[n] = schemas[n]
        todo.extend(re.findall(r'"#/definitions/([^"]+)"', json.dumps(schemas[n])))
    with open(args.out, "w") as f:
        json.dump(dict(sorted(keep.items())), f, separators=(",", ":"), sort_keys=True)
        f.write("\n")
    print(f"{len(keep)} definitions ({len(roots)} kinds) -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
