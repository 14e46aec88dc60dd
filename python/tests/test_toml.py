"""The dict-to-TOML writer for scenarios given as dicts, checked against Python's TOML reader."""

from __future__ import annotations

import math
import os
import random
import string
from pathlib import PurePosixPath

import pytest
import tomllib

from recoup._toml import dumps


def roundtrip(doc: dict) -> dict:
    return tomllib.loads(dumps(doc))


def test_scenario_shapes_roundtrip() -> None:
    doc = {
        "name": "grid",
        "seed": 1,
        "duration": "5s",
        "path": {"rtt": "60ms", "down": {"rate": "12Mbps"}, "up": {"rate": "1Mbps"}},
        "app": {"kind": "live", "fps": 30, "size_noise": 0.25, "bursty": False},
        "policy": [{"name": "arq"}, {"name": "autorec", "params": "alpha=30ms,beta=0.3"}],
        "sweep": {
            "path.rtt": ["20ms", "60ms"],
            "app.size_noise": {"from": 0.1, "to": 0.3, "step": 0.1},
        },
    }
    assert roundtrip(doc) == doc


def test_strings_keys_and_numbers_roundtrip() -> None:
    doc = {
        'quo"te': 'a "b" \\ c',
        "ctl": "tab\tnl\nbell\x07del\x7f",
        "unicode": "µs → 😀",
        "spaced key": "",
        "a.b": {"c d": {"e": [1, -2, 3]}},
        "floats": [0.1, -0.0, 1e300, 5e-324, 1e16, 12.0],
        "big": 2**63 - 1,
        "nested": [[1, 2], ["x"], [], [{"inline": True}]],
        "empty": {},
        "tuple": (1, 2),
        "path": PurePosixPath("traces/a.down"),
    }
    back = roundtrip(doc)
    assert back["floats"] == doc["floats"]
    assert math.copysign(1.0, back["floats"][1]) == -1.0
    expected = {**doc, "tuple": [1, 2], "path": "traces/a.down"}
    assert back == expected


def test_special_floats() -> None:
    back = roundtrip({"x": [math.inf, -math.inf, math.nan]})["x"]
    assert back[0] == math.inf and back[1] == -math.inf and math.isnan(back[2])


def test_values_toml_cannot_hold_name_the_key() -> None:
    with pytest.raises(TypeError, match=r"key app\.fps: TOML has no null"):
        dumps({"app": {"fps": None}})
    with pytest.raises(TypeError, match=r"key policy\.params.*set"):
        dumps({"policy": [{"params": {1, 2}}]})
    with pytest.raises(TypeError, match="keys must be strings"):
        dumps({"path": {1: "x"}})
    with pytest.raises(TypeError, match="dict"):
        dumps(["not", "a", "table"])  # type: ignore[arg-type]


def _random_value(rng: random.Random, depth: int) -> object:
    kind = rng.choice(["int", "float", "str", "bool", "list", "dict"] if depth < 3 else ["str"])
    if kind == "int":
        return rng.randint(-(2**63), 2**63 - 1)
    if kind == "float":
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-300, 300)])
    if kind == "str":
        alphabet = string.printable + "\x00\x1b\x7fé€😀"
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "list":
        return [_random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))]
    return _random_table(rng, depth + 1)


def _random_table(rng: random.Random, depth: int) -> dict:
    keys = string.ascii_letters + string.digits + "_-. \"'"
    table = {}
    for _ in range(rng.randint(0, 5)):
        key = "".join(rng.choice(keys) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.2 and depth < 3:
            table[key] = [_random_table(rng, depth + 1) for _ in range(rng.randint(1, 3))]
        else:
            table[key] = _random_value(rng, depth)
    return table


def test_random_documents_roundtrip() -> None:
    seed = int(os.environ.get("RECOUP_TEST_SEED", random.randrange(2**32)))
    print(f"seed {seed} (RECOUP_TEST_SEED reruns it)")
    rng = random.Random(seed)
    for _ in range(300):
        doc = _random_table(rng, 0)
        text = dumps(doc)
        assert tomllib.loads(text) == doc, text
