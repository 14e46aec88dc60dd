"""LADR Table 2: packet loss, lossy frames, loss-affected frames, frames over 100 ms and frame
delay (mean / p90 over sessions) for Default, +LBBC, +LBBC+RRL and full LADR.

    python3 experiments/ladr/table2.py [--quick] [--seeds N] [--jobs N] [--setting S]

The fleet: N cloud-gaming sessions whose base RTTs are drawn from a log-normal fitted to LADR
§5 (median 10 ms, 90th percentile 20 ms: below 10 ms for 50 % and below 20 ms for 90 % of
sessions), one seed each, the same sessions for every row. Each session: 60 fps, the encoder
following the controller between 1 and 30 Mbit/s (start 10), a 20 Mbit/s bottleneck with a
shallow buffer (5 ms of traffic, 8 packets: LADR §2.4 finds buffers "as shallow as several
milliseconds worth of traffic"), 0.1 % random loss (the Default row's average loss in Table 2 is
0.122 %), RACK-TLP loss detection (LADR §2.5), Copa as the delay-based controller (Pudica's
paper is not among ours). Rows:
- Default: Copa sets the rate, plain retransmission (arq);
- +LBBC: min(B_l, B_d) (§3.2);
- +LBBC+RRL: and the reactive rate limit with the pending-data limit (§3.3);
- LADR: and opportunistic FEC (§3.4, `[transport] fec = "ladr"`, dual-side).
Raw rows in experiments/results/ladr-table2/, the table in experiments/figures/ladr-table2.md,
the frame-delay breakdown in experiments/figures/ladr-table2.png.

--setting picks the bottleneck (SETTINGS; LADR §2.4 names shallow and deep buffers, §2 wired and
Wi-Fi users): `shallow` (the default, above), `deep` (a 100 ms buffer, 185 packets, same loss)
or `wifi` (the shallow buffer with bursty Gilbert-Elliott loss in place of the random loss).
Other settings write to ladr-table2-<setting>.{md,png} and results/ladr-table2-<setting>/.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

# Table 2 (average / 90th percentile over sessions): packet loss %, lossy frame %,
# loss-affected frame %, >100 ms frame %, average frame delay ms.
PAPER = {
    "Default": [(0.122, 0.178), (0.519, 0.477), (0.823, 0.724), (0.192, 0.510), (20.61, 37.24)],
    "+LBBC": [(0.062, 0.142), (0.485, 0.372), (0.658, 0.641), (0.185, 0.470), (20.21, 37.23)],
    "+LBBC+RRL": [
        (0.039, 0.120),
        (0.327, 0.316),
        (0.452, 0.495),
        (0.143, 0.452),
        (20.08, 35.81),
    ],
    "LADR": [(0.049, 0.320), (0.151, 0.260), (0.233, 0.412), (0.115, 0.426), (19.97, 34.61)],
}
METRICS = [
    ("loss_rate", 100.0, "packet loss %"),
    ("lossy_frame_rate", 100.0, "lossy frame %"),
    ("loss_affected_frame_rate", 100.0, "loss-affected frame %"),
    ("frames_over_deadline_rate", 100.0, ">100 ms frame %"),
    ("frame_delay_ms", 1.0, "frame delay ms"),
]
ROWS = ["Default", "+LBBC", "+LBBC+RRL", "LADR"]

# The bottleneck per setting: its buffer and the down path's random loss. 20 Mbit/s in each.
# - shallow: 8 packets (~5 ms of traffic; LADR §2.4: "as shallow as several milliseconds");
# - deep: 100 ms of traffic (20 Mbit/s x 100 ms / 1350-byte packets = 185 packets);
# - wifi: Wi-Fi-like bursty loss, our assumption (LADR gives no loss model): Gilbert-Elliott
#   with p = 0.1 %, r = 20 % and half the packets lost in the bad state, 0.25 % on average in
#   bursts of 5 packets (LADR §2.3 measures 0.32 % average loss for Wi-Fi users, 0.24 % wired).
SETTINGS = {
    "shallow": ("droptail packets=8", "bernoulli 0.1%"),
    "deep": ("droptail packets=185", "bernoulli 0.1%"),
    "wifi": ("droptail packets=8", "gemodel 0.1% 20% 50%"),
}


def fleet_rtts(n: int) -> list[str]:
    """n base RTTs at evenly spaced quantiles of the log-normal with median 10 ms and p90 20 ms
    (deterministic: the same fleet every run)."""
    from statistics import NormalDist

    sigma = math.log(2.0) / NormalDist().inv_cdf(0.9)
    rtts = []
    for i in range(n):
        z = NormalDist().inv_cdf((i + 0.5) / n)
        rtts.append(f"{max(1.0, 10.0 * math.exp(sigma * z)):.1f}ms")
    return rtts


def plan(row: str, rtts: list[str], duration: str, setting: str = "shallow") -> dict[str, object]:
    app: dict[str, object] = {"kind": "gaming", "bitrate": "10Mbps", "fps": 60}
    transport: dict[str, object] = {"cc": "copa", "loss_detection": "rack-tlp"}
    policy = "arq"
    if row != "Default":
        app["loss_controller"] = "lbbc"
    if row in ("+LBBC+RRL", "LADR"):
        app["pending_limit"] = True
        policy = "ladr-rrl"
    if row == "LADR":
        transport["fec"] = "ladr"
    queue, loss = SETTINGS[setting]
    return {
        "name": "ladr-table2-" + row.strip("+").replace("+", "-").lower(),
        "seed": 1,
        "repetitions": 1,
        "duration": duration,
        "path": {
            "rate": "20Mbps",
            "queue": queue,
            "down": {"loss": loss},
        },
        "app": app,
        "transport": transport,
        "policy": [{"label": row, "name": policy}],
        "sweep": {"path.rtt": rtts},
    }


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "16 sessions of 10 s (a smoke run)",
        seeds=64,
        quick_seeds=16,
        jobs=2,
        count_help="sessions in the fleet",
        extra=lambda p: p.add_argument(
            "--setting", choices=sorted(SETTINGS), default="shallow", help="the bottleneck"
        ),
    )
    figs = common.figure_dir(args.quick)
    duration = "10s" if args.quick else "30s"
    stem = "ladr-table2" + ("" if args.setting == "shallow" else f"-{args.setting}")
    out = common.RESULTS / (stem + ("-quick" if args.quick else ""))
    rtts = fleet_rtts(args.seeds)
    parts = []
    for row in ROWS:
        scenario = plan(row, rtts, duration, args.setting)
        df = common.run(scenario, out / row.strip("+") / "scenario.toml", args)
        df["row"] = row
        parts.append(df)
    rows = common.pd.concat(parts, ignore_index=True)
    table = []
    for row in ROWS:
        d = rows[rows["row"] == row]
        cells = [row + (" (dual-side)" if row == "LADR" else "")]
        for (col, scale, _), paper in zip(METRICS, PAPER[row]):
            v = d[col].dropna() * scale
            cells.append(f"{v.mean():.3g} / {v.quantile(0.9):.3g}")
            cells.append(f"{paper[0]} / {paper[1]}")
        table.append(cells)
    header = ["row"]
    for _, _, name in METRICS:
        header += [f"ours: {name}", f"paper: {name}"]
    md = common.markdown_table(header, table)
    extra = rows.groupby("row", sort=False)[
        [
            "frame_propagation_ms",
            "frame_queuing_ms",
            "frame_recovery_ms",
            "frame_recovery_lossy_ms",
            "frames_skipped_rate",
            "encoder_bitrate_mbps",
            "lbbc_signals",
            "repair_packets",
            "rate_limited_rate",
            "rate_limit_binding_rate",
        ]
    ].mean()
    md += (
        "\nMeans over sessions (breakdown of the frame delay, ms; skipped frames, and packets"
        " sent under the reactive rate limit and while it bound, fractions):\n\n"
    )
    md += common.markdown_table(
        ["row", *extra.columns],
        [[r, *vals] for r, vals in zip(extra.index, extra.to_numpy().tolist())],
        ".3g",
    )
    wall = common.wall_seconds(out)
    md += (
        f"\nSetting `{args.setting}`: queue `{SETTINGS[args.setting][0]}`, loss"
        f" `{SETTINGS[args.setting][1]}`, 20 Mbit/s.\n"
        f"{args.seeds} sessions x {duration} per row (mean / p90 over sessions); wall time "
        f"{wall:.0f} s with --jobs {args.jobs} on {common.machine()}.\n"
    )
    common.save_text(figs / f"{stem}.md", md)
    print(md)
    breakdown_plot(extra, figs / f"{stem}.png")


def breakdown_plot(means: common.pd.DataFrame, path: Path) -> None:
    """Stacked bars: propagation, queuing and recovery parts of the mean frame delay per row."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.6))
    bottom = [0.0] * len(means)
    for col, label in [
        ("frame_propagation_ms", "propagation (RTT_min)"),
        ("frame_queuing_ms", "queuing (end-packet RTT − RTT_min)"),
        ("frame_recovery_ms", "recovery (t_F − end-packet RTT)"),
    ]:
        vals = means[col].fillna(0).tolist()
        ax.bar(means.index, vals, bottom=bottom, label=label)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax.set_ylabel("mean frame delay (ms)")
    ax.set_title("LADR Table 2 fleet: frame-delay breakdown")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=130)
    plt.close(fig)


if __name__ == "__main__":
    main()
