"""Shared plumbing of the experiment scripts: command-line flags, the `recoup` CLI binary, a plan
(a dict shaped like DESIGN.md's scenario file) written as TOML and run, its `runs.csv` read back,
means over seeds with 95 % confidence intervals, and markdown tables, plots and their paths.

The scripts drive the CLI, so this module needs neither the `recoup` Python package nor its
compiled extension; it borrows only the package's TOML writer, a plain-Python file. A script in
experiments/<group>/ imports it after putting experiments/ on `sys.path`, which makes it run from
any working directory.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib
import pandas as pd

# Scripts run headless and only write files; the default backend would want a display if one
# is set.
matplotlib.use("Agg")

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "experiments" / "results"
FIGURES = REPO / "experiments" / "figures"


def _toml_writer() -> Any:
    # Loaded by path: importing `recoup._toml` would run the package's __init__, which needs the
    # compiled extension.
    spec = importlib.util.spec_from_file_location(
        "recoup_toml_writer", REPO / "python" / "recoup" / "_toml.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


to_toml = _toml_writer().dumps

# AutoRec §VII testbed: 5 % loss, 60 ms RTT, 12 Mbit/s.
AUTOREC_PATH = {
    "rtt": "60ms",
    "rate": "12Mbps",
    "queue": "droptail packets=100",
    "loss": "bernoulli 5%",
}
# ART §7.1 runs its testbed in Mahimahi ("Burst loss is also simulated using Mahimahi's limited
# buffer"): an mm-link at 100 Mbit/s (ART_MBPS) and a droptail queue. 100 Mbit/s x 30 ms is
# 375 kB, about 300 of our packets: the queue holds one BDP (the paper gives no size).
ART_MBPS = 100
ART_QUEUE = "droptail packets=300"
# The simulator's constant-rate link: the same rate without mm-link's 1 ms delivery batches.
ART_RATE_PATH = {"rtt": "30ms", "rate": f"{ART_MBPS}Mbps", "queue": ART_QUEUE}
# mm-link's delivery opportunities carry 1504 bytes each.
MM_PACKET_BYTES = 1504


def mahimahi_constant_trace(mbps: int) -> Path:
    """An mm-link trace of a constant `mbps` Mbit/s link, written (once) to
    experiments/results/traces/: 12500 opportunities of 1504 bytes spread evenly over a period
    of 1504 * 8 * 12500 / (mbps * 1000) ms (1504 ms at 100 Mbit/s), as mm-link repeats it."""
    lines = 12500
    period_ms = MM_PACKET_BYTES * 8 * lines / (mbps * 1000)
    if period_ms != int(period_ms):
        raise ValueError(f"{mbps} Mbit/s needs a fractional trace period ({period_ms} ms)")
    path = RESULTS / "traces" / f"constant-{mbps}mbps.mm"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        stamps = (math.ceil((i + 1) * period_ms / lines) for i in range(lines))
        path.write_text("".join(f"{t}\n" for t in stamps))
    return path


def art_path(rtt: str = "30ms", queue: str = ART_QUEUE) -> dict[str, str]:
    """ART's testbed path: the Mahimahi link at ART_MBPS both ways, `rtt`, a droptail queue."""
    return {"rtt": rtt, "trace": str(mahimahi_constant_trace(ART_MBPS)), "queue": queue}


# The path the ART authors' automation script runs (quic-art `tools/automation_test.sh`, line 29:
# `mm-link 100Mbps_trace.up 100Mbps_trace.down mm-loss downlink $loss mm-delay 30`): mm-delay is
# one way, so the RTT is 60 ms, and mm-link without queue arguments has an unbounded queue.
ART_PATHS = {
    "stated": lambda: art_path(),
    "scripted": lambda: art_path(rtt="60ms", queue="infinite"),
}


