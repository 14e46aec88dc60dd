"""The fit of the deployment fleet's per-stream loss spread: the share of arq streams whose data
needed two or more retransmissions (K_max >= 2) against the papers' 21.7 % (TOO §1) to more
than 43 % (AutoRec Fig. 3), for a few loss distributions with a 4 % mean (AutoRec §VIII-B).

    python3 experiments/fleet/loss_spread.py [--streams N] [--jobs N] [--replot] [DRAW ...]

Each DRAW is the `[draw]` table's `loss` value, in TOML (default: the candidates below). Every
candidate runs scenarios/fleet/deployment.toml with only that line changed and only the arq
policy, on the same streams (same seeds, so the same bitrates, RTTs and loss models). Writes
experiments/figures/fleet_loss_spread.md: per candidate, the drawn mean loss, the share of
streams below 0.5 % drawn loss, the share with K_max >= 2 and its 95 % (Wilson) interval, the
same share per loss model, the share with K_max >= 5 and the runs' mean measured loss rate.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

SCENARIO = common.REPO / "scenarios" / "fleet" / "deployment.toml"
OUT = common.RESULTS / "fleet-spread"
# Log-normal spreads, then a share of lossless streams (`zero`) with the others log-normal;
# each `mean` chosen so that the draw clamped at 50 % has mean 4.0 %.
CANDIDATES = [
    '{ dist = "lognormal", mean = 0.04, cv = 1.0, max = 0.5 }',
    '{ dist = "lognormal", mean = 0.0415, cv = 2.0, max = 0.5 }',
    '{ dist = "lognormal", mean = 0.0474, cv = 4.0, max = 0.5 }',
    '{ dist = "lognormal", mean = 0.0402, cv = 1.0, max = 0.5, zero = 0.4 }',
    '{ dist = "lognormal", mean = 0.0404, cv = 1.0, max = 0.5, zero = 0.5 }',
    '{ dist = "lognormal", mean = 0.0408, cv = 1.0, max = 0.5, zero = 0.6 }',
    '{ dist = "lognormal", mean = 0.0417, cv = 1.0, max = 0.5, zero = 0.7 }',
]


def variant(draw: str, folder: Path) -> Path:
    """deployment.toml with `loss = draw` and only the arq policy; trace paths made absolute."""
    text = SCENARIO.read_text()
    text, n = re.subn(r"(?m)^loss = \{.*\}$", lambda _: f"loss = {draw}", text)
    assert n == 1, "deployment.toml has no single `loss = {...}` line"
    text = text[: text.index("[[policy]]")] + '[[policy]]\nname = "arq"\n'
    text = text.replace('"../../../shared/', f'"{SCENARIO.parent}/../../../shared/')
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "fleet.toml"
    path.write_text(text)
    return path


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def run(draw: str, folder: Path, streams: int, jobs: int) -> None:
    path = variant(draw, folder)
    out = folder / "out"
    if out.exists():
        shutil.rmtree(out)
    cmd = [str(common.recoup_binary()), "population", str(path), "--streams", str(streams)]
    cmd += ["--out", str(out), "--jobs", str(jobs)]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def row(draw: str, folder: Path) -> list[object]:
    runs = pd.read_csv(folder / "out" / "runs.csv")
    streams = pd.read_csv(folder / "out" / "streams.csv")
    arq = runs[runs["policy"] == "arq"].merge(
        streams[["seed", "loss_rate", "loss_model"]].rename(columns={"loss_rate": "drawn"}),
        on="seed",
    )
    bad = arq["app_error"].dropna()
    if not bad.empty:
        sys.exit(f"{len(bad)} runs report an application error ({bad.iloc[0]}); see {folder}")
    n = len(arq)
    k = int((arq["k_max"] >= 2).sum())
    lo, hi = wilson(k, n)
    per_model = ", ".join(
        f"{m} {100 * (g['k_max'] >= 2).mean():.0f}" for m, g in arq.groupby("loss_model", sort=True)
    )
    return [
        draw,
        n,
        100 * arq["drawn"].mean(),
        100 * (arq["drawn"] < 0.005).mean(),
        f"{100 * k / n:.1f} [{100 * lo:.1f}, {100 * hi:.1f}]",
        per_model,
        100 * (arq["k_max"] >= 5).mean(),
        100 * arq["loss_rate"].mean(),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("draws", nargs="*", default=CANDIDATES, metavar="DRAW")
    parser.add_argument("--streams", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--replot", action="store_true")
    args = parser.parse_args()
    rows = []
    for i, draw in enumerate(args.draws):
        folder = OUT / f"{i}-{re.sub(r'[^a-z0-9.]+', '_', draw.lower()).strip('_')}"
        if not args.replot:
            run(draw, folder, args.streams, args.jobs)
        rows.append(row(draw, folder))
    header = ["draw.loss", "streams", "drawn loss mean %", "drawn < 0.5 % (% of streams)"]
    header += ["K_max >= 2 (% of streams, 95 % CI)", "K_max >= 2 by loss model (%)"]
    header += ["K_max >= 5 (%; TOO §1: 8.5)", "measured loss mean %"]
    md = "## Fleet loss spread: share of arq streams with K_max >= 2\n\n"
    md += "Papers: 21.7 % (TOO §1) to more than 43 % (AutoRec Fig. 3); mean loss about 4 %.\n\n"
    md += common.markdown_table(header, rows, ".2f")
    common.save_text(common.FIGURES / "fleet_loss_spread.md", md)
    print(md)


if __name__ == "__main__":
    main()
