"""AutoRec Fig. 16: goodput reduction tolerance (gamma) sensitivity, alpha = 0 ms, beta = 100 %.

Claim checked (AutoRec §VII-A): the measured goodput reduction stays within 1 percentage point of
gamma, and gamma of 30 % already brings the recovery latency below 20 ms.
"""

from __future__ import annotations

import sensitivity as sens

SWEEP = sens.Sweep(
    fig="fig16_gamma",
    title="Fig. 16: goodput reduction tolerance (gamma) sensitivity",
    param="gamma",
    params="alpha=0ms,beta=1.0,gamma=0.2",
    values=["0", "0.05", "0.1", "0.15", "0.2", "0.3", "0.4", "0.5", "0.6", "0.8", "1.0"],
    quick_values=["0", "0.1", "0.3", "1.0"],
    unit="goodput reduction tolerance gamma (%)",
)


def main() -> None:
    agg, arq, args = sens.run(SWEEP, __doc__)
    sens.plot(SWEEP, agg, arq, args)
    extra = sens.tolerance_claim(agg, "goodput_reduction", "goodput reduction", "gamma")
    extra += "\nLargest benefit and overhead (gamma = 100 %):\n\n"
    extra += sens.max_point_row(agg.iloc[-1])
    sens.table(SWEEP, agg, arq, extra, args)


if __name__ == "__main__":
    main()