def autorec_plan(
    name: str,
    bitrate: str,
    policies: list[dict[str, str]],
    args: argparse.Namespace,
    sweep: dict[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """A live stream (30 fps, BBR) on the AutoRec testbed path, `args.seeds` seeds of
    `args.duration` per point."""
    plan = {
        "name": name,
        "seed": 1,
        "repetitions": args.seeds,
        "duration": args.duration,
        "path": AUTOREC_PATH,
        "app": {"kind": "live", "bitrate": bitrate, "fps": 30},
        "transport": {"cc": "bbr"},
        "policy": policies,
    }
    if sweep:
        plan["sweep"] = sweep
    return plan


def art_plan(
    name: str,
    size: str,
    loss: str,
    policies: list[dict[str, str]],
    seeds: int,
    duration: str,
    *,
    path: dict[str, str] | None = None,
    transport: dict[str, Any] | None = None,
    sweep: dict[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """One file of `size` per run (BBR) on ART's testbed path (`art_path()` unless `path` is
    given) with `loss` on the data direction: a percentage of random loss, or a full loss
    description ("gemodel ..."); `transport` adds transport keys."""
    plan = {
        "name": name,
        "seed": 1,
        "repetitions": seeds,
        "duration": duration,
        "path": {
            **(path or art_path()),
            "down": {"loss": loss if " " in loss else f"bernoulli {loss}"},
        },
        "app": {"kind": "file", "size": size, "count": 1},
        "transport": {"cc": "bbr", **(transport or {})},
        "policy": policies,
    }
    if sweep:
        plan["sweep"] = sweep
    return plan


def parse_args(
    doc: str,
    quick: str,
    seeds: int,
    quick_seeds: int,
    *,
    jobs: int,
    count: str = "--seeds",
    count_help: str = "seeds per point",
    duration: bool = False,
    replot: bool = False,
    extra: Callable[[argparse.ArgumentParser], None] | None = None,
) -> argparse.Namespace:
    """The flags: --quick (a smoke run, described by `quick`), `count` (runs per point, into
    `args.seeds`) and --jobs (worker threads, `jobs` by default, 0 for all cores). With
    `duration`, also --duration (60 s, --quick 10 s); with `duration` or `replot`, --replot
    (redraw from existing results; `args.replot` is False without it)."""
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("--quick", action="store_true", help=quick)
    p.add_argument(
        count,
        dest="seeds",
        metavar="N",
        type=int,
        help=f"{count_help} (default {seeds}, with --quick {quick_seeds})",
    )
    p.add_argument(
        "--jobs",
        type=int,
        default=jobs,
        help=f"worker threads (default {jobs or 'all cores'})",
    )
    if duration:
        p.add_argument("--duration", help="simulated length of each run (default 60s)")
    if duration or replot:
        p.add_argument(
            "--replot", action="store_true", help="only re-read existing results and redraw"
        )
    p.set_defaults(replot=False)
    if extra:
        extra(p)
    args = p.parse_args()
    if args.seeds is None:
        args.seeds = quick_seeds if args.quick else seeds
    if duration and args.duration is None:
        args.duration = "10s" if args.quick else "60s"
    return args


def autorec_args(
    doc: str, extra: Callable[[argparse.ArgumentParser], None] | None = None
) -> argparse.Namespace:
    """The AutoRec scripts' flags: 10 seeds of 60 s per point on 2 threads by default; `extra`
    adds a script's own."""
    return parse_args(
        doc,
        "smoke version: 2 seeds of 10 s and fewer sweep points",
        seeds=10,
        quick_seeds=2,
        jobs=2,
        duration=True,
        extra=extra,
    )


@functools.lru_cache(maxsize=1)
def recoup_binary() -> Path:
    """The release CLI: $RECOUP_BIN, else built from this checkout with cargo (into
    $CARGO_TARGET_DIR or target/). The build is copied out of the target folder, which other
    checkouts may share and overwrite."""
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


def _axes(scenario: str) -> dict[str, str]:
    """`name[a=1,b=x]` -> {"a": "1", "b": "x"}."""
    m = re.search(r"\[(.*)\]$", scenario)
    if not m:
        return {}
    return dict(part.split("=", 1) for part in m.group(1).split(","))


def run(
    plan: dict[str, Any], path: Path, args: argparse.Namespace, *, losses: bool = False
) -> pd.DataFrame:
    """Writes `plan` to the scenario file `path` and runs it on `args.jobs` threads into that
    file's folder (emptied first), unless `args.replot`; returns the rows of runs.csv, one per
    (sweep point, policy, seed), with one column per sweep axis. The wall time goes to
    wall_seconds.txt beside them. With `losses`, every run's lost data ranges go to
    losses/ there too (`recoup run --losses`, read with `losses_file`)."""
    out = path.parent
    provenance()
    if not args.replot:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        path.write_text(to_toml(plan))
        cmd = [str(recoup_binary()), "run", str(path), "--out", str(out), "--jobs", str(args.jobs)]
        cmd += ["--losses"] if losses else []
        print("$", " ".join(cmd), flush=True)
        t0 = time.monotonic()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.monotonic() - t0
        (out / "wall_seconds.txt").write_text(f"{wall:.1f}\n")
        print(f"{out.relative_to(RESULTS)}: {wall:.1f} s wall", flush=True)
    df = pd.read_csv(out / "runs.csv")
    bad = df["app_error"].dropna()
    if not bad.empty:
        sys.exit(f"{len(bad)} runs report an application error ({bad.iloc[0]}); see {out}")
    axes = df["scenario"].map(_axes).apply(pd.Series)
    return pd.concat([axes, df], axis=1)


def train_dqn(
    out: Path,
    episodes: int,
    seed: int,
    *,
    replot: bool = False,
    gamma: float | None = None,
    scenario: Path | None = None,
    reading: str | None = None,
) -> Path:
    """art-dqn's weights at `out`, trained by `recoup train-dqn` (`gamma`: ART §8's reward
    ratio; `scenario`: train on that file's sweep points instead of the built-in ones;
    `reading`: `code`, the default, or `text`); an existing file is kept with `replot`. The wall
    time goes to <out>.seconds beside it."""
    if replot and out.exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    cmd = [str(recoup_binary()), "train-dqn", "--out", str(out)]
    cmd += ["--episodes", str(episodes), "--seed", str(seed)]
    cmd += ["--gamma", str(gamma)] if gamma is not None else []
    cmd += ["--scenario", str(scenario)] if scenario is not None else []
    cmd += ["--reading", reading] if reading is not None else []
    print("$", " ".join(cmd), flush=True)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - t0
    out.with_suffix(".seconds").write_text(f"{wall:.1f}\n")
    print(f"{out.name}: trained in {wall:.1f} s wall", flush=True)
    return out


def losses_file(folder: Path, scenario: str, policy: str, seed: int) -> Path:
    """The loss records `recoup run --losses` wrote into `folder` for one run: the name as
    recoup_sim::run::losses_file_name makes it (characters other than letters, digits and
    `._-=` replaced by `_`)."""
    name = f"{scenario}-{policy}-{seed}.csv"
    return (
        folder
        / "losses"
        / "".join(c if c.isascii() and (c.isalnum() or c in "._-=") else "_" for c in name)
    )


def wall_seconds(folder: Path) -> float:
    """The simulation wall time of every run below `folder`, in seconds."""
    return sum(float(p.read_text()) for p in folder.rglob("wall_seconds.txt"))


def add_goodput_reduction(df: pd.DataFrame, base: pd.DataFrame, on: list[str]) -> pd.DataFrame:
    """goodput_reduction = 1 - goodput / goodput of the `base` row with the same seed and the
    same values of `on` (DESIGN.md: against `arq` on the same seed)."""
    b = base[[*on, "seed", "goodput_mbps"]].rename(columns={"goodput_mbps": "base_goodput"})
    df = df.drop(columns=["goodput_reduction"], errors="ignore").merge(b, on=[*on, "seed"])
    df["goodput_reduction"] = 1.0 - df["goodput_mbps"] / df["base_goodput"]
    return df


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


def fmt(v: Any, spec: str = ".1f", missing: str = "–") -> str:
    """A table cell: floats with format `spec`, NaN and None as `missing`."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return missing
    if isinstance(v, float):
        return format(v, spec)
    return str(v)


def pm(mean: float, ci: float, scale: float = 1.0, digits: int = 1) -> str:
    """`mean ± ci` in the given scale (100 for percent)."""
    if math.isnan(mean):
        return "–"
    if math.isnan(ci):
        return fmt(mean * scale, f".{digits}f")
    return f"{mean * scale:.{digits}f} ± {ci * scale:.{digits}f}"


def markdown_table(header: list[Any], rows: Any, spec: str = ".1f", missing: str = "–") -> str:
    """A pipe table; cells as `fmt` writes them."""
    out = ["| " + " | ".join(map(str, header)) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(fmt(c, spec, missing) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def frame_table(df: pd.DataFrame, spec: str = ".3g") -> str:
    """`df` (index dropped) as a pipe table, numbers formatted with `spec`, NaN left empty."""
    return markdown_table(list(df.columns), df.itertuples(index=False), spec, missing="")


def machine() -> str:
    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def figure_dir(quick: bool) -> Path:
    """Where the ART and burst scripts put plots and tables: experiments/figures/, or for a smoke
    run the gitignored experiments/results/quick/ so it never replaces the committed figures."""
    return RESULTS / "quick" if quick else FIGURES


def figure_path(fig: str, quick: bool, ext: str = "png") -> Path:
    """Where the AutoRec scripts put a plot or table: experiments/figures/<fig>.<ext>, for a
    smoke run <fig>-quick.<ext> (gitignored)."""
    return FIGURES / f"{fig}{'-quick' if quick else ''}.{ext}"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=REPO, check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


@functools.lru_cache(maxsize=1)
def provenance() -> str:
    """What made a figure: the commit of the code (marked when the code that runs differs from
    it: crates, python, scenarios or experiment scripts) and the command line, so every table
    can be traced and rerun. Taken when first asked for, which `run` does before it starts the
    simulations, so a commit made while they run is not named. Figure files themselves are left
    out of the check, since a regeneration rewrites them."""
    commit = _git("rev-parse", "--short=12", "HEAD") or "unknown"
    code = ["crates", "python", "scenarios", "Cargo.lock", "experiments/*.py", "experiments/*/*.py"]
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", *code)
    if dirty:
        commit += " with uncommitted changes"
    script = Path(sys.argv[0]).resolve()
    try:
        script = script.relative_to(REPO)
    except ValueError:
        pass
    flags = [a for a in sys.argv[1:] if a != "--replot"]
    command = " ".join(["python3", str(script), *flags])
    redrawn = (
        " (this table redrawn from its results with --replot)" if "--replot" in sys.argv else ""
    )
    return f"Made at commit `{commit}` by `{command}`{redrawn}.\n"


def save_text(path: Path, text: str) -> None:
    """Writes a file; a markdown table (`.md`) gets a last line with its `provenance()`."""
    if path.suffix == ".md":
        text = text.rstrip("\n") + "\n\n" + provenance()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")


def save_figure(fig: Any, path: Path, dpi: int) -> None:
    """Lays out the matplotlib figure `fig` and saves it to `path`."""
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    print(f"wrote {path}")


def write_table(
    fig: str, title: str, body: str, args: argparse.Namespace, per_point: str | None = None
) -> None:
    """A figure's table with what it took: experiments/figures/<fig>.md (or <fig>-quick.md for
    a smoke run). `per_point` says what each point ran (default: seeds x duration)."""
    wall = wall_seconds(RESULTS / fig)
    per_point = per_point or f"{args.seeds} seeds x {args.duration}"
    save_text(
        figure_path(fig, args.quick, "md"),
        f"## {title}\n\n{body}\n"
        f"{per_point} per point; wall time {wall:.0f} s with "
        f"--jobs {args.jobs} on {machine()}.\n",
    )


def rows_by(
    agg: pd.DataFrame,
    axis: str,
    values: list[Any],
    labels: list[str],
    cells: Callable[[pd.Series], list[str]],
) -> list[list[Any]]:
    """Table rows of aggregated results, per value of `axis` and policy label in that order:
    [value, label, *cells(that policy's row)]."""
    out = []
    for v in values:
        sel = agg[agg[axis] == v].set_index("policy")
        out += [[v, label, *cells(sel.loc[label])] for label in labels]
    return out


# AutoRec §VII's RTC settings of the schemes it compares (Figs. 19-20): AutoRec with alpha = 0
# and beta = gamma = 20 % / 5 % (LC) / 50 % (HC); Hairpin's lambda 1e-4 / 1e-1 (LC) / 1e-7 (HC);
# Tambur's maximum redundancy 25 % / one repair per frame (LC) / 50 % (HC). A scheme is a
# recovery policy (sender-side) or a FEC scheme over ARQ (dual-side, `fec`).
AUTOREC_RTC = [
    {"label": "autorec", "name": "autorec", "params": "alpha=0ms,beta=0.2,gamma=0.2"},
    {"label": "autorec-lc", "name": "autorec", "params": "alpha=0ms,beta=0.05,gamma=0.05"},
    {"label": "autorec-hc", "name": "autorec", "params": "alpha=0ms,beta=0.5,gamma=0.5"},
]
HAIRPIN = [
    {"label": "hairpin", "fec": "hairpin:lambda=1e-4"},
    {"label": "hairpin-lc", "fec": "hairpin:lambda=1e-1"},
    {"label": "hairpin-hc", "fec": "hairpin:lambda=1e-7"},
]
WEBRTC = [
    {"label": "webrtc14", "fec": "webrtc14"},
    {"label": "webrtc-now", "fec": "webrtc-now"},
]
TAMBUR = [
    {"label": "tambur", "fec": "tambur:max_ratio=0.25"},
    {"label": "tambur-lc", "fec": "tambur:max_ratio=0"},
    {"label": "tambur-hc", "fec": "tambur:max_ratio=0.5"},
]


def run_schemes(
    plan: dict[str, Any], schemes: list[dict[str, str]], out: Path, args: argparse.Namespace
) -> pd.DataFrame:
    """Runs `plan` once with every sender-side scheme of `schemes` as its policies and once per
    FEC scheme (ARQ plus `[transport] fec`, labelled with the scheme), into `out`/<label>/; the
    rows of all, with `policy` the scheme's label and `dual_side` marking FEC."""
    policies = [s for s in schemes if "fec" not in s]
    parts = []
    if policies:
        p = dict(plan, policy=policies)
        df = run(p, out / "sender-side" / "scenario.toml", args)
        df["dual_side"] = False
        parts.append(df)
    for s in (s for s in schemes if "fec" in s):
        transport = dict(plan.get("transport", {}), fec=s["fec"])
        p = dict(plan, transport=transport, policy=[{"label": s["label"], "name": "arq"}])
        df = run(p, out / s["label"] / "scenario.toml", args)
        df["dual_side"] = True
        parts.append(df)
    return pd.concat(parts, ignore_index=True)


def cost_plot(
    means: pd.DataFrame,
    panels: list[Any],
    panel_col: str,
    y: str,
    ylabel: str,
    titles: dict[Any, str],
    path: Path,
) -> None:
    """One panel per value of `panel_col`: `y` against bandwidth cost, one point per scheme
    (dual-side schemes hollow), as AutoRec Figs. 19-20 plot them."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), squeeze=False)
    markers = "osD^v<>pP*Xh"
    for ax, panel in zip(axes[0], panels):
        sub = means[means[panel_col] == panel]
        for i, r in enumerate(sub.itertuples()):
            color = f"C{i % 10}"
            style = {"facecolors": "none", "edgecolors": color} if r.dual_side else {"c": color}
            ax.scatter(
                r.bandwidth_cost * 100,
                getattr(r, y) * 100,
                marker=markers[i % len(markers)],
                label=r.policy,
                **style,
            )
        ax.set_title(titles.get(panel, str(panel)))
        ax.set_xlabel("bandwidth cost (%)")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel(ylabel)
    axes[0][-1].legend(fontsize=7, loc="best")
    save_figure(fig, path, dpi=110)
