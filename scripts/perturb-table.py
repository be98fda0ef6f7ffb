#!/usr/bin/env python3
"""The examples x perturbation classes table of issue 38's note.

Runs `kubectl meta test examples/X/e2e --perturb --seed N -o json` for every example with an e2e
test (or those named) and prints a Markdown table: per example, whether each class passed (the
outcome equal to the plain run's) and the time of its perturbed run, the plain run's time and the
whole `--perturb` wall time (2 plain runs, 8 classes, and any shrinking). Findings are listed under
the table with their reproduce line. Exit 0 when every class passed everywhere, 1 otherwise.

    python3 scripts/perturb-table.py [--bin target/debug/kubectl-meta] [--seed 1] [EXAMPLE ...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSES = ["stale-read", "missed-state", "restart", "conflict", "throttle",
           "hook-timeout", "hook-restart", "reorder"]


def examples():
    d = os.path.join(ROOT, "examples")
    return sorted(e for e in os.listdir(d)
                  if os.path.isfile(os.path.join(d, e, "e2e", "chainsaw-test.yaml")))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "debug", "kubectl-meta"))
    ap.add_argument("--seed", default="1")
    ap.add_argument("examples", nargs="*")
    a = ap.parse_args()
    names = a.examples or examples()
    rows, findings, ok = [], [], True
    for ex in names:
        cmd = [a.bin, "test", os.path.join("examples", ex, "e2e"), "--perturb",
               "--seed", a.seed, "-o", "json"]
        t = time.monotonic()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        wall = time.monotonic() - t
        reports = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
        if p.returncode not in (0, 1) or not reports:
            ok = False
            rows.append((ex, wall, None, {}))
            findings.append("%s: exit %s\n%s" % (ex, p.returncode, p.stderr[-2000:]))
            continue
        for r in reports:
            cells = {}
            for c in r["classes"]:
                f = c.get("finding")
                cells[c["class"]] = ("ok" if f is None else "FAIL", c["millis"])
                if f is not None:
                    ok = False
                    findings.append("%s %s: %s\n  %s\n  %s" % (
                        r["test"], c["class"], f["schedule"], "; ".join(f["differences"]),
                        f["reproduce"]))
            if r.get("plainFailed"):
                ok = False
                findings.append("%s: the plain run fails: %s" % (r["test"], r["plainFailed"]))
            rows.append((r["test"], wall / len(reports), r["plainMillis"], cells))
    print("| Example | --perturb wall | plain | " + " | ".join(CLASSES) + " |")
    print("|---|---|---|" + "---|" * len(CLASSES))
    for name, wall, plain, cells in rows:
        line = ["%s" % name, "%.1f s" % wall, "-" if plain is None else "%.1f s" % (plain / 1000)]
        for c in CLASSES:
            v = cells.get(c)
            line.append("-" if v is None else "%s %.1f s" % (v[0], v[1] / 1000))
        print("| " + " | ".join(line) + " |")
    if findings:
        print("\nFindings and failures:")
        for f in findings:
            print("- " + f)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
