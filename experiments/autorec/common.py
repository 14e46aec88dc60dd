"""Shared plumbing of the AutoRec reproductions: write a plan, run it with the `recoup` CLI,
read its rows, aggregate over seeds, and write the figure's table.

Each figure script builds its plan as a dict (the scenario-file shape of DESIGN.md), writes it to
`experiments/results/<fig>/plan.toml` (so it can be re-run with `recoup run` by hand), runs it and
reads `runs.csv`. Aggregates are means over seeds with the half-width of a 95 % Student-t
confidence interval.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pandas as pd

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "experiments" / "results"
FIGURES = REPO / "experiments" / "figures"

# AutoRec §VII testbed: 5 % loss, 60 ms RTT, 12 Mbit/s, BBR, 60 s streams.
TESTBED_PATH = {
    "rtt": "60ms",
    "rate": "12Mbps",
    "queue": "droptail packets=100",
    "loss": "bernoulli 5%",
}

# Two-sided 97.5 % quantiles of Student's t for df = 1..30; 1.96 beyond.
_T975 = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
]  # fmt: skip


def t975(df: int) -> float:
    if df < 1:
        return math.nan
    return _T975[df - 1] if df <= len(_T975) else 1.96


def parse_args(doc: str, seeds: int, quick_seeds: int) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=doc)
    p.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke version: {quick_seeds} seeds of 10 s and fewer sweep points",
    )
    p.add_argument("--seeds", type=int, help=f"seeds per point (default {seeds})")
    p.add_argument("--jobs", type=int, default=2, help="worker threads (default 2)")
    p.add_argument("--duration", help="simulated length of each run (default 60s)")
    p.add_argument("--replot", action="store_true", help="only re-read existing results and redraw")
    args = p.parse_args()
    if args.seeds is None:
        args.seeds = quick_seeds if args.quick else seeds
    if args.duration is None:
        args.duration = "10s" if args.quick else "60s"
    return args


@functools.lru_cache(maxsize=1)
def recoup_binary() -> Path:
    """The release CLI: $RECOUP_BIN, else built from this checkout with cargo. The build is
    copied out of the target folder, which other checkouts may share and overwrite."""
    if "RECOUP_BIN" in os.environ:
        return Path(os.environ["RECOUP_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    subprocess.run(
        ["cargo", "build", "--release", "--locked", "-q", "-p", "recoup-cli"],
        cwd=REPO,
        check=True,
    )
    copy = RESULTS / "bin" / "recoup"
    copy.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(target / "release" / "recoup", copy)
    return copy


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TypeError(f"no TOML form for {v!r}")


def _toml_key(k: str) -> str:
    return k if re.fullmatch(r"[A-Za-z0-9_-]+", k) else _toml_value(k)


def to_toml(plan: dict[str, Any]) -> str:
    """The plan dict as a scenario file: scalars first, then tables, then `[[policy]]`."""
    lines = [
        f"{_toml_key(k)} = {_toml_value(v)}"
        for k, v in plan.items()
        if k != "policy" and not isinstance(v, dict)
    ]
    for k, v in plan.items():
        if isinstance(v, dict):
            lines.append(f"\n[{k}]")
            lines += [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in v.items()]
    for pol in plan.get("policy", []):
        lines.append("\n[[policy]]")
        lines += [f"{_toml_key(kk)} = {_toml_value(vv)}" for kk, vv in pol.items()]
    return "\n".join(lines) + "\n"


def _axes(scenario: str) -> dict[str, str]:
    """`name[a=1,b=x]` -> {"a": "1", "b": "x"}."""
    m = re.search(r"\[(.*)\]$", scenario)
    if not m:
        return {}
    return dict(part.split("=", 1) for part in m.group(1).split(","))


def run_plan(
    fig: str, plan: dict[str, Any], args: argparse.Namespace, tag: str = "runs"
) -> pd.DataFrame:
    """Runs `plan` (unless --replot) into experiments/results/<fig>/<tag>/ and returns its rows,
    one per (sweep point, policy, seed), with one column per sweep axis."""
    out = RESULTS / fig / tag
    out.mkdir(parents=True, exist_ok=True)
    plan = {**plan, "repetitions": args.seeds, "duration": args.duration}
    path = out / "plan.toml"
    if not args.replot:
        path.write_text(to_toml(plan))
        cmd = [str(recoup_binary()), "run", str(path), "--out", str(out), "--jobs", str(args.jobs)]
        print("$", " ".join(cmd), flush=True)
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        (out / "wall_seconds.txt").write_text(f"{wall:.1f}\n")
        print(f"{fig}/{tag}: {wall:.1f} s wall", flush=True)
    df = pd.read_csv(out / "runs.csv")
    bad = df["app_error"].notna() if "app_error" in df else pd.Series(False, index=df.index)
    if bad.any():
        sys.exit(f"{fig}: {int(bad.sum())} runs report an application error; see {out}")
    axes = df["scenario"].map(_axes).apply(pd.Series)
    return pd.concat([axes, df], axis=1)


def wall_seconds(fig: str) -> float:
    return sum(float(p.read_text()) for p in (RESULTS / fig).glob("*/wall_seconds.txt"))


def add_goodput_reduction(df: pd.DataFrame, base: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """goodput_reduction = 1 - goodput / goodput of the `base` row with the same seed and the
    same values of `on` (DESIGN.md: against `arq` on the same seed)."""
    b = base[[*on, "seed", "goodput_mbps"]].rename(columns={"goodput_mbps": "base_goodput"})
    df = df.drop(columns=["goodput_reduction"], errors="ignore").merge(b, on=[*on, "seed"])
    df["goodput_reduction"] = 1.0 - df["goodput_mbps"] / df["base_goodput"]
    return df


def aggregate(df: pd.DataFrame, by: list[str], metrics: list[str]) -> pd.DataFrame:
    """Mean and 95 % CI half-width (`<metric>_ci`) of each metric over seeds, per `by` group."""
    rows = []
    for key, g in df.groupby(by, sort=False):
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        row["n"] = len(g)
        for m in metrics:
            v = g[m].dropna()
            row[m] = v.mean() if len(v) else math.nan
            row[m + "_ci"] = (
                t975(len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else math.nan
            )
        rows.append(row)
    return pd.DataFrame(rows)


def fmt(v: Any, digits: int = 1) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def pm(mean: float, ci: float, scale: float = 1.0, digits: int = 1) -> str:
    """`mean ± ci` in the given scale (100 for percent)."""
    if math.isnan(mean):
        return "–"
    if math.isnan(ci):
        return fmt(mean * scale, digits)
    return f"{mean * scale:.{digits}f} ± {ci * scale:.{digits}f}"


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def write_table(fig: str, title: str, body: str, args: argparse.Namespace) -> Path:
    """Writes experiments/figures/<fig>.md (or <fig>-quick.md for a smoke run)."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if args.quick else ""
    path = FIGURES / f"{fig}{suffix}.md"
    wall = wall_seconds(fig)
    text = (
        f"## {title}\n\n{body}\n"
        f"{args.seeds} seeds x {args.duration} per point; wall time {wall:.0f} s with "
        f"--jobs {args.jobs} on {machine()}.\n"
    )
    path.write_text(text)
    print(f"wrote {path}")
    return path


def figure_path(fig: str, args: argparse.Namespace) -> Path:
    FIGURES.mkdir(parents=True, exist_ok=True)
    return FIGURES / f"{fig}{'-quick' if args.quick else ''}.png"
