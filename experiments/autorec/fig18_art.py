"""AutoRec Fig. 18: AutoRec vs ART over RTT 20-200 ms (4 Mbit/s live stream, 12 Mbit/s path)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import compare  # noqa: E402
from compare import NA  # noqa: E402

# Paper (AutoRec §VII-A, text on Fig. 18): [latency ms, deterioration %, redundancy cost %,
# goodput reduction %]; for 60-200 ms the text gives ranges over the RTTs.
PAPER = {
    ("art", 20.0): ["13.02", "0.23", "5.73", NA],
    ("art", 60.0): ["34.03", "0.12–0.19", "5.93–6.37", NA],
    ("art", 200.0): ["109.44", "0.12–0.19", "5.93–6.37", NA],
    ("autorec", 20.0): ["15.76", "0.45", "5.10", NA],
    ("autorec", 60.0): ["< 30", NA, "14.72", NA],
    ("autorec", 200.0): ["< 30", NA, "24.44", NA],
}

CMP = compare.Compare(
    fig="fig18_art",
    title="Fig. 18: AutoRec vs ART over RTT (4 Mbit/s live stream, 12 Mbit/s)",
    axis="path.rtt",
    values=["20ms", "40ms", "60ms", "80ms", "100ms", "120ms", "140ms", "160ms", "180ms", "200ms"],
    quick_values=["20ms", "100ms", "200ms"],
    xlabel="RTT (ms)",
    policies=[
        {"name": "art"},
        {"name": "autorec", "params": compare.AUTOREC_PARAMS},
        compare.AUTOREC_ONCE,
    ],
    paper=PAPER,
)

if __name__ == "__main__":
    compare.run(CMP, __doc__)
