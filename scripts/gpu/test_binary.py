"""Prints the path of a crate's test executable from `cargo test --no-run --message-format=json`
on stdin: the lib test target of the package whose name is the first argument."""
import json
import sys

name = sys.argv[1]
for line in sys.stdin:
    try:
        m = json.loads(line)
    except json.JSONDecodeError:
        continue
    kinds = m.get("target", {}).get("kind", [])
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["name"] == name \
            and m.get("profile", {}).get("test") and any(k in ("lib", "rlib", "cdylib") for k in kinds):
        print(m["executable"])
        break
else:
    sys.exit(f"test_binary.py: no test executable for {name}")
