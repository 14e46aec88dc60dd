"""Loss bursts as the deployment fleet's senders see them, against ART §3.2 (37.2 % of bursts
one packet; p90, p95, p99 13, 27 and 125 packets).

    python3 experiments/fleet/burst_sizes.py [--streams N] [--jobs N] [--replot]

The runs' result columns have no burst sizes, so this reruns the `bursts` streams among the
first N streams of scenarios/fleet/deployment.toml (arq only, each as the scenario the
population writes for it) with qlog, and counts runs of consecutive 1-RTT packet numbers the
server sent and the client never received. The loss element draws ART's sizes; a burst also
ends after its size in datagram times at the stream's bitrate, so a sender that stalls inside a
long burst (a full window, probe timeouts) loses fewer packets than drawn. Writes
experiments/figures/fleet_bursts.md.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

SCENARIO = common.REPO / "scenarios" / "fleet" / "deployment.toml"
OUT = common.RESULTS / "fleet-bursts"
ART = [("single (% of bursts)", 37.2), ("p90", 13), ("p95", 27), ("p99", 125)]
DATAGRAM = 1350  # recoup_transport::TransportConfig::default().max_datagram_size


def percent(p: float) -> str:
    return f"{round(p * 100 * 1e6) / 1e6:g}%"


def stream_toml(row: pd.Series, burst_points: str) -> str:
    """The stream's scenario, as recoup_sim::population writes it, with only arq."""
    bitrate = row["bitrate_kbps"] * 1e3
    link = f"{max(round(row['link_mbps'] * 1e6), 1)}bps"
    pace_ns = max(round(DATAGRAM * 8 / bitrate * 1e9), 1)
    loss = f"bursts {percent(row['loss_rate'])} pace={pace_ns}ns {burst_points}"
    return f"""name = "bursts-{row["stream"]}"
seed = {row["seed"]}
repetitions = 1
duration = "100s"
[path]
rtt = "{row["srtt_ms"]:.3f}ms"
queue = "droptail packets=100"
[path.down]
rate = "{link}"
loss = "{loss}"
[path.up]
rate = "{link}"
[app]
kind = "live"
fps = 20
bitrate = "{max(round(bitrate), 1)}bps"
[transport]
cc = "bbr"
[[policy]]
name = "arq"
"""


def packet_numbers(qlog: Path, event: str) -> list[int]:
    out = []
    with qlog.open() as f:
        for line in f:
            if event not in line:
                continue
            e = json.loads(line.lstrip("\x1e"))
            header = e["data"]["header"]
            if e["name"] == f"transport:{event}" and header.get("packet_type") == "1RTT":
                out.append(header["packet_number"])
    return out


def bursts_of(folder: Path) -> list[int]:
    server = next((folder / "qlog").glob("*-server.sqlog"))
    client = next((folder / "qlog").glob("*-client.sqlog"))
    received = set(packet_numbers(client, "packet_received"))
    runs, run = [], 0
    for pn in sorted(set(packet_numbers(server, "packet_sent"))):
        if pn in received:
            if run:
                runs.append(run)
            run = 0
        else:
            run += 1
    # A run still open at the end may be packets in flight: left out.
    return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument("--replot", action="store_true")
    args = parser.parse_args()
    binary = str(common.recoup_binary())
    fleet = OUT / "fleet"
    if not args.replot:
        if OUT.exists():
            shutil.rmtree(OUT)
        # The streams' draws (the population writes them with its results).
        text = SCENARIO.read_text()
        text = text[: text.index("[[policy]]")] + '[[policy]]\nname = "arq"\n'
        text = text.replace('"../../../shared/', f'"{SCENARIO.parent}/../../../shared/')
        fleet.mkdir(parents=True)
        (fleet / "fleet.toml").write_text(text)
        cmd = [binary, "population", str(fleet / "fleet.toml"), "--streams", str(args.streams)]
        subprocess.run(cmd + ["--out", str(fleet), "--jobs", str(args.jobs)], check=True)
    streams = pd.read_csv(fleet / "streams.csv")
    bursty = streams[streams["loss_model"] == "bursts"]
    points = "1:37.2% 13:90% 27:95% 125:99% 183:100%"
    assert "single = 0.372, p90 = 13, p95 = 27, p99 = 125, max = 183" in SCENARIO.read_text()
    sizes = []
    for _, row in bursty.iterrows():
        folder = OUT / f"stream-{row['stream']}"
        if not args.replot:
            folder.mkdir(parents=True)
            (folder / "stream.toml").write_text(stream_toml(row, points))
            cmd = [binary, "run", str(folder / "stream.toml"), "--out", str(folder), "--qlog"]
            subprocess.run(cmd + ["--jobs", "1"], check=True, stdout=subprocess.DEVNULL)
        sizes += bursts_of(folder)
    s = pd.Series(sorted(sizes))
    n = len(s)

    def quantile(q: float) -> int:
        """The smallest size with at least a share q of the bursts at or below it."""
        return int(s.iloc[max(math.ceil(q * n), 1) - 1])

    ours = [100 * (s == 1).mean(), quantile(0.90), quantile(0.95), quantile(0.99)]
    rows = [[label, art, v] for (label, art), v in zip(ART, ours)]
    rows.append(["mean burst (packets)", "", s.mean()])
    rows.append(["largest burst", "", s.max()])
    md = f"## Loss bursts seen by the fleet's senders ({len(bursty)} streams, {n} bursts)\n\n"
    md += "Runs of consecutive 1-RTT packets sent by the server and never received (arq).\n\n"
    md += common.markdown_table(["", "ART §3.2", "fleet runs"], rows, ".1f")
    common.save_text(common.FIGURES / "fleet_bursts.md", md)
    print(md)


if __name__ == "__main__":
    main()
