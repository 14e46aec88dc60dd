"""AutoRec Fig. 15: redundancy cost tolerance (beta) sensitivity, alpha = 0 ms, gamma = 100 %.

Claim checked (AutoRec §VII-A): the measured redundancy cost stays within 1 percentage point of
beta, and beta of 30 % already brings the recovery latency below 20 ms.
"""

from __future__ import annotations

import sensitivity as sens

SWEEP = sens.Sweep(
    fig="fig15_beta",
    title="Fig. 15: redundancy cost tolerance (beta) sensitivity",
    param="beta",
    params="alpha=0ms,beta=0.3,gamma=1.0",
    values=["0", "0.05", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.6", "0.8", "1.0"],
    quick_values=["0", "0.1", "0.3", "1.0"],
    unit="redundancy cost tolerance beta (%)",
)


def main() -> None:
    agg, arq, args = sens.run(SWEEP, __doc__)
    sens.plot(SWEEP, agg, arq, args)
    extra = sens.tolerance_claim(agg, "redundancy_cost", "redundancy cost", "beta")
    extra += "\nLargest benefit and overhead (beta = 100 %):\n\n"
    extra += sens.max_point_row(agg.iloc[-1])
    sens.table(SWEEP, agg, arq, extra, args)


if __name__ == "__main__":
    main()
