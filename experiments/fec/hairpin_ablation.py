"""Why Hairpin's effect is smaller than AutoRec Fig. 19 reports: an ablation of our Hairpin at
the figure's settings (the video call of fig19_rtc.py, 30 ms RTT, 12 Mbit/s, 100 ms deadline).

    python3 experiments/fec/hairpin_ablation.py [--quick] [--seeds N] [--jobs N]

Each variant changes one reading of Hairpin's model (`hairpin:` parameters, see
crates/recoup-recovery/src/fec_schemes/config.rs):
- rounds: how many rounds are left before the deadline (`arrival`: a round counts if its packets
  can arrive, rtt/2 + k·rtt <= left; `feedback`: as the authors' simulator counts them,
  floor((left - rtt') / rtt') with rtt' = srtt + rttvar);
- max_rounds: the most rounds a plan looks ahead (1: all redundancy in the round being sent);
- cost: the objective's bandwidth term (`packets` per media packet, or the redundant `share` of
  the packets sent, as the authors' simulator and our bandwidth-cost metric count it);
- loss: the loss rate assumed for every round (10 s `mean`, or WebRTC's 1 s `max` filter).
Part (a) runs every variant at 5 and 10 % random loss for the three lambdas; part (b) the two
round counts at 10 % loss over the deadline/RTT ratio (RTT 15, 25, 30, 50 ms). The table goes to
experiments/figures/fec-hairpin-ablation.md, raw rows to experiments/results/fec-hairpin/.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
from fig19_rtc import call  # noqa: E402

LAMBDAS = {"": "1e-4", "-lc": "1e-1", "-hc": "1e-7"}
# Part (a): one change at a time from the `arrival` reading, then the reference's two together.
VARIANTS = {
    "arrival": "rounds=arrival",
    "feedback": "rounds=feedback",
    "max_rounds=1": "rounds=arrival,max_rounds=1",
    "max_rounds=2": "rounds=arrival,max_rounds=2",
    "cost=share": "rounds=arrival,cost=share",
    "loss=max": "rounds=arrival,loss=max",
    "feedback+share": "rounds=feedback,cost=share",
}
# Part (b): the round counts over the deadline/RTT ratio.
RTTS = ["15ms", "25ms", "30ms", "50ms"]


def plan(name: str, rtt: str, loss: str, duration: str, seeds: int) -> dict[str, object]:
    return {
        "name": name,
        "seed": 1,
        "repetitions": seeds,
        "duration": duration,
        "transport": {"cc": "none"},
        "path": {
            "rtt": rtt,
            "rate": "12Mbps",
            "queue": "droptail packets=100",
            "down": {"loss": f"bernoulli {loss}"},
        },
        "app": call("4Mbps"),
    }


def schemes(variants: dict[str, str], lambdas: dict[str, str]) -> list[dict[str, str]]:
    return [
        {"label": f"{v}{suffix}", "fec": f"hairpin:lambda={lam},{params}"}
        for suffix, lam in lambdas.items()
        for v, params in variants.items()
    ]


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "2 seeds of 10 s (a smoke run)",
        seeds=3,
        quick_seeds=2,
        jobs=1,
        count_help="seeds per point",
    )
    duration = "10s" if args.quick else "60s"
    out = common.RESULTS / ("fec-hairpin-quick" if args.quick else "fec-hairpin")
    parts = []
    for loss in ["5%", "10%"]:
        p = plan(f"hairpin-{loss.rstrip('%')}", "30ms", loss, duration, args.seeds)
        runs = [{"label": "rtx", "name": "arq"}, *schemes(VARIANTS, LAMBDAS)]
        df = common.run_schemes(p, runs, out / f"a-{loss.rstrip('%')}", args)
        df["part"], df["rtt"], df["loss"] = "a", "30ms", loss
        parts.append(df)
    rounds = {k: VARIANTS[k] for k in ["arrival", "feedback"]}
    for rtt in RTTS:
        p = plan(f"hairpin-rtt{rtt}", rtt, "10%", duration, args.seeds)
        runs = [{"label": "rtx", "name": "arq"}, *schemes(rounds, {"": LAMBDAS[""]})]
        df = common.run_schemes(p, runs, out / f"b-{rtt}", args)
        df["part"], df["rtt"], df["loss"] = "b", rtt, "10%"
        parts.append(df)
    rows = common.pd.concat(parts, ignore_index=True)
    metrics = ["deadline_miss_rate", "bandwidth_cost"]
    agg = common.aggregate(rows, ["part", "rtt", "loss", "policy"], metrics)
    table = [
        [
            r["part"],
            r["rtt"],
            r["loss"],
            r["policy"],
            common.pm(r["deadline_miss_rate"], r["deadline_miss_rate_ci"], 100, 3),
            common.pm(r["bandwidth_cost"], r["bandwidth_cost_ci"], 100, 1),
        ]
        for _, r in agg.iterrows()
    ]
    header = ["part", "RTT", "loss", "variant", "deadline miss %", "bw cost %"]
    md = common.markdown_table(header, table)
    wall = common.wall_seconds(out)
    md += (
        f"\nMeans ± 95 % CI over {args.seeds} seeds x {duration}; 100 ms deadline, 12 Mbit/s, "
        f"4 Mbit/s call at 60 fps; wall time {wall:.0f} s with --jobs {args.jobs} on "
        f"{common.machine()}.\n"
    )
    common.save_text(common.figure_path("fec-hairpin-ablation", args.quick, "md"), md)
    print(md)


if __name__ == "__main__":
    main()
