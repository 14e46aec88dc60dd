"""Drives the `recoup` CLI for the experiment scripts: writes a scenario file, runs it, reads the
per-run rows back as a DataFrame, and writes markdown tables.

The binary is $RECOUP_BIN, else `release/recoup` under $CARGO_TARGET_DIR or the repository's
`target/`; when none exists it is built with cargo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "results"
FIGURES = REPO / "experiments" / "figures"


def figure_dir(quick: bool) -> Path:
    """Where plots and tables go: experiments/figures/, or for a smoke run the gitignored
    experiments/results/quick/ so it never replaces the committed figures."""
    return RESULTS / "quick" if quick else FIGURES


def binary() -> Path:
    """The `recoup` binary, built (release) if it does not exist yet."""
    if env := os.environ.get("RECOUP_BIN"):
        return Path(env)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    path = target / "release" / "recoup"
    if not path.exists():
        cmd = ["cargo", "build", "--release", "--locked", "-p", "recoup-cli"]
        subprocess.run(cmd, cwd=REPO, check=True)
    return path


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    return '"' + str(v).replace("\\", "\\\\").replace('"', '\\"') + '"'


def scenario_toml(
    top: dict,
    tables: dict[str, dict],
    policies: list[tuple[str, str, str]],
    sweep: dict[str, list] | None = None,
) -> str:
    """A scenario file: top-level keys, `[table]`s, `[[policy]]` as (label, name, params),
    and an optional `[sweep]`."""
    lines = [f"{k} = {_value(v)}" for k, v in top.items()]
    for name, table in tables.items():
        lines += ["", f"[{name}]"] + [f"{k} = {_value(v)}" for k, v in table.items()]
    for label, name, params in policies:
        lines += ["", "[[policy]]", f"name = {_value(name)}", f"label = {_value(label)}"]
        if params:
            lines.append(f"params = {_value(params)}")
    if sweep:
        lines += ["", "[sweep]"] + [f"{_value(k)} = {_value(v)}" for k, v in sweep.items()]
    return "\n".join(lines) + "\n"


def run(toml: str, out: Path, jobs: int = 0) -> tuple[pd.DataFrame, float]:
    """Runs the scenario into `out` (replacing earlier results); returns its rows and wall time
    in seconds."""
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    (out / "scenario.toml").write_text(toml)
    cmd = [str(binary()), "run", str(out / "scenario.toml"), "--out", str(out)]
    cmd += ["--jobs", str(jobs)]
    start = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - start
    rows = pd.read_csv(out / "runs.csv")
    errors = rows["app_error"].dropna()
    if not errors.empty:
        print(f"warning: {len(errors)} run(s) reported an application error: {errors.iloc[0]}")
    return rows, wall


def markdown(df: pd.DataFrame, floatfmt: str = ".3g") -> str:
    """A pipe table of `df` (index dropped), numbers formatted with `floatfmt`."""

    def cell(v: object) -> str:
        if isinstance(v, float):
            return "" if pd.isna(v) else format(v, floatfmt)
        return str(v)

    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "|".join("---" for _ in df.columns) + "|"
    body = ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join([head, rule, *body]) + "\n"
