"""AutoRec Fig. 20: percent of video frozen against bandwidth cost for AutoRec and Tambur (three
cost settings each) under time-slotted Gilbert-Elliott burst loss: the state changes every
30 ms (good -> bad 20 %, bad -> good 80 %), 1 % loss in the good state, 10-80 % in the bad.

    python3 experiments/fec/fig20_tambur.py [--quick] [--seeds N] [--jobs N]

The call as in experiments/burst/ge_burst.py (4 Mbit/s, 60 fps, 100 ms deadline, 30 ms RTT,
12 Mbit/s) but without congestion control (`cc = "none"`), as Ringmaster sends. Frozen time is
WebRTC's statistics definition (`video_frozen_fraction`); the share of frames missing their
deadline is beside it. Raw rows in experiments/results/fec-fig20/, the table in
experiments/figures/fec-fig20.md, the plot in experiments/figures/fec-fig20.png.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

BAD_LOSS = [10, 20, 40, 60, 80]
SCHEMES = [{"label": "rtx", "name": "arq"}] + common.AUTOREC_RTC + common.TAMBUR
# AutoRec §VII, Fig. 20, as stated in the text (percent): (scheme, bad-state loss) ->
# (video frozen, bandwidth cost).
PAPER = {
    ("autorec", 10): ("0", ""),
    ("autorec-lc", 10): ("0", "4.93"),
    ("autorec-hc", 10): ("0", ""),
    ("tambur", 10): ("0", ""),
    ("tambur-lc", 10): ("0", ">13.81"),
    ("tambur-hc", 10): ("0", ""),
    ("tambur", 60): ("3.88", "~28"),
    ("tambur", 80): ("11.91", "~28"),
    ("autorec-hc", 60): ("3.13", "~53"),
    ("autorec-hc", 80): ("12.38", "~53"),
}


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "2 seeds of 10 s (a smoke run)",
        seeds=5,
        quick_seeds=2,
        jobs=1,
        count_help="seeds per point and scheme",
    )
    figs = common.figure_dir(args.quick)
    duration = "10s" if args.quick else "60s"
    out = common.RESULTS / ("fec-fig20-quick" if args.quick else "fec-fig20")
    parts = []
    for bad in BAD_LOSS:
        plan = {
            "name": f"fec-fig20-{bad}",
            "seed": 1,
            "repetitions": args.seeds,
            "duration": duration,
            "path": {
                "rtt": "30ms",
                "rate": "12Mbps",
                "queue": "droptail packets=100",
                "down": {"loss": f"slotted-gemodel 30ms 20% 80% {bad}% 1%"},
            },
            "app": {"kind": "rtc", "bitrate": "4Mbps", "fps": 60, "deadline": "100ms"},
            "transport": {"cc": "none"},
        }
        df = common.run_schemes(plan, SCHEMES, out / str(bad), args)
        df["bad_loss"] = bad
        parts.append(df)
    rows = common.pd.concat(parts, ignore_index=True)
    rows["fec_recovered_packets"] = rows["fec_recovered_packets"].fillna(0)
    metrics = [
        "video_frozen_fraction",
        "deadline_miss_rate",
        "bandwidth_cost",
        "loss_rate",
        "fec_recovered_packets",
    ]
    means = (
        rows.groupby(["bad_loss", "policy", "dual_side"], sort=False)[metrics].mean().reset_index()
    )
    table = []
    for r in means.itertuples():
        paper = PAPER.get((r.policy, r.bad_loss), ("", ""))
        table.append(
            [
                r.bad_loss,
                r.policy + (" (dual-side)" if r.dual_side else ""),
                f"{r.loss_rate * 100:.1f}",
                f"{r.video_frozen_fraction * 100:.2f}",
                f"{r.deadline_miss_rate * 100:.2f}",
                f"{r.bandwidth_cost * 100:.1f}",
                f"{r.fec_recovered_packets:.0f}",
                paper[0],
                paper[1],
            ]
        )
    header = [
        "bad-state loss %",
        "scheme",
        "loss %",
        "video frozen %",
        "deadline miss %",
        "bw cost %",
        "FEC-recovered packets",
        "paper: frozen %",
        "paper: bw cost %",
    ]
    md = common.markdown_table(header, table)
    wall = common.wall_seconds(out)
    md += (
        f"\n{args.seeds} seeds x {duration} per point and scheme; wall time {wall:.0f} s with "
        f"--jobs {args.jobs} on {common.machine()}.\n"
    )
    common.save_text(figs / "fec-fig20.md", md)
    print(md)
    common.cost_plot(
        means,
        BAD_LOSS,
        "bad_loss",
        "video_frozen_fraction",
        "video frozen (%)",
        {b: f"bad-state loss {b} %" for b in BAD_LOSS},
        figs / "fec-fig20.png",
    )


if __name__ == "__main__":
    main()
