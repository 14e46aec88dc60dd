"""ART Fig. 26: FCT optimisation ratio (FCT_quic - FCT_art) / FCT_quic of an RPC fleet on 4G-like
paths, by loss rate (a) and by FCT percentile (b), and the 3 MB file case.

    python3 experiments/art/fig26_rpc_fleet.py [--quick] [--seeds N] [--jobs N] [--replot]

The paper's Fig. 26 is an A/B test on 3.3 million RPC connections of a 4G network and 26,000
downloads of about 3 MB, measured by FCT; it names neither the RPC sizes nor the paths. The
fleet here: every connection is a Mahimahi LTE trace (ATT, TMobile or Verizon, the trace's
downlink rate both ways), a base RTT of 40, 80 or 150 ms, and one loss rate of a grid of 1-30 %
on the data direction; the RPC connection makes 100 requests of 200 bytes, each answered by a
16 KB response, with 10 ms of think time (sizes assumed: a mobile API call); the file case is one
3 MB download per connection. Both policies run every connection on the same seed with `crn
bernoulli` loss, so the A/B pairs are the same connection. BBR, a 200-packet queue.

(a) plots, per loss rate, the ratio of the fleet's mean FCTs; (b) the ratio at each percentile of
the per-connection mean FCT. Raw rows in experiments/results/art-fig26/, the plot in
experiments/figures/art-fig26.png and the table in experiments/figures/art-fig26.md.
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
    {"label": "ART", "name": "art"},
]
TRACES = common.REPO.parent / "shared" / "traces" / "mahimahi"
LTE = ["ATT-LTE-driving.down", "TMobile-LTE-driving.down", "Verizon-LTE-short.down"]
RTTS = ["40ms", "80ms", "150ms"]
LOSSES = ["1%", "2%", "4%", "6%", "8%", "10%", "15%", "20%", "30%"]
PERCENTILES = [10, 25, 50, 75, 90, 95, 99]
# ART §7.7: RPC up to about 34 % at the highest loss rates; 3 MB files about 2 % overall.
PAPER_RPC_MAX = 34
PAPER_FILE = 2


def plan(name: str, app: dict, losses: list[str], seeds: int, duration: str) -> dict:
    return {
        "name": name,
        "seed": 1,
        "repetitions": seeds,
        "duration": duration,
        "path": {"rtt": "80ms", "queue": "droptail packets=200"},
        "app": app,
        "transport": {"cc": "bbr"},
        "policy": POLICIES,
        "sweep": {
            "path.trace": [str(TRACES / t) for t in LTE],
            "path.rtt": RTTS,
            "path.down.loss": [f"crn bernoulli {p}" for p in losses],
        },
    }


def ratio(quic: float, art: float) -> float:
    return 100 * (quic - art) / quic


def paired(rows: pd.DataFrame) -> pd.DataFrame:
    """One row per connection (sweep point and seed): mean FCT under each policy."""
    rows = rows.assign(loss=rows["path.down.loss"].str.split().str[-1])
    wide = rows.pivot_table(
        index=["scenario", "seed", "loss"], columns="policy", values="fct_ms"
    ).reset_index()
    return wide.rename(columns={"QUIC (arq)": "quic", "ART": "art"})


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "2 seeds, 3 loss rates, 20 requests (a smoke run)",
        seeds=8,
        quick_seeds=2,
        jobs=0,
        replot=True,
    )
    losses = ["1%", "6%", "15%"] if args.quick else LOSSES
    requests = 20 if args.quick else 100
    out = common.RESULTS / "art-fig26"
    rpc_app = {
        "kind": "rpc",
        "request": "200B",
        "response": "16KB",
        "count": requests,
        "think": "10ms",
    }
    rpc = paired(
        common.run(
            plan("art-fig26-rpc", rpc_app, losses, args.seeds, "120s"),
            out / "rpc" / "scenario.toml",
            args,
        )
    )
    file_losses = ["1%", "4%", "10%"]
    file_rows = common.run(
        plan(
            "art-fig26-file",
            {"kind": "file", "size": "3MB", "count": 1},
            file_losses,
            args.seeds,
            "120s",
        ),
        out / "file" / "scenario.toml",
        args,
    )
    files = paired(file_rows)
    # What the size of the effects depends on. The RPC response size (the paper gives none), at
    # the two highest loss rates on one RTT; and the 3 MB files on a 100 Mbit/s constant-rate
    # link instead of the LTE traces (does ART's cost in capacity set the file's FCT?).
    sizes = ["4KB", "16KB", "64KB"]
    by_size_plan = plan("art-fig26-rpc-size", rpc_app, losses[-2:], args.seeds, "120s")
    by_size_plan["sweep"] = {
        "app.response": sizes,
        "path.trace": by_size_plan["sweep"]["path.trace"],
        "path.down.loss": by_size_plan["sweep"]["path.down.loss"],
    }
    size_rows_raw = common.run(by_size_plan, out / "rpc-size" / "scenario.toml", args)
    by_size = paired(size_rows_raw).merge(
        size_rows_raw[["scenario", "app.response"]].drop_duplicates(), on="scenario"
    )
    wide_plan = plan(
        "art-fig26-file-100mbps",
        {"kind": "file", "size": "3MB", "count": 1},
        file_losses,
        args.seeds,
        "120s",
    )
    wide_plan["path"]["rate"] = "100Mbps"
    wide_plan["sweep"].pop("path.trace")
    wide_rows = common.run(wide_plan, out / "file-100mbps" / "scenario.toml", args)
    wide = paired(wide_rows)
    cost = {
        name: df.groupby("policy")[["redundancy_cost", "goodput_mbps"]].mean()
        for name, df in (("LTE traces", file_rows), ("100 Mbit/s", wide_rows))
    }

    for what, df in (("rpc", rpc), ("file", files), ("rpc by size", by_size), ("file 100", wide)):
        missing = df[["quic", "art"]].isna().any(axis=1).sum()
        if missing:
            sys.exit(f"{missing} {what} connections lack an FCT (transfers incomplete): see {out}")

    by_loss = rpc.groupby("loss", sort=False)[["quic", "art"]].mean()
    by_loss = by_loss.loc[losses]
    by_loss["ratio"] = [ratio(q, a) for q, a in zip(by_loss["quic"], by_loss["art"])]
    pct = pd.DataFrame(
        {
            "quic": [np.percentile(rpc["quic"], p) for p in PERCENTILES],
            "art": [np.percentile(rpc["art"], p) for p in PERCENTILES],
        },
        index=PERCENTILES,
    )
    pct["ratio"] = [ratio(q, a) for q, a in zip(pct["quic"], pct["art"])]
    # Per connection, paired: the share of connections ART made faster.
    faster = 100 * (rpc["art"] < rpc["quic"]).mean()
    file_mean = ratio(files["quic"].mean(), files["art"].mean())
    file_by_loss = files.groupby("loss", sort=False)[["quic", "art"]].mean().loc[file_losses]

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    x = [float(v.rstrip("%")) for v in losses]
    ax1.plot(x, by_loss["ratio"], "o-", label="recoup (RPC fleet)")
    ax1.axhline(0, color="gray", lw=0.8)
    ax1.set_xlabel("loss rate (%)")
    ax1.set_ylabel("FCT optimisation ratio (%)")
    ax1.set_title("(a) by loss rate")
    ax1.legend()
    ax2.plot(PERCENTILES, pct["quic"], "o-", label="QUIC (arq)")
    ax2.plot(PERCENTILES, pct["art"], "s-", label="ART")
    ax2.set_xlabel("percentile of per-connection mean FCT")
    ax2.set_ylabel("FCT (ms)")
    ax2.set_title("(b) by percentile")
    ax2.legend()
    common.save_figure(fig, common.figure_path("art-fig26", args.quick), 120)

    table_a = common.markdown_table(
        ["loss", "QUIC mean FCT ms", "ART mean FCT ms", "optimisation ratio"],
        [[k, f"{r.quic:.1f}", f"{r.art:.1f}", f"{r.ratio:+.1f} %"] for k, r in by_loss.iterrows()],
    )
    table_b = common.markdown_table(
        ["percentile", "QUIC FCT ms", "ART FCT ms", "optimisation ratio"],
        [
            [f"p{k}", f"{r.quic:.1f}", f"{r.art:.1f}", f"{r.ratio:+.1f} %"]
            for k, r in pct.iterrows()
        ],
    )
    table_f = common.markdown_table(
        ["loss", "QUIC mean FCT ms", "ART mean FCT ms", "optimisation ratio"],
        [
            [k, f"{r.quic:.0f}", f"{r.art:.0f}", f"{ratio(r.quic, r.art):+.1f} %"]
            for k, r in file_by_loss.iterrows()
        ],
    )
    size_rows = []
    for (size, loss), g in by_size.groupby(["app.response", "loss"], sort=False):
        size_rows.append([size, loss, f"{ratio(g['quic'].mean(), g['art'].mean()):+.1f} %"])
    size_rows.sort(key=lambda r: (sizes.index(r[0]), float(r[1].rstrip("%"))))
    table_size = common.markdown_table(["response", "loss", "optimisation ratio"], size_rows)
    wide_by_loss = wide.groupby("loss", sort=False)[["quic", "art"]].mean().loc[file_losses]
    table_cause = common.markdown_table(
        ["link", "loss", "optimisation ratio", "ART redundancy cost", "goodput QUIC / ART Mbit/s"],
        [
            [
                link,
                k,
                f"{ratio(r.quic, r.art):+.1f} %",
                f"{cost[link].loc['ART', 'redundancy_cost']:.3f}" if k == file_losses[0] else "",
                (
                    f"{cost[link].loc['QUIC (arq)', 'goodput_mbps']:.2f} / "
                    f"{cost[link].loc['ART', 'goodput_mbps']:.2f}"
                )
                if k == file_losses[0]
                else "",
            ]
            for link, table in (("LTE traces", file_by_loss), ("100 Mbit/s", wide_by_loss))
            for k, r in table.iterrows()
        ],
    )
    body = (
        f"RPC fleet, {len(rpc)} connections of {requests} requests (16 KB responses), "
        f"paired by seed. Paper: up to about {PAPER_RPC_MAX} % at the highest loss rates.\n\n"
        f"(a) by loss rate\n\n{table_a}\n\n(b) by percentile of per-connection mean FCT\n\n"
        f"{table_b}\n\nART faster on {faster:.0f} % of connections.\n\n"
        f"3 MB files, {len(files)} connections: optimisation ratio of the mean FCT "
        f"{file_mean:+.1f} % (paper: about {PAPER_FILE} %).\n\n{table_f}\n\n"
        f"RPC by response size (the paper gives none), 80 ms RTT:\n\n{table_size}\n\n"
        f"3 MB files on the LTE traces and on a 100 Mbit/s constant-rate link (redundancy "
        f"cost and goodput: means over all loss rates):\n\n{table_cause}\n"
    )
    common.write_table(
        "art-fig26",
        "ART Fig. 26: FCT optimisation ratio of an RPC fleet and 3 MB files",
        body,
        args,
        per_point=f"{args.seeds} seeds (connections)",
    )


if __name__ == "__main__":
    main()
