"""TOML text from a Python dict, for scenarios given as dicts.

Python has no TOML writer before 3.11's reader-only ``tomllib``, and a scenario needs little:
tables, arrays of tables (``[[policy]]``), strings, integers, floats, booleans and arrays. Dicts
nested in arrays become inline tables. ``None``, dates and other types are errors naming the key,
since TOML has no null and scenarios use no dates.
"""

from __future__ import annotations

import math
import numbers
import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["dumps"]

_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def dumps(doc: Mapping[str, Any]) -> str:
    """TOML text for ``doc``; ``TypeError`` names the key of a value TOML cannot hold."""
    if not isinstance(doc, Mapping):
        raise TypeError(f"a TOML document is a dict, not {type(doc).__name__}")
    lines: list[str] = []
    _table(doc, [], lines)
    return "\n".join(lines) + "\n" if lines else ""


def _key(k: Any, path: list[str]) -> str:
    if not isinstance(k, str):
        raise TypeError(f"{_where(path)}: keys must be strings, not {type(k).__name__} {k!r}")
    return k if _BARE_KEY.fullmatch(k) else _string(k)


def _where(path: list[str]) -> str:
    return "key " + ".".join(path) if path else "the document"


def _string(s: str) -> str:
    out = []
    for c in s:
        if c in _ESCAPES:
            out.append(_ESCAPES[c])
        elif ord(c) < 0x20 or ord(c) == 0x7F:
            out.append(f"\\u{ord(c):04X}")
        else:
            out.append(c)
    return '"' + "".join(out) + '"'


def _is_table_array(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) > 0 and all(isinstance(x, Mapping) for x in v)


def _table(t: Mapping[str, Any], path: list[str], lines: list[str]) -> None:
    # Plain values first: after a [header] they would belong to that table.
    subtables = []
    for k, v in t.items():
        key = _key(k, path)
        if isinstance(v, Mapping) or _is_table_array(v):
            subtables.append((k, key, v))
        else:
            lines.append(f"{key} = {_value(v, [*path, k])}")
    for k, key, v in subtables:
        header = [*(_key(p, []) for p in path), key]
        if lines:
            lines.append("")
        if isinstance(v, Mapping):
            lines.append(f"[{'.'.join(header)}]")
            _table(v, [*path, k], lines)
        else:
            for i, item in enumerate(v):
                if i:
                    lines.append("")
                lines.append(f"[[{'.'.join(header)}]]")
                _table(item, [*path, k], lines)


def _value(v: Any, path: list[str]) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, numbers.Integral):
        return str(int(v))
    if isinstance(v, numbers.Real):
        v = float(v)
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return _string(v)
    if isinstance(v, os.PathLike):
        return _string(os.fspath(v))
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x, [*path, str(i)]) for i, x in enumerate(v)) + "]"
    if isinstance(v, Mapping):
        items = (f"{_key(k, path)} = {_value(x, [*path, k])}" for k, x in v.items())
        return "{ " + ", ".join(items) + " }" if v else "{}"
    if v is None:
        raise TypeError(f"{_where(path)}: TOML has no null; leave the key out instead")
    raise TypeError(f"{_where(path)}: cannot write {type(v).__name__} {v!r} as TOML")
