"""AutoRec Figs. 21-22 (§VII-B) and TOO Fig. 3 (§3) as a simulated deployment fleet: live
streams whose bitrate, RTT and loss are drawn from scenarios/fleet/deployment.toml (fitted to the
papers' measurement numbers; the file cites each), each running arq, autorec (deployment
parameters: alpha 200 ms, beta 50 %, gamma 50 %) and too (Theta 50 ms, n 4) on its own seed.

    python3 experiments/fleet/deployment.py [--quick] [--streams N] [--jobs N] [--replot]
                                            [--cc NAME]

--quick runs 200 streams. Raw results in experiments/results/fleet/ (runs.csv, streams.csv,
fleet.csv, cdf.csv; the CPU time in cpu_seconds.txt), the CDF plot in
experiments/figures/fleet.png and the tables (papers' values beside ours) in
experiments/figures/fleet.md. `--cc bbr3` runs the same fleet under another congestion
controller than the file's BBRv1, into fleet-bbr3/ and fleet-bbr3.md.
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

SCENARIO = common.REPO / "scenarios" / "fleet" / "deployment.toml"
POLICIES = ["arq", "autorec", "too"]
SCENARIO_DURATION = "100 s"

# (label, our metric, scale, statistic, paper's baseline, paper's policy, the sentence's source)
# "mean" and "p95" are over streams of each stream's value, as the papers' CDFs are.
AUTOREC = [
    ("recovery latency, mean (ms)", "recovery_latency_multi_ms", 1, "mean", 231.2, 194.6),
    ("recovery latency, p95 (ms)", "recovery_latency_multi_ms", 1, "p95", None, None),
    ("recovery deterioration rate, mean (%)", "deterioration_rate", 100, "mean", 23.0, 22.6),
    ("redundancy cost, mean (%)", "redundancy_cost", 100, "mean", 0.0, 0.47),
    ("goodput reduction, mean (%)", "goodput_reduction", 100, "mean", 0.0, 0.34),
    ("goodput, p95 (Mbit/s)", "goodput_mbps", 1, "p95", 2.99, 2.91),
    ("freezes per 100 s, mean", "freezes_per_100s", 1, "mean", 0.69, 0.62),
    ("frozen time per 100 s, mean (ms)", "frozen_ms_per_100s", 1, "mean", None, None),
    ("frozen time per 100 s, max (ms)", "frozen_ms_per_100s", 1, "max", 1187.7, 1028.7),
]
# AutoRec §VII-B gives changes where it gives no absolute values: the p95 recovery latency is
# "reduced by 102.2 ms", frozen time per 100 s "by 4.74 %", its maximum "by 159.03 ms (13.39 %)"
# (so 1187.7 -> 1028.7 ms).
AUTOREC_CHANGE = {
    "recovery latency, p95 (ms)": "-102.2 ms",
    "frozen time per 100 s, mean (ms)": "-4.74 %",
}
TOO = [
    ("IRT, mean (ms)", "irt_ms", 1, "mean", 119.3, 100.2),
    ("IRT, p95 (ms)", "irt_ms", 1, "p95", None, None),
    ("goodput, mean (kbit/s)", "goodput_mbps", 1000, "mean", 974.3, 951.1),
    ("retran_ratio added, mean (pp)", "retran_ratio_added", 100, "mean", 0.0, 1.9),
    ("retran_ratio added, p90 (pp)", "retran_ratio_added", 100, "p90", 0.0, 6.5),
]
TOO_CHANGE = {"IRT, p95 (ms)": "-110 ms"}

CDFS = [
    ("recovery_latency_multi_ms", "recovery latency / IRT, 2+ rtx (ms)", 1, "log"),
    ("deterioration_rate", "recovery deterioration rate (%)", 100, "linear"),
    ("redundancy_cost", "redundancy cost (%)", 100, "linear"),
    ("goodput_reduction", "goodput reduction vs arq (%)", 100, "linear"),
    ("retran_ratio_added", "retran_ratio added vs arq (pp)", 100, "linear"),
    ("freezes_per_100s", "freezes per 100 s", 1, "linear"),
    ("frozen_ms_per_100s", "frozen time per 100 s (ms)", 1, "linear"),
    ("goodput_mbps", "goodput (Mbit/s)", 1, "log"),
]


def with_cc(scenario: Path, cc: str, out: Path) -> Path:
    """`scenario` with its congestion controller replaced by `cc`, written beside `out`."""
    text = scenario.read_text()
    line = re.search(r'(?m)^cc = "[^"]*"$', text)
    assert line, f"{scenario} names no cc"
    text = text.replace(line.group(0), f'cc = "{cc}"')
    text = text.replace('"../../../shared/', f'"{scenario.parent}/../../../shared/')
    path = out.with_suffix(".toml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def slotted_bursts(scenario: Path, out: Path) -> Path:
    """The deployment file with its bursty streams replaced by time-slotted Gilbert-Elliott
    streams (the state changes once per 30 ms slot, as in AutoRec Fig. 20, with a mean burst of
    1-4 slots drawn per stream, so a burst lasts 30-120 ms, about an RTT, and a retransmission
    can fall into the burst that lost the original), and 30 s streams: the experiment behind
    the deterioration rate's verdict."""
    text = scenario.read_text()
    bursts = re.search(r'kind = "bursts"\nweight = 0\.4\nburst = \{[^}\n]*\}\n', text)
    headroom = re.search(r"(?m)^headroom = \{.*\}\n", text)
    assert bursts and headroom and 'duration = "100s"' in text, "deployment.toml changed shape"
    text = text.replace(bursts.group(0), 'kind = "gemodel"\nweight = 0.4\nslot = "30ms"\n')
    text = text.replace(
        headroom.group(0),
        headroom.group(0) + 'burst = { dist = "uniform", min = 1.0, max = 4.0 }\n',
    )
    text = text.replace('duration = "100s"', 'duration = "30s"')
    text = text.replace('"../../../shared/', f'"{SCENARIO.parent}/../../../shared/')
    path = out.with_suffix(".toml")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def run_fleet(scenario: Path, streams: int, jobs: int, out: Path) -> None:
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    cmd = [
        str(common.recoup_binary()),
        "population",
        str(scenario),
        "--streams",
        str(streams),
        "--out",
        str(out),
        "--jobs",
        str(jobs),
    ]
    print("$", " ".join(cmd), flush=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run(cmd, check=True)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    (out / "wall_seconds.txt").write_text(f"{wall:.1f}\n")
    (out / "cpu_seconds.txt").write_text(f"{cpu:.1f}\n")
    print(f"{streams} streams: {wall:.1f} s wall, {cpu:.1f} s CPU", flush=True)


def stat(fleet: pd.DataFrame, policy: str, metric: str, statistic: str) -> float:
    row = fleet[(fleet["policy"] == policy) & (fleet["metric"] == metric)]
    return float(row[statistic].iloc[0]) if len(row) else float("nan")


def change(base: float, new: float) -> str:
    if base != base or new != new:
        return "–"
    if base == 0:
        return f"{new - base:+.2f}"
    return f"{new - base:+.2f} ({(new / base - 1) * 100:+.1f} %)"


def paper_change(base, new, given: str | None) -> str:
    if given:
        return given
    if base is None or new is None:
        return ""
    if base == 0:
        return f"{new - base:+.2f}"
    return f"{(new / base - 1) * 100:+.1f} %"


def comparison(fleet: pd.DataFrame, policy: str, spec, given: dict[str, str]) -> str:
    rows = []
    for label, metric, scale, statistic, p_base, p_new in spec:
        base = stat(fleet, "arq", metric, statistic) * scale
        new = stat(fleet, policy, metric, statistic) * scale
        rows.append(
            [
                label,
                common.fmt(p_base, ".2f", ""),
                common.fmt(p_new, ".2f", ""),
                paper_change(p_base, p_new, given.get(label)),
                common.fmt(base, ".2f"),
                common.fmt(new, ".2f"),
                change(base, new),
            ]
        )
    header = ["metric", "paper arq", f"paper {policy}", "paper change"]
    header += ["ours arq", f"ours {policy}", "our change"]
    return common.markdown_table(header, rows)


def validation(runs: pd.DataFrame, streams: pd.DataFrame) -> str:
    """The baseline fleet against the papers' measurement statistics (AutoRec §III, TOO §1)."""
    drawn = streams.rename(columns={"loss_rate": "loss_drawn"})
    arq = runs[runs["policy"] == "arq"].merge(drawn, on="seed")
    n = len(arq)
    rows = [
        ["streams with N_max >= 2 (%)", "> 43 (AutoRec Fig. 3)", 100 * (arq["n_max"] >= 2).mean()],
        ["streams with K_max >= 2 (%)", "21.7 (TOO §1)", 100 * (arq["k_max"] >= 2).mean()],
        ["streams with K_max >= 5 (%)", "8.5 (TOO §1)", 100 * (arq["k_max"] >= 5).mean()],
        [
            "recovery latency, 2+ rtx, mean of streams (ms)",
            "123.2 (AutoRec Table I)",
            arq["recovery_latency_multi_ms"].mean(),
        ],
        [
            "max recovery latency, mean of streams (ms)",
            "279.3 (AutoRec Table I)",
            arq["recovery_latency_multi_max_ms"].mean(),
        ],
        ["loss rate, mean (%)", "about 4 (AutoRec §VIII-B)", 100 * arq["loss_rate"].mean()],
        ["bitrate, mean (kbit/s)", "984.5 (AutoRec §VIII-A)", arq["bitrate_kbps"].mean()],
        ["SRTT drawn, mean (ms)", "95.5 (AutoRec §VIII-A)", arq["srtt_ms"].mean()],
    ]
    table = common.markdown_table(["baseline fleet (arq)", "paper", f"ours ({n} streams)"], rows)
    # AutoRec Table I: mean recovery latency (2+ retransmissions) by loss and SRTT class.
    classes = []
    for lo, hi, paper in [(0, 0.03, 26.8), (0.03, 0.10, 94.5), (0.10, 0.30, 186.4)]:
        g = arq[(arq["loss_rate"] >= lo) & (arq["loss_rate"] < hi)]
        classes.append(
            [
                f"loss {lo * 100:g}-{hi * 100:g} %",
                paper,
                len(g),
                g["recovery_latency_multi_ms"].mean(),
            ]
        )
    for lo, hi, paper in [(0, 50, 68.2), (50, 200, 170.2), (200, 500, 273.6), (500, 2000, 418.0)]:
        g = arq[(arq["srtt_ms"] >= lo) & (arq["srtt_ms"] < hi)]
        classes.append([f"SRTT {lo}-{hi} ms", paper, len(g), g["recovery_latency_multi_ms"].mean()])
    table += "\nAutoRec Table I, mean recovery latency of data that needed 2+ retransmissions:\n\n"
    table += common.markdown_table(["class (measured loss, drawn SRTT)", "paper ms", "streams",
                                    "ours ms"], classes)  # fmt: skip
    return table


BY_MODEL = [
    ("recovery_latency_multi_ms", "latency 2+ rtx ms", 1),
    ("deterioration_rate", "deterioration %", 100),
    ("redundancy_cost", "redundancy %", 100),
    ("freezes_per_100s", "freezes /100 s", 1),
    ("frozen_ms_per_100s", "frozen ms /100 s", 1),
    ("loss_rate", "loss %", 100),
]


def by_model(runs: pd.DataFrame, streams: pd.DataFrame) -> str:
    """Means per loss model and policy: which kind of stream each number comes from."""
    m = runs.merge(streams[["seed", "loss_model"]], on="seed")
    rows = []
    for (model, policy), g in m.groupby(["loss_model", "policy"], sort=True):
        cells = [g[metric].mean() * scale for metric, _, scale in BY_MODEL]
        rows.append([model, policy, g["seed"].nunique(), *cells])
    header = ["loss model", "policy", "streams", *[label for _, label, _ in BY_MODEL]]
    return common.markdown_table(header, rows, ".2f")


def plot(runs: pd.DataFrame, path: Path) -> None:
    fig, axes = plt.subplots(2, 4, figsize=(18, 8))
    for ax, (metric, label, scale, xscale) in zip(axes.flat, CDFS):
        for policy in POLICIES:
            v = (runs.loc[runs["policy"] == policy, metric].dropna() * scale).sort_values()
            if v.empty or (
                metric in ("goodput_reduction", "retran_ratio_added") and policy == "arq"
            ):
                continue
            y = (pd.RangeIndex(1, len(v) + 1) / len(v)).to_numpy()
            color = f"C{POLICIES.index(policy)}"
            ax.step(
                v.to_numpy(), y, where="post", color=color, label=f"{policy} (mean {v.mean():.3g})"
            )
        paper = {
            "recovery_latency_multi_ms": [("AutoRec arq", 231.2), ("AutoRec", 194.6),
                                          ("TOO arq", 119.3), ("TOO", 100.2)],
            "deterioration_rate": [("AutoRec arq", 23.0), ("AutoRec", 22.6)],
            "redundancy_cost": [("AutoRec", 0.47)],
            "goodput_reduction": [("AutoRec", 0.34)],
            "retran_ratio_added": [("TOO", 1.9)],
            "freezes_per_100s": [("AutoRec arq", 0.69), ("AutoRec", 0.62)],
            "goodput_mbps": [("TOO arq", 0.9743), ("TOO", 0.9511)],
        }.get(metric, [])  # fmt: skip
        for i, (name, x) in enumerate(paper):
            ax.axvline(
                x, color=f"C{i + 3}", linestyle="--", linewidth=1, label=f"paper {name} mean {x:g}"
            )
        if xscale == "log":
            ax.set_xscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("CDF over streams")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    common.save_figure(fig, path, dpi=110)


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "200 streams",
        seeds=1000,
        quick_seeds=200,
        jobs=0,
        count="--streams",
        count_help="streams",
        replot=True,
        extra=lambda p: p.add_argument(
            "--cc", help="congestion controller for every stream (default: the file's, bbr)"
        ),
    )
    name = "fleet" if args.cc is None else f"fleet-{args.cc.replace(':', '-')}"
    quick = "-quick" if args.quick else ""
    out = common.RESULTS / (name + quick)
    bursts = common.RESULTS / (name.replace("fleet", "fleet-slotted", 1) + quick)
    if not args.replot:
        scenario = SCENARIO if args.cc is None else with_cc(SCENARIO, args.cc, out)
        run_fleet(scenario, args.seeds, args.jobs, out)
        slotted = slotted_bursts(scenario, bursts)
        run_fleet(slotted, 50 if args.quick else 200, args.jobs, bursts)
    fleet = pd.read_csv(out / "fleet.csv")
    runs = pd.read_csv(out / "runs.csv")
    streams = pd.read_csv(out / "streams.csv")
    bad = runs["app_error"].dropna()
    if not bad.empty:
        sys.exit(f"{len(bad)} runs report an application error ({bad.iloc[0]}); see {out}")
    wall = float((out / "wall_seconds.txt").read_text())
    cpu = float((out / "cpu_seconds.txt").read_text())
    n = runs["seed"].nunique()
    under = "" if args.cc is None else f", every stream under `{args.cc}`"
    md = f"## Deployment fleet: {n} streams x {len(POLICIES)} policies{under}\n\n"
    md += "### AutoRec Figs. 21-22 (alpha 200 ms, beta 50 %, gamma 50 %)\n\n"
    md += comparison(fleet, "autorec", AUTOREC, AUTOREC_CHANGE)
    md += "\n### TOO Fig. 3 (Theta 50 ms, n 4)\n\n"
    md += comparison(fleet, "too", TOO, TOO_CHANGE)
    md += "\n### The baseline fleet against the papers' measurements\n\n"
    md += validation(runs, streams)
    md += "\n### Per loss model (means over streams)\n\n"
    md += by_model(runs, streams)
    b_runs = pd.read_csv(bursts / "runs.csv")
    b_streams = pd.read_csv(bursts / "streams.csv")
    md += (
        f"\n### Time-slotted bursts: the same fleet, its Gilbert-Elliott streams changing state "
        f"once per 30 ms ({b_runs['seed'].nunique()} streams of 30 s)\n\n"
    )
    md += by_model(b_runs, b_streams)
    md += (
        f"\n{n} streams x {len(POLICIES)} policies ({len(runs)} runs of "
        f"{SCENARIO_DURATION}): {wall:.0f} s wall, {cpu:.0f} s CPU ({n / cpu:.2f} streams per CPU "
        f"second, all policies) on {common.machine()}.\n"
    )
    figs = common.figure_dir(args.quick)
    common.save_text(figs / f"{name}.md", md)
    print(md)
    plot(runs, figs / f"{name}.png")


if __name__ == "__main__":
    main()
