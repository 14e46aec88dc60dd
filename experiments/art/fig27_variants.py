"""ART Fig. 27: N_max and redundancy cost of ART's Redundancy Adapters: test-and-verification
(ART), the multi-armed bandits (ART-MAB, epsilon-greedy and UCB, eta = 1.01) and ART-DQN at
gamma = 1.01-1.05, each under the authors' code's reading and under recoup's reading of the text.

    python3 experiments/art/fig27_variants.py [--quick] [--seeds N] [--jobs N] [--replot]

ART §8.1: files over Mahimahi's Verizon-LTE trace, 30 ms delay, loss 1-10 %; large files of about
200 MB and small ones of about 1 MB. Here: the Verizon-LTE-short trace both ways (the shared
traces' Verizon LTE), 30 ms RTT, `crn bernoulli` loss of 1, 5 and 10 % on the data direction
(every policy meets the same losses), BBR, 1 MB files and 20 MB as the large ones (200 MB over
this trace takes minutes per run; the paper's runs took 4 hours each). ART-DQN is trained by
`recoup train-dqn --gamma G --reading R --scenario` on this figure's own points (the paper's DQN
learned "under varying packet loss patterns" of the same testbed), 64 episodes, seed 1, once
for each reading: `code` (quic-art's state and reward, the default of `art-dqn`) and `text`.

Raw rows in experiments/results/art-fig27/, the plot in experiments/figures/art-fig27.png and the
table in experiments/figures/art-fig27.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib.pyplot as plt

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

GAMMAS = [1.01, 1.02, 1.03, 1.04, 1.05]
TRACES = common.REPO.parent / "shared" / "traces" / "mahimahi"
LOSSES = ["1%", "5%", "10%"]
DQN_SEED = 1


# The paper's stated path (§8.1: "30 ms delay", read as the RTT, with a 200-packet queue of ours)
# and the authors' scripts' (quic-art's MAB and RL `runtest.sh`: `mm-delay 30`, one way, and
# mm-link without queue arguments).
PATHS = {
    "stated": {"rtt": "30ms", "queue": "droptail packets=200"},
    "scripted": {"rtt": "60ms", "queue": "infinite"},
}


def plan(name: str, size: str, seeds: int, policies: list[dict], path: str = "stated") -> dict:
    return {
        "name": name,
        "seed": 1,
        "repetitions": seeds,
        "duration": "120s",
        "path": {
            **PATHS[path],
            "down": {"trace": str(TRACES / "Verizon-LTE-short.down")},
            "up": {"trace": str(TRACES / "Verizon-LTE-short.up")},
        },
        "app": {"kind": "file", "size": size, "count": 1},
        "transport": {"cc": "bbr"},
        "policy": policies,
        "sweep": {"path.down.loss": [f"crn bernoulli {p}" for p in LOSSES]},
    }


def main() -> None:
    args = common.parse_args(
        __doc__.split("\n\n")[0],
        "4 seeds, 2 MB large files, 16 training episodes (a smoke run)",
        seeds=20,
        quick_seeds=4,
        jobs=0,
        replot=True,
    )
    out = common.RESULTS / "art-fig27"
    episodes = 16 if args.quick else 64
    fixed = [
        # The authors' code's reading (the default of art and art-mab): quic-art's adapter, and
        # its bandit's rewards (1 / (n R) for a success, -eta k R_k for each earlier lost round)
        # and UCB bonus; then the same adapters as we read the paper's text.
        {"label": "ART", "name": "art"},
        {"label": "MAB-EG", "name": "art-mab", "params": "algo=eg,eta=1.01"},
        {"label": "MAB-UCB", "name": "art-mab", "params": "algo=ucb,eta=1.01"},
        {"label": "ART (text)", "name": "art", "params": "reading=text"},
        {"label": "MAB-EG (text)", "name": "art-mab", "params": "reading=text,algo=eg,eta=1.01"},
        {
            "label": "MAB-UCB (text)",
            "name": "art-mab",
            "params": "reading=text,algo=ucb,eta=1.01",
        },
    ]
    # The DQN learns on the small-file points (its episodes are runs of them).
    train_plan = out / "train.toml"
    train_plan.parent.mkdir(parents=True, exist_ok=True)
    train_plan.write_text(common.to_toml(plan("art-fig27-train", "1MB", 1, fixed[:1])))
    dqn = []
    for reading, suffix, given in [("code", "", ""), ("text", " (text)", "reading=text,")]:
        for g in GAMMAS:
            weights = common.train_dqn(
                out / "dqn" / reading / f"gamma-{g}.safetensors",
                episodes,
                DQN_SEED,
                replot=args.replot,
                gamma=g,
                scenario=train_plan,
                reading=reading,
            )
            dqn.append(
                {
                    "label": f"DQN γ={g}{suffix}",
                    "name": "art-dqn",
                    "params": f"{given}weights={weights}",
                }
            )
    policies = fixed + dqn
    labels = [p["label"] for p in policies]

    sizes = [("small", "1MB", args.seeds), ("large", "2MB" if args.quick else "20MB", 3)]
    cases = [(path, *size) for path in PATHS for size in sizes]
    tables, fig, axes = [], *plt.subplots(len(PATHS), 2, figsize=(11, 4 * len(PATHS)))
    for ax, (path, kind, size, seeds) in zip(axes.flat, cases):
        rows = common.run(
            plan(f"art-fig27-{path}-{kind}", size, seeds, policies, path),
            out / path / kind / "scenario.toml",
            args,
        )
        incomplete = int(rows["transfers_incomplete"].fillna(0).sum())
        if incomplete:
            sys.exit(f"{incomplete} {size} transfers did not complete: see {out / kind}")
        rows["loss"] = rows["path.down.loss"].str.split().str[-1]
        agg = common.aggregate(rows, ["loss", "policy"], ["n_max", "redundancy_cost", "fct_ms"])
        table = common.rows_by(
            agg,
            "loss",
            LOSSES,
            labels,
            lambda r: [
                common.pm(r["n_max"], r["n_max_ci"], digits=2),
                common.pm(r["redundancy_cost"], r["redundancy_cost_ci"], 100),
                common.pm(r["fct_ms"], r["fct_ms_ci"], digits=0),
            ],
        )
        header = ["loss", "adapter", "N_max", "redundancy cost %", "FCT ms"]
        tables.append(
            f"{size} files, {path} path, {seeds} seeds per point:\n\n"
            + common.markdown_table(header, table)
        )
        mean = rows.groupby("policy")[["n_max", "redundancy_cost"]].mean().loc[labels]
        for i, (label, r) in enumerate(mean.iterrows()):
            kind = label.split()[0]
            marker = {"ART": "o", "MAB-EG": "s", "MAB-UCB": "s"}.get(kind, "^")
            marker = "v" if kind == "DQN" and label.endswith("(text)") else marker
            color = plt.cm.tab20(i)
            ax.scatter(
                100 * r["redundancy_cost"], r["n_max"], label=label, marker=marker, c=[color]
            )
        ax.set_xlabel("redundancy cost (%), mean over 1, 5, 10 % loss")
        ax.set_ylabel("N_max")
        ax.set_title(f"{size} files, {path} path ({PATHS[path]['rtt']} RTT)")
        ax.grid(alpha=0.3)
    axes.flat[0].legend(fontsize=7, ncol=2)
    common.save_figure(fig, common.figure_path("art-fig27", args.quick), 120)
    common.write_table(
        "art-fig27",
        "ART Fig. 27: ART's Redundancy Adapters (test-and-verification, MAB, DQN)",
        "\n\n".join(tables) + "\n",
        args,
        per_point=f"{episodes} DQN training episodes per gamma; seeds as above",
    )


if __name__ == "__main__":
    main()
