"""Where AutoRec's recovery latency of multi-retransmitted data goes (AutoRec Fig. 18's "< 30 ms
for RTT 60-200 ms"): the testbed path and 4 Mbit/s stream of Fig. 18 at several RTTs, both
off-mode rules, every run traced in qlog.

For each lost range whose first retransmission was lost too (the data Fig. 18 reports), the
sender's qlog gives its loss detection, its sends (first transmission, ARQ retransmissions,
AutoRec's copies) and which of them the receiver acknowledged. Its recovery latency (detection to
the send of the earliest acknowledged copy) splits into:
  A  detection -> first retransmission sent (the retransmission waiting for the window),
  B  first retransmission -> first copy sent (waiting for off-mode or T_thres, and the window),
  C  first copy -> the send that arrived (later copies, or another ARQ round when every copy
     of the round was lost).
The table gives the mean of each part over all such ranges pooled over seeds, the share recovered
by their first copy, the share that needed another ARQ round and what those contribute to the
mean, and the share of first copies that left after new data had been sent in between (on-mode:
the copy waited for T_thres rather than for off-mode).
"""

from __future__ import annotations

import bisect
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
from compare import AUTOREC_ONCE, AUTOREC_PARAMS  # noqa: E402

FIG = "fig18_breakdown"
RTTS = ["60ms", "100ms", "140ms", "200ms"]


def records(path: Path):
    """The events the breakdown needs from a JSON-SEQ qlog, one dict per line."""
    wanted = ('"transport:packet_sent"', '"recovery:packet_lost"', '"transport:packet_received"')
    with path.open() as f:
        for line in f:
            if any(w in line for w in wanted):
                yield json.loads(line.lstrip("\x1e"))


def multi_ranges(path: Path) -> list[dict[str, float]]:
    """One row per lost range of a sender qlog whose first retransmission was lost."""
    sends: dict[int, tuple[float, str]] = {}
    by_range: dict[tuple[int, int], list[int]] = defaultdict(list)
    lost: dict[int, float] = {}
    ack_ranges: list[tuple[int, int]] = []
    for e in records(path):
        d = e["data"]
        if d["header"]["packet_type"] != "1RTT":
            continue
        pn = d["header"]["packet_number"]
        if e["name"] == "transport:packet_sent":
            frames = [f for f in d["frames"] if f["frame_type"] == "stream"]
            if frames:
                sends[pn] = (e["time"], d.get("recoup", {}).get("kind", "new"))
                for f in frames:
                    by_range[(f["stream_id"], f["offset"])].append(pn)
        elif e["name"] == "recovery:packet_lost":
            lost.setdefault(pn, e["time"])
        else:
            for f in d["frames"]:
                if f["frame_type"] == "ack":
                    ack_ranges.extend((a, b) for a, b in f["acked_ranges"])
    # Every packet number any ACK covered: the ranges merged, then a binary search per packet.
    merged: list[list[int]] = []
    for a, b in sorted(ack_ranges):
        if merged and a <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    starts = [m[0] for m in merged]

    def was_acked(pn: int) -> bool:
        i = bisect.bisect_right(starts, pn) - 1
        return i >= 0 and pn <= merged[i][1]

    acked = {p for p in sends if was_acked(p)}
    rows = []
    for pns in by_range.values():
        pns.sort()
        first = pns[0]
        if sends[first][1] != "new" or first not in lost:
            continue
        rtx = [p for p in pns if sends[p][1] == "retransmission"]
        got = [p for p in pns[1:] if p in acked]
        if not rtx or rtx[0] in acked or not got:
            continue
        detected, r1 = lost[first], sends[rtx[0]][0]
        recovered_by = min(got, key=lambda p: sends[p][0])
        rec = sends[recovered_by][0]
        copies = [p for p in pns if sends[p][1] == "copy"]
        c1 = min(sends[copies[0]][0], rec) if copies else rec
        rows.append(
            {
                "latency": rec - detected,
                "a": r1 - detected,
                "b": c1 - r1,
                "c": rec - c1,
                "by_first_copy": float(bool(copies) and recovered_by == copies[0]),
                "another_round": float(sends[recovered_by][1] == "retransmission"),
                "first_copy_on_mode": float(
                    bool(copies)
                    and any(sends.get(p, (0, ""))[1] == "new" for p in range(rtx[0] + 1, copies[0]))
                ),
            }
        )
    return rows


