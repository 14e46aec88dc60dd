"""Checks qlog JSON-SEQ traces against the schema of the events recoup emits.

Usage: python3 tests/qlog/validate.py TRACE.sqlog...

The first record of each file must match ``$defs/header``, every other one ``$defs/record`` of
``qlog-0.3-recoup.schema.json`` (beside this script). Exits non-zero naming the file, the
record and the first violation.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema

SCHEMA = json.loads(
    (Path(__file__).with_name("qlog-0.3-recoup.schema.json")).read_text(encoding="utf-8")
)


def validator(definition: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator({**SCHEMA, "$ref": f"#/$defs/{definition}"})


def check(path: Path) -> list[str]:
    header, record = validator("header"), validator("record")
    records = [r for r in path.read_bytes().split(b"\x1e") if r.strip()]
    if not records:
        return [f"{path}: empty trace"]
    errors = []
    for i, raw in enumerate(records):
        value = json.loads(raw)
        error = jsonschema.exceptions.best_match((header if i == 0 else record).iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path)
            errors.append(f"{path}: record {i} at /{where}: {error.message}")
    return errors


def main() -> int:
    errors = [e for arg in sys.argv[1:] for e in check(Path(arg))]
    for e in errors[:20]:
        print(e)
    return 1 if errors or len(sys.argv) < 2 else 0


if __name__ == "__main__":
    sys.exit(main())
