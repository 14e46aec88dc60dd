"""AutoRec Fig. 17: opportunistic reinjection on and off, a 4 Mbit/s live stream over 2-12 Mbit/s.

At 2-4 Mbit/s the stream never leaves on-mode, so AutoRec without opportunistic reinjection
(copies only in off-mode) should send almost nothing; with it, copies go out after T_thres of
silence. Above 4 Mbit/s off-mode appears and both versions reinject.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import compare  # noqa: E402
from compare import NA  # noqa: E402

# Paper (AutoRec §VII-A, text on Fig. 17), at the ends of the ranges it quotes:
# [latency ms, deterioration %, redundancy cost %, goodput reduction %].
PAPER = {
    ("autorec-no-opp", 2.0): ["281.4", "4.9", NA, NA],
    ("autorec-no-opp", 4.0): ["166.7", "4.8", NA, NA],
    ("autorec-no-opp", 8.0): ["52.3", "2.3", "5.0", NA],
    ("autorec-no-opp", 12.0): ["7.9", "0.1", "14.5", NA],
    ("autorec", 2.0): ["56.1", NA, "21.2", "16.2"],
    ("autorec", 4.0): ["32.9", NA, "18.5", "14.3"],
    ("autorec", 8.0): ["24.3", NA, "10.2", NA],
    ("autorec", 12.0): ["5.1", NA, "14.7", NA],
}

CMP = compare.Compare(
    fig="fig17_opportunistic",
    title="Fig. 17: opportunistic reinjection on/off (4 Mbit/s live stream)",
    axis="path.rate",
    values=["2Mbps", "4Mbps", "6Mbps", "8Mbps", "10Mbps", "12Mbps"],
    quick_values=["2Mbps", "4Mbps", "12Mbps"],
    xlabel="bandwidth (Mbit/s)",
    policies=[
        {"name": "autorec", "params": compare.AUTOREC_PARAMS},
        {
            "name": "autorec",
            "label": "autorec-no-opp",
            "params": compare.AUTOREC_PARAMS + ",opportunistic=off",
        },
        compare.AUTOREC_ONCE,
    ],
    paper=PAPER,
)

if __name__ == "__main__":
    compare.run(CMP, __doc__)
