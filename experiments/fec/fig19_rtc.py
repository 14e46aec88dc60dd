"""AutoRec Fig. 19: deadline miss rate against bandwidth cost in a video call for RTX (arq),
AutoRec (three cost settings), WebRTC FEC (2014's and today's) and Hairpin (three settings), at
0.5, 1, 5 and 10 % random loss ((a)-(d)) and on two Mahimahi traces in place of the paper's
((e)-(f)).

    python3 experiments/fec/fig19_rtc.py [--quick] [--seeds N] [--jobs N]

The call: 60 fps, a key frame every 2 s, 100 ms playout deadline, one stream per frame, no
congestion control (`cc = "none"`: the sender keeps the encoder's rate, as Ringmaster does;
the paper's ns-3 WebRTC has GCC). (a)-(d): 4 Mbit/s over 12 Mbit/s, 30 ms RTT. (e): the
T-Mobile LTE driving trace (12.8 Mbit/s mean, the paper's Trace #1 has 11.3) with Trace #1's
14 ms RTT and 10 % loss, 4 Mbit/s; (f): the AT&T LTE 2016 trace (4.6 Mbit/s mean, as Trace #2)
with Trace #2's 38 ms RTT and 2.8 % loss, 2 Mbit/s (no rate adaptation here, so the call is
kept below the trace's mean). Raw rows in experiments/results/fec-fig19/, the table in
experiments/figures/fec-fig19.md, the plot in experiments/figures/fec-fig19.png.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

# Read in place from the shared folder beside the repository.
TRACES = common.REPO.parent / "shared" / "traces" / "mahimahi"
SCHEMES = [{"label": "rtx", "name": "arq"}] + common.AUTOREC_RTC + common.WEBRTC + common.HAIRPIN
LOSSES = ["0.5%", "1%", "5%", "10%"]
# AutoRec §VII, Fig. 19, as stated in the text (percent): (panel, scheme) -> (deadline miss,
# bandwidth cost). "0" where the text says 0 % deadline miss; cost "" where it gives none.
PAPER = {
    ("0.5%", "autorec-hc"): ("0", "≤9.92"),
    ("0.5%", "autorec"): ("0", "≤9.92"),
    ("0.5%", "autorec-lc"): ("0", "≤4.39"),
    ("0.5%", "webrtc-now"): ("0", "≤32.81"),
    ("0.5%", "webrtc14"): ("0", "≤16.16"),
    ("0.5%", "hairpin-hc"): ("0", "<3"),
    ("0.5%", "hairpin"): (">0", "<3"),
    ("0.5%", "hairpin-lc"): (">0", "<3"),
    ("1%", "hairpin-hc"): ("0", "<3"),
    ("1%", "hairpin-lc"): (">0", "<3"),
    ("10%", "autorec-hc"): ("0", "≤46.28"),
    ("10%", "autorec"): (">0", "≤17.23"),
    ("10%", "webrtc-now"): (">0", "<39.38"),
    ("10%", "webrtc14"): (">0", "<12.77"),
    ("10%", "hairpin-hc"): ("0", "≤44.48"),
    ("10%", "hairpin"): ("0", "≤35.48"),
    ("10%", "hairpin-lc"): (">0", "≤10.26"),
    ("trace1", "autorec"): ("0.067", "18.5"),
    ("trace1", "autorec-hc"): ("0.051", "55.9"),
    ("trace1", "hairpin-lc"): ("0.045", "0.27"),
    ("trace1", "webrtc-now"): ("0.073", "14.7"),
    ("trace2", "hairpin-hc"): ("0.35", "1.85"),
    ("trace2", "autorec-lc"): ("0.33", "4.56"),
}


def call(bitrate: str) -> dict[str, object]:
    return {"kind": "rtc", "bitrate": bitrate, "fps": 60, "deadline": "100ms"}


def plans(duration: str, seeds: int) -> dict[str, dict[str, object]]:
    base = {"seed": 1, "repetitions": seeds, "duration": duration, "transport": {"cc": "none"}}
    out = {}
    for loss in LOSSES:
        out[loss] = dict(
            base,
            name=f"fec-fig19-{loss.rstrip('%')}",
            path={
                "rtt": "30ms",
                "rate": "12Mbps",
                "queue": "droptail packets=100",
                "down": {"loss": f"bernoulli {loss}"},
            },
            app=call("4Mbps"),
        )
    for panel, trace, rtt, loss, bitrate in [
        ("trace1", "TMobile-LTE-driving.down", "14ms", "10%", "4Mbps"),
        ("trace2", "ATT-LTE-driving-2016.down", "38ms", "2.8%", "2Mbps"),
    ]:
        out[panel] = dict(
            base,
            name=f"fec-fig19-{panel}",
            path={
                "rtt": rtt,
                "queue": "droptail packets=100",
                "down": {"trace": str(TRACES / trace), "loss": f"bernoulli {loss}"},
                "up": {"rate": "12Mbps"},
            },
            app=call(bitrate),
        )
    return out


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "2 seeds of 10 s (a smoke run)",
        seeds=5,
        quick_seeds=2,
        jobs=1,
        count_help="seeds per panel and scheme",
    )
    figs = common.figure_dir(args.quick)
    duration = "10s" if args.quick else "60s"
    out = common.RESULTS / ("fec-fig19-quick" if args.quick else "fec-fig19")
    parts = []
    for panel, plan in plans(duration, args.seeds).items():
        df = common.run_schemes(plan, SCHEMES, out / panel.rstrip("%"), args)
        df["panel"] = panel
        parts.append(df)
    rows = common.pd.concat(parts, ignore_index=True)
    metrics = ["deadline_miss_rate", "bandwidth_cost", "video_frozen_fraction", "loss_rate"]
    means = rows.groupby(["panel", "policy", "dual_side"], sort=False)[metrics].mean().reset_index()
    table = []
    for r in means.itertuples():
        paper = PAPER.get((r.panel, r.policy), ("", ""))
        table.append(
            [
                r.panel,
                r.policy + (" (dual-side)" if r.dual_side else ""),
                f"{r.loss_rate * 100:.2f}",
                f"{r.deadline_miss_rate * 100:.3f}",
                f"{r.bandwidth_cost * 100:.2f}",
                f"{r.video_frozen_fraction * 100:.2f}",
                paper[0],
                paper[1],
            ]
        )
    header = [
        "panel",
        "scheme",
        "loss %",
        "deadline miss %",
        "bw cost %",
        "video frozen %",
        "paper: miss %",
        "paper: bw cost %",
    ]
    md = common.markdown_table(header, table)
    wall = common.wall_seconds(out)
    md += (
        f"\n{args.seeds} seeds x {duration} per panel and scheme; wall time {wall:.0f} s with "
        f"--jobs {args.jobs} on {common.machine()}.\n"
    )
    common.save_text(figs / "fec-fig19.md", md)
    print(md)
    titles = {
        **{loss: f"({'abcd'[i]}) {loss} loss" for i, loss in enumerate(LOSSES)},
        "trace1": "(e) T-Mobile LTE, 10 %",
        "trace2": "(f) AT&T LTE, 2.8 %",
    }
    common.cost_plot(
        means,
        [*LOSSES, "trace1", "trace2"],
        "panel",
        "deadline_miss_rate",
        "deadline miss rate (%)",
        titles,
        figs / "fec-fig19.png",
    )


if __name__ == "__main__":
    main()
