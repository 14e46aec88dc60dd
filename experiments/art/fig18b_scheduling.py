"""ART Fig. 18(b): what the Replica Scheduler saves under burst loss. ART's replicas spread over
the escape space (scheduler on) against the same replicas sent back to back (`scheduler=off`),
for small files over Gilbert-Elliott burst loss; the paper's claim is that more replicas are
sent without scheduling, because a burst takes every back-to-back replica of a loss.

    python3 experiments/art/fig18b_scheduling.py [--quick] [--seeds N] [--jobs N]

The paper runs ART with a fixed redundancy level: "ART-fix" (with the scheduler) and "ART-norand"
(without) are `art:fixed=3` and `art:fixed=3,scheduler=off` here (R = 3 sends per round, the
paper gives no level), and adaptive ART runs both ways too. 200 KB files, one every 100 ms,
on ART's Mahimahi path (100 Mbit/s, 30 ms RTT), Gilbert-Elliott loss whose state steps once
per 1 ms (mean loss 5 %, bursts of 2 ms and 8 ms, as experiments/beyond/pareto.py): with the
state stepping per packet instead, a PTO chain of a few packets stays in the bad state for
seconds (a run of this script that way had one connection time out). Raw rows in
experiments/results/art-fig18b/, the table in experiments/figures/art-fig18b.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

POLICIES = [
    {"label": "ART-fix (R=3, scheduler on)", "name": "art", "params": "fixed=3"},
    {"label": "ART-norand (R=3, scheduler=off)", "name": "art", "params": "fixed=3,scheduler=off"},
    {"label": "ART (adaptive, scheduler on)", "name": "art"},
    {"label": "ART (adaptive, scheduler=off)", "name": "art", "params": "scheduler=off"},
]
# netem gemodel p r 1-h, stepping once per 1 ms slot (`crn`): mean loss p / (p + r) = 5 %, mean
# burst 1 / r slots.
BURSTS = {
    "bursts of 2 ms": "crn gemodel 2.632% 50% 100%",
    "bursts of 8 ms": "crn gemodel 0.658% 12.5% 100%",
}
METRICS = ["copies_sent", "redundancy_cost", "n_max", "fct_ms"]


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "20 files, 2 seeds (a smoke run)",
        seeds=10,
        quick_seeds=2,
        jobs=2,
        count_help="seeds per burst length and policy",
    )
    files = 20 if args.quick else 100
    plan = {
        "name": "art-fig18b",
        "seed": 1,
        "repetitions": args.seeds,
        "duration": f"{files // 10 + 30}s",
        "path": {**common.art_path(), "down": {"loss": BURSTS["bursts of 2 ms"]}},
        "app": {"kind": "file", "size": "200KB", "count": files, "interval": "100ms"},
        "transport": {"cc": "bbr"},
        "policy": POLICIES,
        "sweep": {"path.down.loss": list(BURSTS.values())},
    }
    out = common.RESULTS / "art-fig18b"
    rows = common.run(plan, out / "scenario.toml", args)
    incomplete = int(rows["transfers_incomplete"].fillna(0).sum())
    if incomplete:
        sys.exit(f"{incomplete} transfer(s) did not complete; lengthen the runs")
    names = {v: k for k, v in BURSTS.items()}
    rows["burst"] = rows["path.down.loss"].map(names)
    agg = common.aggregate(rows, ["burst", "policy"], METRICS)
    body = common.rows_by(
        agg,
        "burst",
        list(BURSTS),
        [p["label"] for p in POLICIES],
        lambda r: [
            common.pm(r["copies_sent"], r["copies_sent_ci"], digits=0),
            common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], scale=100),
            common.pm(r["n_max"], r["n_max_ci"], digits=2),
            common.pm(r["fct_ms"], r["fct_ms_ci"]),
        ],
    )
    header = ["loss", "policy", "copies sent", "redundancy cost %", "N_max", "mean FCT ms"]
    common.write_table(
        "art-fig18b",
        "ART Fig. 18(b): Replica Scheduler on and off under burst loss",
        common.markdown_table(header, body) + "\n\n(mean ± 95 % CI)\n",
        args,
        per_point=f"{args.seeds} seeds x {files} files of 200 KB",
    )


if __name__ == "__main__":
    main()
