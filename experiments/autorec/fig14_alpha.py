"""AutoRec Fig. 14: recovery latency tolerance (alpha) sensitivity, beta = gamma = 100 %.

Claim checked (AutoRec §VII-A): for alpha in 10-200 ms the measured recovery latency stays within
3 ms above alpha; above 100 ms ARQ alone meets alpha and AutoRec sends almost no copies.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402
import sensitivity as sens  # noqa: E402

SWEEP = sens.Sweep(
    fig="fig14_alpha",
    title="Fig. 14: recovery latency tolerance (alpha) sensitivity",
    param="alpha",
    params="alpha=30ms,beta=1.0,gamma=1.0",
    values=[f"{a}ms" for a in (0, 10, 20, 30, 40, 50, 60, 80, 100, 150, 200)],
    quick_values=["0ms", "30ms", "100ms", "200ms"],
    unit="recovery latency tolerance alpha (ms)",
)


def main() -> None:
    agg, arq, args = sens.run(SWEEP, __doc__)
    sens.plot(SWEEP, agg, arq, args)
    rows = []
    for _, r in agg[(agg["x"] >= 10) & (agg["x"] <= 200)].iterrows():
        over = r["recovery_latency_multi_ms"] - r["x"]
        rows.append(
            [
                f"{r['x']:g}",
                common.pm(r["recovery_latency_multi_ms"], r["recovery_latency_multi_ms_ci"]),
                f"{over:+.1f}",
                "yes" if over <= 3.0 else "**no**",
            ]
        )
    claim = common.markdown_table(
        ["alpha ms", "latency ms (ours)", "latency − alpha ms", "within alpha + 3 ms (paper)"],
        rows,
    )
    extra = (
        "Largest benefit and overhead (alpha = 0):\n\n"
        + sens.max_point_row(agg.iloc[0])
        + "\nClaim: latency ≤ alpha + 3 ms for alpha in 10-200 ms:\n\n"
        + claim
    )
    sens.table(SWEEP, agg, arq, extra, args)


if __name__ == "__main__":
    main()
