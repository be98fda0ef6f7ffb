#!/usr/bin/env python3
"""Generate schema.txt, the protobuf message table used by protobuf/mod.rs.

Sources (both unpacked in the local cargo registry):
  * k8s-pb 0.9.0      -- prost structs: field tags, wire types, message types.
  * k8s-openapi 0.29.0 -- serde impls: the exact JSON name of every field,
                          the canonical (proto) message names and the
                          apiVersion/kind of every top-level resource.

Usage: python3 generate.py [--k8s-pb DIR] [--k8s-openapi DIR] [--out FILE]
(the DIRs are the crates' src/ directories; by default they are looked up in
~/.cargo/registry/src/*/). Fields whose JSON name had to be guessed are
printed at the end so they can be checked by hand.

Output format (one record per line, '#' starts a comment):
  MESSAGE TAG JSON_NAME CARDINALITY TYPE [MESSAGE_TYPE]
    CARDINALITY: optional | repeated | map | inline
                 (map: map<string, TYPE>; inline: an embedded Go struct whose
                 fields JSON places directly in the parent object; JSON_NAME '-')
    TYPE: string | int32 | int64 | bool | bytes | double | message
  @kind API_VERSION KIND MESSAGE
"""

import argparse
import glob
import os
import re
import sys

# Packages (k8s-pb module directories) the sandbox serves. Everything they
# reference is pulled in transitively.
SERVED = [
    "api/core/v1",
    "api/apps/v1",
    "api/batch/v1",
    "api/rbac/v1",
    "api/authentication/v1",
    "api/authorization/v1",
    "api/coordination/v1",
    "api/events/v1",
    "api/policy/v1",
    "api/networking/v1",
    "apiextensions_apiserver/pkg/apis/apiextensions/v1",
]

# Messages the decoder converts by hand (their JSON form is not an object with
# one key per proto field), so their field names are not reported as guessed.
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1",
    "k8s.io.apimachinery.pkg.runtime.RawExtension",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString",
    "k8s.io.apimachinery.pkg.api.resource.Quantity",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool",
    "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray",
}

# JSON names that neither source spells out: (message, prost field) -> JSON name.
OVERRIDES = {
    ("k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaProps", "ref"): "$ref",
    ("k8s.io.api.core.v1.PodLogOptions", "insecure_skip_tls_verify_backend"): "insecureSkipTLSVerifyBackend",
    ("k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.ConversionRequest",
     "desired_api_version"): "desiredAPIVersion",
}

SCALARS = {"string", "int32", "int64", "bool", "bytes", "double"}

STRUCT_RE = re.compile(r"^pub struct (\w+) \{\n(.*?)^\}", re.S | re.M)
EMPTY_STRUCT_RE = re.compile(r"^pub struct (\w+) \{\}", re.M)
PATH_RE = re.compile(r"(?:::)?\w+(?:::\w+)*")


def find_crate(name):
    pattern = os.path.expanduser(f"~/.cargo/registry/src/*/{name}/src")
    found = sorted(glob.glob(pattern))
    if not found:
        sys.exit(f"cannot find {pattern}; pass the directory explicitly")
    return found[-1]


def norm(name):
    """Join key for field and struct names across the two crates."""
    return name.removeprefix("r#").replace("_", "").lower()


def lower_camel(snake):
    head, *rest = snake.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def resolve(module, rust_type):
    """Module dir and struct name of the message in a prost field type."""
    paths = [p for p in PATH_RE.findall(rust_type)
             if not p.startswith(("::core::", "::prost::"))]
    if len(paths) != 1:
        raise ValueError(f"cannot resolve message type in {rust_type!r}")
    parts = paths[0].split("::")
    mod = module.split("/")
    while parts[0] == "super":
        parts.pop(0)
        mod.pop()
    return "/".join(mod + parts[:-1]), parts[-1]


def prost_fields(body):
    """(attribute args, field name, Rust type) of each `#[prost(..)] pub x: T,`."""
    fields, attr, decl = [], None, None
    for line in body.splitlines():
        line = line.strip()
        if decl is not None:
            decl += " " + line
        elif line.startswith("#[prost("):
            attr = line[len("#[prost("):-len(")]")]
        elif line.startswith("pub ") and attr is not None:
            decl = line[len("pub "):]
        if decl is not None and decl.endswith(",") and decl.count("<") == decl.count(">"):
            name, rust_type = decl[:-1].split(":", 1)
            fields.append((attr, name.strip().removeprefix("r#"), rust_type.strip()))
            attr, decl = None, None
    return fields


def parse_pb(root):
    """{(module, struct): [(tag, field, card, type, (module, struct) | None)]}"""
    structs = {}
    for path in sorted(glob.glob(os.path.join(root, "**", "mod.rs"), recursive=True)):
        module = os.path.relpath(os.path.dirname(path), root)
        text = open(path, encoding="utf-8").read()
        for name in EMPTY_STRUCT_RE.findall(text):
            structs[(module, name)] = []
        for name, body in STRUCT_RE.findall(text):
            fields = []
            for attr, field, rust_type in prost_fields(body):
                args = [a.strip() for a in attr.split(",")]
                tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
                if args[0].startswith("btree_map") or args[0].startswith("map"):
                    value = re.search(r'map = "string, (\w+)"', attr).group(1)
                    card, kind = "map", value
                else:
                    kind = args[0].split(" ")[0]
                    card = "repeated" if "repeated" in args else "optional"
                if kind not in SCALARS and kind != "message":
                    raise ValueError(f"{module}::{name}.{field}: unsupported type {kind}")
                target = resolve(module, rust_type) if kind == "message" else None
                fields.append((tag, field, card, kind, target))
            structs[(module, name)] = fields
    return structs


