"""The experiments behind Table 2's verdicts (EXPERIMENTS.md "LADR Table 2"), one at a time:

    python3 experiments/ladr/causes.py pacing [--quick] [--seeds N] [--jobs N]
    python3 experiments/ladr/causes.py rrl    [--quick] [--seeds N] [--jobs N]
    python3 experiments/ladr/causes.py ladr   [--quick] [--seeds N] [--jobs N]

Each runs variants of Table 2's rows on the same fleet (table2.py's sessions and shallow
bottleneck; 32 sessions of 20 s, --quick 8 of 10 s) and writes a table of means over sessions
to experiments/figures/ladr-causes-<experiment>.md.

- pacing: does +LBBC lose more packets than Default because each frame leaves in a burst? Two
  ways a frame can leave faster than the 20 Mbit/s bottleneck drains: the pacer's burst after an
  idle period (10 packets back to back) and Copa's pacing rate 2·cwnd/RTT. Each is removed alone
  (`transport.pacing_burst = 1`, `transport.max_pacing_rate = "20Mbps"`), then both.
- rrl: how often is the reactive rate limit on, and does +LBBC+RRL's change come from it or
  from the pending-data limit that the row also adds? The row split in two, with the share of
  packets sent under the limit (`rate_limited_rate`) and while it was below Copa's rate
  (`rate_limit_binding_rate`).
- ladr: LADR's two candidate causes, one at a time: (1) frames skipped by the pending-data
  limit because repair packets take pacing budget: LADR without the pending-data limit; (2)
  repair sized from a loss rate dominated by burst overflows: LADR with WebRTC's table flattened
  so that every loss column gives the protection of the smallest non-zero one (1/255, 0.4 %);
  and a third, (3) repair packets leaving with each frame's idle burst: LADR and +LBBC+RRL both
  with a pacing burst of one packet (`transport.pacing_burst = 1`); and a fourth, for LADR's
  frames over 100 ms, (4) the reactive rate limit holding frames back once repair packets share
  its rate: LADR with plain retransmission (`arq`) in place of `ladr-rrl`, with the usual burst
  and with a burst of one.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import common  # noqa: E402
import table2  # noqa: E402

COLUMNS = [
    ("loss_rate", 100.0, "packet loss %"),
    ("lossy_frame_rate", 100.0, "lossy frame %"),
    ("loss_affected_frame_rate", 100.0, "loss-affected %"),
    ("frames_over_deadline_rate", 100.0, ">100 ms %"),
    ("frame_delay_ms", 1.0, "frame delay ms"),
    ("frame_delay_p90_ms", 1.0, "p90 frame delay ms"),
    ("encoder_bitrate_mbps", 1.0, "encoder Mbit/s"),
    ("frames_skipped_rate", 100.0, "skipped %"),
    ("repair_packets", 1.0, "repair packets"),
    ("rate_limited_rate", 100.0, "packets under RRL %"),
    ("rate_limit_binding_rate", 100.0, "RRL binding %"),
    ("viewer_frames_over_deadline_rate", 100.0, ">100 ms % at the viewer"),
    ("viewer_frame_delay_ms", 1.0, "viewer frame delay ms"),
    ("viewer_frame_delay_p90_ms", 1.0, "viewer p90 ms"),
]


# WebRTC's FEC rate table (shared/data, beside the repository): 50 effective-rate rows of 129
# loss columns (loss in Q8, 0..=128), one factor a line (recoup-recovery's webrtc.rs).
TABLE = common.REPO.parent / "shared" / "data" / "webrtc_fec_rate_table.txt"
TABLE_COLS = 129


def flat_table() -> Path:
    """WebRTC's FEC rate table with every loss column >= 1 set to column 1 of its row, written
    to experiments/results/ladr-causes/flat-table.txt."""
    factors = [line.strip() for line in TABLE.read_text().splitlines() if line.strip()]
    if len(factors) % TABLE_COLS:
        raise ValueError(f"{TABLE}: {len(factors)} values, not rows of {TABLE_COLS}")
    lines = []
    for r in range(0, len(factors), TABLE_COLS):
        lines += [factors[r]] + [factors[r + 1]] * (TABLE_COLS - 1)
    out = common.RESULTS / "ladr-causes" / "flat-table.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    return out


def variants(experiment: str) -> list[tuple[str, str, dict]]:
    """(label, Table 2 row it starts from, changes as {"app"|"transport"|"policy": {...}})."""
    if experiment == "pacing":
        return [
            ("Default (Table 2)", "Default", {}),
            ("Default, burst 1, cap 20 Mbit/s", "Default", {"transport": BOTH}),
            ("+LBBC (Table 2)", "+LBBC", {}),
            ("+LBBC, burst 1", "+LBBC", {"transport": {"pacing_burst": 1}}),
            ("+LBBC, cap 20 Mbit/s", "+LBBC", {"transport": {"max_pacing_rate": "20Mbps"}}),
            ("+LBBC, burst 1, cap 20 Mbit/s", "+LBBC", {"transport": BOTH}),
        ]
    if experiment == "rrl":
        return [
            ("+LBBC (Table 2)", "+LBBC", {}),
            ("+LBBC + pending-data limit", "+LBBC", {"app": {"pending_limit": True}}),
            ("+LBBC + RRL", "+LBBC+RRL", {"app": {"pending_limit": False}}),
            ("+LBBC+RRL (Table 2: both)", "+LBBC+RRL", {}),
        ]
    if experiment == "ladr":
        flat = str(flat_table())
        return [
            ("+LBBC+RRL (Table 2)", "+LBBC+RRL", {}),
            ("LADR (Table 2)", "LADR", {}),
            ("(1) LADR without the pending-data limit", "LADR", {"app": {"pending_limit": False}}),
            ("(2) LADR, flat FEC table", "LADR", {"transport": {"fec": f"ladr:table={flat}"}}),
            ("+LBBC+RRL, burst 1", "+LBBC+RRL", {"transport": {"pacing_burst": 1}}),
            ("(3) LADR, burst 1", "LADR", {"transport": {"pacing_burst": 1}}),
            ("(4) LADR without RRL", "LADR", {"policy": {"name": "arq"}}),
            (
                "(4) LADR without RRL, burst 1",
                "LADR",
                {"policy": {"name": "arq"}, "transport": {"pacing_burst": 1}},
            ),
        ]
    raise ValueError(f"unknown experiment {experiment!r}")


BOTH = {"pacing_burst": 1, "max_pacing_rate": "20Mbps"}


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "8 sessions of 10 s (a smoke run)",
        seeds=32,
        quick_seeds=8,
        jobs=2,
        count_help="sessions in the fleet",
        extra=lambda p: p.add_argument("experiment", choices=["pacing", "rrl", "ladr"]),
    )
    duration = "10s" if args.quick else "20s"
    name = f"ladr-causes-{args.experiment}"
    out = common.RESULTS / (name + ("-quick" if args.quick else ""))
    rtts = table2.fleet_rtts(args.seeds)
    table = []
    for i, (label, row, changes) in enumerate(variants(args.experiment)):
        plan = copy.deepcopy(table2.plan(row, rtts, duration))
        for section, values in changes.items():
            # The plan's policy is a list of one entry.
            target = plan[section][0] if section == "policy" else plan[section]
            target.update(values)
        plan["policy"][0]["label"] = f"v{i}"
        df = common.run(plan, out / f"v{i}" / "scenario.toml", args)
        cells = [label]
        for col, scale, _ in COLUMNS:
            v = df[col].dropna() * scale if col in df else common.pd.Series(dtype=float)
            cells.append(v.mean() if len(v) else None)
        table.append(cells)
    md = common.markdown_table(["variant", *(c[2] for c in COLUMNS)], table, ".3g")
    wall = common.wall_seconds(out)
    md += (
        f"\nMeans over {args.seeds} sessions x {duration} (table2.py's fleet, shallow buffer);"
        f" wall time {wall:.0f} s with --jobs {args.jobs} on {common.machine()}.\n"
    )
    common.save_text(common.figure_dir(args.quick) / f"{name}.md", md)
    print(md)


if __name__ == "__main__":
    main()
