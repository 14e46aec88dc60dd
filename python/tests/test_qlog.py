"""Simulated runs' qlog traces (``recoup run --qlog``) pass the JSON Schema of the events recoup
emits (tests/qlog), and the client's and the server's traces of a run pair by ODCID."""

from __future__ import annotations

import importlib.util
import json
import subprocess
from pathlib import Path

from test_tables import ROOT, recoup_bin

SCENARIO = """
name = "q"
seed = 1
repetitions = 1
duration = "2s"

[path]
rtt = "60ms"
rate = "12Mbps"
loss = "bernoulli 5%"

[app]
kind = "live"
bitrate = "4Mbps"

[[policy]]
name = "autorec"
"""


def load_validator():
    spec = importlib.util.spec_from_file_location("validate", ROOT / "tests/qlog/validate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def header(path: Path) -> dict:
    return json.loads(path.read_bytes().split(b"\x1e")[1])


def test_simulated_traces_pass_the_schema_and_pair(tmp_path) -> None:
    plan = tmp_path / "q.toml"
    plan.write_text(SCENARIO, encoding="utf-8")
    out = tmp_path / "out"
    done = subprocess.run(
        [recoup_bin(), "run", str(plan), "--out", str(out), "--qlog"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    server = out / "qlog/q-autorec-1-server.sqlog"
    client = out / "qlog/q-autorec-1-client.sqlog"
    validate = load_validator()
    assert validate.check(server) == [] and validate.check(client) == []
    s, c = header(server), header(client)
    assert s["trace"]["common_fields"]["ODCID"] == c["trace"]["common_fields"]["ODCID"]
    assert s["trace"]["vantage_point"]["type"] == "server"
    # The simulator's fixed epoch: a run is a pure function of scenario and seed.
    assert s["trace"]["common_fields"]["reference_time"] == 0.0
    # The schema rejects what qlog does not define: a misspelt frame field fails.
    bad = tmp_path / "bad.sqlog"
    text = server.read_text(encoding="utf-8").replace('"stream_id"', '"stream_idx"', 1)
    bad.write_text(text, encoding="utf-8")
    assert validate.check(bad), "a misspelt field passed the schema"