def parse_openapi(root):
    """{(module, norm struct): info}, newest Kubernetes version first wins."""
    types = {}
    versions = sorted(glob.glob(os.path.join(root, "v1_*")),
                      key=lambda p: int(p.rsplit("_", 1)[1]), reverse=True)
    for vdir in versions:
        for path in sorted(glob.glob(os.path.join(vdir, "**", "*.rs"), recursive=True)):
            text = open(path, encoding="utf-8").read()
            definition = re.search(r"^// Generated from definition (\S+)", text, re.M)
            struct = re.search(r"^pub (?:struct|enum) (\w+)", text, re.M)
            if not definition or not struct:
                continue
            module = os.path.relpath(os.path.dirname(path), vdir)
            key = (module, norm(struct.group(1)))
            info = types.setdefault(key, {"name": definition.group(1).rsplit(".", 1)[1],
                                          "fields": {}})
            for json_name, rust in re.findall(r'"([^"]+)" => Field::Key_(\w+)', text):
                info["fields"].setdefault(norm(rust.rstrip("_")), json_name)
            for const in ("API_VERSION", "KIND", "LIST_KIND"):
                m = re.search(rf"const {const}: &'static str = \"([^\"]+)\"", text)
                if m:
                    info.setdefault(const, m.group(1))
    return types


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--k8s-pb", default=None)
    ap.add_argument("--k8s-openapi", default=None)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "schema.txt"))
    args = ap.parse_args()
    pb = parse_pb(args.k8s_pb or find_crate("k8s-pb-0.9.0"))
    oa = parse_openapi(args.k8s_openapi or find_crate("k8s-openapi-0.29.0"))

    def full_name(key):
        module, struct = key
        info = oa.get((module, norm(struct)))
        return "k8s.io." + module.replace("/", ".") + "." + (info["name"] if info else struct)

    # Messages reachable from the served packages.
    todo = [key for key in pb if key[0] in SERVED]
    seen = set()
    while todo:
        key = todo.pop()
        if key in seen:
            continue
        if key not in pb:
            sys.exit(f"referenced message {key} not found in k8s-pb")
        seen.add(key)
        todo.extend(f[4] for f in pb[key] if f[4])

    def openapi_fields(key):
        info = oa.get((key[0], norm(key[1])))
        return info["fields"] if info else {}

    # Embedded Go structs (`json:",inline"`): k8s-openapi has the child's fields
    # directly in the parent, so the child takes its JSON names from there.
    inline, inherited = set(), {}
    for key in sorted(seen):
        parent = openapi_fields(key)
        for tag, field, card, kind, target in pb[key]:
            if (kind == "message" and card == "optional" and norm(field) not in parent
                    and parent and {norm(f[1]) for f in pb[target]} <= set(parent)):
                inline.add((key, tag))
                inherited.setdefault(target, {}).update(parent)

    # Last resort for types k8s-openapi lacks: a field name that has one JSON
    # spelling across all of k8s-openapi (e.g. scale_io -> scaleIO).
    spellings = {}
    for info in oa.values():
        for n, json_name in info["fields"].items():
            spellings.setdefault(n, set()).add(json_name)

    lines, guessed, unknown, inlined, kinds = [], [], [], [], []
    for key in sorted(seen, key=full_name):
        msg = full_name(key)
        info = oa.get((key[0], norm(key[1])))
        json_fields = openapi_fields(key) or inherited.get(key, {})
        is_list = msg.endswith("List") and {f[1] for f in pb[key]} == {"metadata", "items"}
        if not json_fields and msg not in SPECIAL and not is_list:
            unknown.append(msg)
        for tag, field, card, kind, target in sorted(pb[key]):
            json_name = OVERRIDES.get((msg, field)) or json_fields.get(norm(field))
            if (key, tag) in inline:
                card, json_name = "inline", "-"
                inlined.append(f"{msg}.{field} -> {full_name(target)}")
            if json_name is None and not is_list and msg not in SPECIAL:
                candidates = spellings.get(norm(field), set())
                json_name = candidates.pop() if len(candidates) == 1 else lower_camel(field)
                guessed.append(f"{msg} {tag} {field} -> {json_name}")
            json_name = json_name or lower_camel(field)
            line = f"{msg} {tag} {json_name} {card} {kind}"
            if target:
                line += " " + full_name(target)
            lines.append(line)
        if info and key[0] in SERVED and "KIND" in info:
            kinds.append(f"@kind {info['API_VERSION']} {info['KIND']} {msg}")
            list_key = (key[0], info["KIND"] + "List")
            if "LIST_KIND" in info and list_key in pb:
                kinds.append(f"@kind {info['API_VERSION']} {info['LIST_KIND']} {full_name(list_key)}")

    with open(args.out, "w", encoding="utf-8") as out:
        out.write("# Generated by generate.py from k8s-pb 0.9.0 and k8s-openapi 0.29.0. Do not edit.\n")
        out.write("# MESSAGE TAG JSON_NAME optional|repeated|map|inline TYPE [MESSAGE_TYPE]\n")
        out.write("# @kind API_VERSION KIND MESSAGE\n")
        out.write("\n".join(sorted(kinds) + lines) + "\n")

    print(f"wrote {args.out}: {len(seen)} messages, {len(lines)} fields, {len(kinds)} kinds")
    print(f"inlined embedded structs ({len(inlined)}):")
    for entry in inlined:
        print("  " + entry)
    print(f"messages absent from k8s-openapi ({len(unknown)}):")
    for entry in unknown:
        print("  " + entry)
    print(f"fields not in k8s-openapi, JSON name guessed -- please check ({len(guessed)}):")
    for entry in guessed:
        print("  " + entry)


if __name__ == "__main__":
    main()