def main() -> None:
    # qlogs are large (about 20 MB per 60 s run); 3 seeds per point are enough for the split.
    args = common.parse_args(
        __doc__, "smoke version: 1 seed of 10 s", seeds=3, quick_seeds=1, jobs=1, duration=True
    )
    common.provenance()
    policies = [{"name": "autorec", "params": AUTOREC_PARAMS}, AUTOREC_ONCE]
    plan = common.autorec_plan(FIG, "4Mbps", policies, args, {"path.rtt": RTTS})
    out = common.RESULTS / FIG / "runs"
    if not args.replot:
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        (out / "plan.toml").write_text(common.to_toml(plan))
        cmd = [str(common.recoup_binary()), "run", str(out / "plan.toml"), "--out", str(out)]
        cmd += ["--jobs", str(args.jobs), "--qlog"]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    qlogs = out / "qlog"
    if qlogs.exists():
        # Parsed once into breakdown.json, then dropped (gigabytes for the full run).
        pooled = defaultdict(list)
        for q in sorted(qlogs.glob("*-server.sqlog")):
            # <name>_path.rtt=60ms_-<policy>-<seed>-server.sqlog
            rtt = q.name.split("path.rtt=")[1].split("_")[0]
            policy = q.name.split("_-", 1)[1].rsplit("-", 2)[0]
            pooled[f"{policy}|{rtt}"].extend(multi_ranges(q))
        (out / "breakdown.json").write_text(json.dumps(pooled))
        shutil.rmtree(qlogs)
    pooled = json.loads((out / "breakdown.json").read_text())
    rows = []
    for key, rs in sorted(
        pooled.items(), key=lambda kv: (kv[0].split("|")[0], float(kv[0].split("|")[1][:-2]))
    ):
        policy, rtt = key.split("|")
        n = len(rs)

        def mean(k: str, rs=rs) -> float:
            return sum(r[k] for r in rs) / len(rs) if rs else float("nan")

        # Over all ranges: what the ranges that needed another ARQ round add to the mean.
        rounds = sum(r["latency"] for r in rs if r["another_round"]) / max(n, 1)
        rows.append(
            [
                policy,
                rtt,
                n,
                mean("latency"),
                mean("a"),
                mean("b"),
                mean("c"),
                100 * mean("by_first_copy"),
                100 * mean("another_round"),
                rounds,
                100 * mean("first_copy_on_mode"),
            ]
        )
    body = (
        "Multi-retransmitted lost ranges pooled over seeds; latency = A + B + C (ms, means over "
        "the ranges); 'ARQ-round ms' is what ranges recovered only by another ARQ round add to "
        "the mean latency.\n\n"
    )
    body += common.markdown_table(
        [
            "policy",
            "RTT",
            "ranges",
            "latency ms",
            "A: to retransmission",
            "B: to first copy",
            "C: after first copy",
            "first copy arrived %",
            "another ARQ round %",
            "ARQ-round ms",
            "first copy after new data %",
        ],
        rows,
    )
    title = "Where AutoRec's multi-retransmission recovery latency goes (Fig. 18 setup)"
    common.save_text(
        common.figure_path(FIG, args.quick, "md"),
        f"## {title}\n\n{body}\n{args.seeds} seeds x {args.duration} per point, "
        f"--jobs {args.jobs} on {common.machine()}.\n",
    )


if __name__ == "__main__":
    main()
