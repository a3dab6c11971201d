#!/usr/bin/env python3
"""summarize.py -- read meson testlog.json files and print the closing line CI reads.

Usage: summarize.py LOG.json [LOG.json ...]
Prints the failing tests by name, then 'N passed, N failed[, N skipped]'.
Exit status 0 only if nothing failed and at least one test ran.
"""
import json
import sys

PASS = {"OK", "EXPECTEDFAIL"}
SKIP = {"SKIP"}


def main(paths):
    passed = failed = skipped = 0
    bad = []
    for path in paths:
        try:
            with open(path) as f:
                lines = [l for l in f if l.strip()]
        except OSError as e:
            print(f"summarize: {path}: {e}", file=sys.stderr)
            failed += 1
            bad.append(f"(missing log {path})")
            continue
        for line in lines:
            t = json.loads(line)
            res = t.get("result", "")
            name = f'{t.get("name")} [{path.split("/")[0]}]'
            if res in PASS:
                passed += 1
            elif res in SKIP:
                skipped += 1
            else:
                failed += 1
                bad.append(f"{name}: {res}")
    for b in bad:
        print(f"FAILED: {b}")
    line = f"{passed} passed, {failed} failed"
    if skipped:
        line += f", {skipped} skipped"
    print(line)
    return 0 if failed == 0 and passed > 0 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
