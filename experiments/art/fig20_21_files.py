"""ART Figs. 20-21: many 1 MB and 200 KB files at 1 % and 10 % random loss; N_max, redundancy
cost and flow completion time of QUIC, OR3 and ART (both readings), on the paper's stated path
and on the authors' script's (common.ART_PATHS).

    python3 experiments/art/fig20_21_files.py [--quick] [--files N] [--jobs N]

Each file is one connection (one run, its own seed), so N_max and the cost are per file as in
the paper's "average value of transmitting 1000 files". Raw rows in
experiments/results/art-fig20-21/<case>/, plots in experiments/figures/art-fig20-21-*.png and
the table in experiments/figures/art-fig20-21.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

POLICIES = [
    {"label": "QUIC (arq)", "name": "arq"},
    {"label": "OR3", "name": "or3"},
    # The authors' code's reading (the default) and the two readings of the text (see
    # fig19_nmax.py).
    {"label": "ART", "name": "art"},
    {"label": "ART (text)", "name": "art", "params": "reading=text"},
    {"label": "ART (text, level=copies)", "name": "art", "params": "reading=text,level=copies"},
]
LABELS = [p["label"] for p in POLICIES]
# (figure, size, loss)
CASES = [
    ("20a", "1MB", "1%"),
    ("20b", "200KB", "1%"),
    ("21a", "1MB", "10%"),
    ("21b", "200KB", "10%"),
]
# The paper's reductions of ART against OR3 (§7.2, §7.4) in percent, as ranges over
# its network environments: (redundancy cost, N_max).
PAPER = {
    "20a": ("75-90", "13-16"),
    "20b": ("75-90", "3-16"),
    "21a": ("12-40", "9-13"),
    "21b": ("12-40", "7-26"),
}


def reduction(table: pd.DataFrame, column: str) -> float:
    """ART's reduction against OR3 in percent: 1 - ART / OR3."""
    art, or3 = table.loc["ART", column], table.loc["OR3", column]
    return float("nan") if or3 == 0 else (1 - art / or3) * 100


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "100 files per case (a smoke run)",
        seeds=1000,
        quick_seeds=100,
        jobs=0,
        count="--files",
        count_help="files (seeds) per case and policy",
    )
    figs = common.figure_dir(args.quick)
    files = args.seeds
    results = common.RESULTS / "art-fig20-21"

    summary, reductions, cdfs, walls = [], [], {}, []
    for path_name, path in common.ART_PATHS.items():
        for fig, size, loss in CASES:
            plan = common.art_plan(f"art-fig{fig}", size, loss, POLICIES, files, "10s", path=path())
            folder = results / path_name / fig
            rows = common.run(plan, folder / "scenario.toml", args)
            wall = common.wall_seconds(folder)
            walls.append(wall)
            incomplete = int(rows["transfers_incomplete"].fillna(0).sum())
            if incomplete:
                print(f"warning: fig {fig} ({path_name}): {incomplete} file(s) did not complete")
            g = rows.groupby("policy")
            t = g.agg(
                files=("seed", "count"),
                n_max=("n_max", "mean"),
                copies=("copies_sent", "mean"),
                redundancy_cost=("redundancy_cost", "mean"),
                fct_mean=("fct_ms", "mean"),
                fct_p50=("fct_ms", "median"),
                fct_p95=("fct_ms", lambda s: s.quantile(0.95)),
                fct_p99=("fct_ms", lambda s: s.quantile(0.99)),
            ).reindex(LABELS)
            cdfs[path_name, fig] = {
                p: np.sort(rows.loc[rows["policy"] == p, "fct_ms"].dropna()) for p in t.index
            }
            t["redundancy_cost"] *= 100
            out = t.reset_index().rename(columns={"redundancy_cost": "redundancy_cost_%"})
            out.insert(0, "case", f"{fig}: {size}, {loss}")
            out.insert(0, "path", path_name)
            summary.append(out)
            cost_red, nmax_red = reduction(t, "copies"), reduction(t, "n_max")
            print(
                f"fig {fig} ({size}, {loss}, {path_name} path): {len(rows)} runs in {wall:.1f} s; "
                f"ART vs OR3: cost reduction {cost_red:.0f} % (paper {PAPER[fig][0]} %), "
                f"N_max reduction {nmax_red:.0f} % (paper {PAPER[fig][1]} %)"
            )
            reductions.append((path_name, fig, size, loss, cost_red, nmax_red))

    table = pd.concat(summary, ignore_index=True)
    red = pd.DataFrame(
        [
            {
                "path": path_name,
                "case": f"{fig}: {size}, {loss}",
                "cost reduction ours %": c,
                "cost reduction paper %": PAPER[fig][0],
                "N_max reduction ours %": n,
                "N_max reduction paper %": PAPER[fig][1],
            }
            for path_name, fig, size, loss, c, n in reductions
        ]
    )
    md = common.frame_table(table) + "\nART against OR3 (1 - ART / OR3):\n\n"
    md += common.frame_table(red, ".0f")
    common.save_text(figs / "art-fig20-21.md", md)
    print(md)

    paths = list(common.ART_PATHS)
    fig, axes = plt.subplots(len(paths), 4, figsize=(16, 3.8 * len(paths)), sharey=True)
    for row, path_name in zip(axes, paths):
        for ax, (case, size, loss) in zip(row, CASES):
            for policy, xs in cdfs[path_name, case].items():
                ax.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=policy)
            ax.set_title(f"Fig. {case}: {size}, {loss} loss ({path_name} path)")
            ax.set_xlabel("FCT (ms)")
            ax.grid(alpha=0.3)
        row[0].set_ylabel(f"CDF over {files} files")
    axes[0][0].legend()
    fig.tight_layout()
    common.save_figure(fig, figs / "art-fig20-21-fct.png", dpi=120)

    fig, axes = plt.subplots(len(paths), 2, figsize=(12, 3.8 * len(paths)))
    width = 0.8 / len(POLICIES)
    for (a, b), path_name in zip(axes, paths):
        for i, policy in enumerate(LABELS):
            sel = table[(table["policy"] == policy) & (table["path"] == path_name)]
            x = np.arange(len(CASES)) + i * width
            a.bar(x, sel["n_max"], width, label=policy)
            b.bar(x, sel["copies"], width, label=policy)
        for ax, label in ((a, "N_max (mean per file)"), (b, "copies beyond ARQ (mean per file)")):
            ax.set_xticks(np.arange(len(CASES)) + width, [f"{s}, {p}" for _, s, p in CASES])
            ax.set_ylabel(label)
            ax.set_title(f"{path_name} path")
            ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend(fontsize=8)
    fig.suptitle(
        f"ART Figs. 20-21 setting: 100 Mbit/s, {files} files per case; stated path 30 ms RTT + "
        "one-BDP queue, scripted 60 ms + unbounded"
    )
    fig.tight_layout()
    common.save_figure(fig, figs / "art-fig20-21-cost.png", dpi=120)
    print(f"wall time {sum(walls):.1f} s ({', '.join(f'{w:.1f}' for w in walls)})")


if __name__ == "__main__":
    main()
