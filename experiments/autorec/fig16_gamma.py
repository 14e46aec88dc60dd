"""AutoRec Fig. 16: goodput reduction tolerance (gamma) sensitivity, alpha = 0 ms, beta = 100 %.

Claim checked (AutoRec §VII-A): the measured goodput reduction stays within 1 percentage point of
gamma, and gamma of 30 % already brings the recovery latency below 20 ms.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import sensitivity as sens  # noqa: E402

SWEEP = sens.Sweep(
    fig="fig16_gamma",
    title="Fig. 16: goodput reduction tolerance (gamma) sensitivity",
    param="gamma",
    params="alpha=0ms,beta=1.0,gamma=0.2",
    values=sens.FRACTIONS,
    quick_values=sens.QUICK_FRACTIONS,
    unit="goodput reduction tolerance gamma (%)",
)


if __name__ == "__main__":
    sens.tolerance_figure(SWEEP, __doc__, "goodput_reduction", "goodput reduction")
