"""AutoRec Fig. 15: redundancy cost tolerance (beta) sensitivity, alpha = 0 ms, gamma = 100 %.

Claim checked (AutoRec §VII-A): the measured redundancy cost stays within 1 percentage point of
beta, and beta of 30 % already brings the recovery latency below 20 ms.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import sensitivity as sens  # noqa: E402

SWEEP = sens.Sweep(
    fig="fig15_beta",
    title="Fig. 15: redundancy cost tolerance (beta) sensitivity",
    param="beta",
    params="alpha=0ms,beta=0.3,gamma=1.0",
    values=sens.FRACTIONS,
    quick_values=sens.QUICK_FRACTIONS,
    unit="redundancy cost tolerance beta (%)",
)


if __name__ == "__main__":
    sens.tolerance_figure(SWEEP, __doc__, "redundancy_cost", "redundancy cost")
