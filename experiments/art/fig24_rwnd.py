"""ART Fig. 24: goodput and N_max of QUIC, OR3 and ART for one large file over a long lossy path
(100 Mbit/s, 300 ms RTT, 5 % loss) when the receiver's buffer (its flow-control window,
`[transport] receive_window`) is the limit: Fig. 24(a) at 8 MB, Fig. 24(b) over buffer sizes.

    python3 experiments/art/fig24_rwnd.py [--quick] [--seeds N] [--jobs N]

Goodput is the file's bytes over its completion time. Raw rows in
experiments/results/art-fig24/, the plot in experiments/figures/art-fig24.png and the table in
experiments/figures/art-fig24.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

POLICIES = [
    {"label": "QUIC (arq)", "name": "arq"},
    {"label": "OR3", "name": "or3"},
    {"label": "ART", "name": "art"},
]
LABELS = [p["label"] for p in POLICIES]
# Fig. 24(b)'s x axis: receive buffer sizes around the paper's 8 MB example (the figure's exact
# values are not in the text).
WINDOWS_MB = [1, 2, 4, 8, 16, 32]
FIG_A_MB = 8
# 100 Mbit/s x 300 ms = 3.75 MB, about 2800 of our packets: the queue holds one BDP.
QUEUE = "droptail packets=2800"
SEND_BUFFER = "256MB"


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "20 MB, 2 seeds (a smoke run)",
        seeds=3,
        quick_seeds=2,
        jobs=1,
        count_help="seeds per buffer size and policy",
    )
    figs = common.figure_dir(args.quick)
    size_mb = 20 if args.quick else 100
    windows = [f"{w}MB" for w in WINDOWS_MB]
    plan = common.art_plan(
        "art-fig24",
        f"{size_mb}MB",
        "5%",
        POLICIES,
        args.seeds,
        "300s",
        path=common.art_path(rtt="300ms", queue=QUEUE),
        # The sender's buffer frees bytes only up to the first unacknowledged one, so it stalls
        # on a hole just like the receive buffer; large enough here to leave the receiver's
        # buffer the only limit (recoup's default, 4 MB, would cap every point at 4 MB).
        transport={"send_buffer": SEND_BUFFER},
        sweep={"transport.receive_window": windows},
    )
    out = common.RESULTS / "art-fig24"
    rows = common.run(plan, out / "scenario.toml", args)
    incomplete = int(rows["transfers_incomplete"].fillna(0).sum())
    if incomplete:
        sys.exit(f"{incomplete} transfer(s) did not complete; lengthen the runs")
    rows["window_mb"] = rows["transport.receive_window"].str.removesuffix("MB").astype(int)
    # bytes / (completion - start), not bytes / run length.
    rows["goodput"] = size_mb * 8e6 / (rows["fct_ms"] * 1e3)
    agg = common.aggregate(rows, ["window_mb", "policy"], ["goodput", "n_max", "redundancy_cost"])

    header = ["buffer", "policy", "goodput Mbit/s", "N_max", "redundancy cost %", "vs QUIC"]
    body = []
    for w in WINDOWS_MB:
        sel = agg[agg["window_mb"] == w].set_index("policy")
        base = sel.loc["QUIC (arq)", "goodput"]
        for p in LABELS:
            r = sel.loc[p]
            body.append(
                [
                    f"{w} MB",
                    p,
                    common.pm(r["goodput"], r["goodput_ci"]),
                    common.pm(r["n_max"], r["n_max_ci"]),
                    common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], 100, 2),
                    f"{(r['goodput'] / base - 1) * 100:+.0f} %",
                ]
            )
    md = common.markdown_table(header, body)
    wall = common.wall_seconds(out)
    md += (
        f"\n{size_mb} MB file, 100 Mbit/s, 300 ms RTT, 5 % loss, {args.seeds} seeds per point; "
        f"wall time {wall:.0f} s with --jobs {args.jobs} on {common.machine()}.\n"
    )
    common.save_text(figs / "art-fig24.md", md)
    print(md)

    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4))
    sel = agg[agg["window_mb"] == FIG_A_MB].set_index("policy").reindex(LABELS)
    x = range(len(LABELS))
    a.bar(x, sel["goodput"], yerr=sel["goodput_ci"].fillna(0), color="tab:orange", capsize=3)
    a.set_ylabel("goodput (Mbit/s)")
    a.set_xticks(list(x), LABELS)
    a2 = a.twinx()
    a2.plot(list(x), sel["n_max"], "o--", color="tab:blue")
    a2.set_ylabel("N_max (dashed)")
    a.set_title(f"(a) receive buffer {FIG_A_MB} MB")
    for p in LABELS:
        s = agg[agg["policy"] == p]
        b.errorbar(
            s["window_mb"],
            s["goodput"],
            yerr=s["goodput_ci"].fillna(0),
            marker="o",
            capsize=3,
            label=p,
        )
    b.set_xscale("log", base=2)
    b.set_xticks(WINDOWS_MB, [f"{w}" for w in WINDOWS_MB])
    b.set_xlabel("receive buffer (MB)")
    b.set_ylabel("goodput (Mbit/s)")
    b.set_title("(b) goodput against the receive buffer")
    b.legend()
    for ax in (a, b):
        ax.grid(alpha=0.3)
    fig.suptitle(f"ART Fig. 24 setting: {size_mb} MB file, 100 Mbit/s, 300 ms RTT, 5 % loss")
    common.save_figure(fig, figs / "art-fig24.png", dpi=120)


if __name__ == "__main__":
    main()
