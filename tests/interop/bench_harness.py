"""What the real-socket benchmarks (objects_bench.py, recovery_bench.py) share: flag parsing,
the machine and peer versions for the report, the processes a run starts and stops, per-run
percentiles and their mean over runs with a 95 % interval, and the summary of a qlog trace.
"""

import argparse
import bisect
import hashlib
import json
import math
import os
import platform
import re
import signal
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "experiments"))
from common import t975  # noqa: E402
from matrix import Proc  # noqa: E402


class ServerFailed(Exception):
    """A server that did not start; the message names it."""


def parse_seconds(text):
    m = re.fullmatch(r"([\d.]+)\s*(ms|s|m)?", text.strip())
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 30s, 500ms, 2m)")
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, None: 1}[m.group(2)]


def parse_size(text):
    m = re.fullmatch(r"(\d+)\s*(KB|KiB|MB|MiB|B)?", text.strip(), re.IGNORECASE)
    if not m:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 12KB)")
    unit = (m.group(2) or "B").upper().replace("I", "")
    return int(m.group(1)) * {"B": 1, "KB": 1024, "MB": 1024 * 1024}[unit]


def tool_version(cmd):
    """The first line a `--version`-style command prints, or why it could not run."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"not runnable: {e}"
    text = (out.stdout.strip() or out.stderr.strip()).splitlines()
    return text[0] if text else f"no version printed (exit {out.returncode})"


def recoup_version(binary):
    """recoup's --version and a hash of the binary (its version number does not change from
    build to build)."""
    try:
        with open(binary, "rb") as f:
            digest = hashlib.sha256(f.read()).hexdigest()[:12]
    except OSError as e:
        return f"not runnable: {e}"
    return f"{tool_version([binary, '--version'])} (binary sha256 {digest})"


def machine():
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            m = re.search(r"^model name\s*:\s*(.+)$", f.read(), re.MULTILINE)
            model = m.group(1).strip() if m else model
    except OSError:
        pass
    return f"{os.cpu_count()} CPUs (nproc), {model}, Linux {platform.release()}"


class Processes:
    """The servers and links a harness started, stopped on the way out, and their process
    groups listed in a file so that the calling shell script can stop them if the harness is
    killed outright."""

    def __init__(self, pid_file):
        self.pid_file = pid_file
        self.running = []

    def start(self, name, cmd, log, env=None):
        try:
            p = Proc(name, cmd, log, env)
        except OSError as e:
            raise ServerFailed(f"{name}: cannot run {cmd[0]}: {e}") from e
        self.running.append(p)
        self._write()
        return p

    def start_listening(self, name, cmd, log, env=None, pattern=r"listening on (\S+)", timeout=20):
        """Starts a server and waits for the line naming its address; ServerFailed (with the
        end of its output) if it exits or stays silent."""
        p = self.start(name, cmd, log, env)
        try:
            return p, p.wait_for(pattern, timeout).group(1)
        except RuntimeError as e:
            self.stop(p, signal.SIGKILL)
            raise ServerFailed(f"{name}: did not start: {str(e).strip()[-600:]}") from e

    def stop(self, p, sig=signal.SIGINT):
        out = p.stop(sig, timeout=10)
        self.running.remove(p)
        self._write()
        return out

    def stop_all(self):
        for p in list(self.running):
            self.stop(p, signal.SIGKILL)

    def _write(self):
        if self.pid_file:
            with open(self.pid_file, "w") as f:
                f.write("".join(f"{p.proc.pid}\n" for p in self.running))


def percentile(sorted_values, q):
    """Nearest-rank percentile (a failed object is infinitely slow)."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def mean_half_width(values):
    """(mean, 95 % half-width by Student t) of finite values; the half-width is nan for fewer
    than two."""
    mean = sum(values) / len(values)
    if len(values) < 2:
        return mean, math.nan
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    return mean, t975(len(values) - 1) * sd / math.sqrt(len(values))


def mean_ci(values, spec=".0f"):
    """`mean ± half-width` over runs; a percentile that fell on a failed object in some run
    cannot be averaged and says so."""
    inf = sum(1 for v in values if math.isinf(v))
    if inf:
        return f"∞ in {inf}/{len(values)} runs (failed objects)"
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return "–"
    mean, half = mean_half_width(values)
    if math.isnan(half):
        return f"{mean:{spec}}"
    return f"{mean:{spec}} ± {half:{spec}}"


# A gap after a packet longer than this ends a burst (a live frame is sent as one burst).
BURST_GAP_MS = 5.0


def summarise_qlog(path):
    """Congestion window and bytes in flight over time (from recovery:metrics_updated, as
    (ms, bytes) lists), packets lost per trigger, and PTO expiries of one qlog trace (JSON-SEQ
    .sqlog or JSON lines). PTO expiries are recovery:loss_timer_updated `expired` events of the
    `pto` timer, else increments of metrics_updated's pto_count; None when the trace has
    neither (recoup's qlog logs no PTO).

    Also, per 1-RTT packet declared lost, how long its loss took to find (declaration minus
    send), split by whether it ended a burst (the sender's next packet left more than
    BURST_GAP_MS later, so only a later burst's ACK can reveal the loss), and how long after
    the declaration the sender next sent stream data (a window or pacer holding the
    retransmission shows here)."""
    cwnd, inflight, lost = [], [], {}
    pto_timer = pto_count = None
    last_count = 0
    sent = {}  # 1-RTT packet number -> send time
    declared = []  # (time, packet number) of packet_lost events
    data_sends = []  # times of packets carrying STREAM frames
    with open(path, errors="replace") as f:
        for line in f:
            line = line.strip().lstrip("\x1e")
            if not line.startswith("{"):
                continue
            try:
                ev = json.loads(line)
            except json.JSONDecodeError:
                continue
            name, data, t = ev.get("name", ""), ev.get("data") or {}, ev.get("time")
            if name.endswith("metrics_updated"):
                if "congestion_window" in data:
                    cwnd.append((t, data["congestion_window"]))
                if "bytes_in_flight" in data:
                    inflight.append((t, data["bytes_in_flight"]))
                if "pto_count" in data:
                    pto_count = (pto_count or 0) + (data["pto_count"] > last_count)
                    last_count = data["pto_count"]
            elif name.endswith("loss_timer_updated"):
                pto_timer = pto_timer or 0
                if data.get("event_type") == "expired" and data.get("timer_type") == "pto":
                    pto_timer += 1
            elif name.endswith("packet_lost"):
                trigger = data.get("trigger", "unknown")
                lost[trigger] = lost.get(trigger, 0) + 1
                declared.append((t, (data.get("header") or {}).get("packet_number")))
            elif name.endswith("packet_sent"):
                header = data.get("header") or {}
                if str(header.get("packet_type", "")).lower() == "1rtt":
                    sent[header.get("packet_number")] = t
                if any(f.get("frame_type") == "stream" for f in data.get("frames") or []):
                    data_sends.append(t)
    detect_tail, detect_other, declared_to_send = [], [], []
    data_sends.sort()
    for t, pn in declared:
        if pn not in sent or t is None:
            continue
        following = sent.get(pn + 1)
        tail = following is None or following - sent[pn] > BURST_GAP_MS
        (detect_tail if tail else detect_other).append(t - sent[pn])
        i = bisect.bisect_left(data_sends, t)
        if i < len(data_sends):
            declared_to_send.append(data_sends[i] - t)
    return {
        "cwnd": cwnd,
        "bytes_in_flight": inflight,
        "lost": lost,
        "ptos": pto_timer if pto_timer is not None else pto_count,
        "detect_tail_ms": detect_tail,
        "detect_other_ms": detect_other,
        "declared_to_send_ms": declared_to_send,
    }


def time_weighted(series):
    """Mean and median of a step function given as (time, value) changes, weighted by how long
    each value held (the last one holds for no time): implementations log at different moments
    (quic-go on every send and ACK, recoup on every RTT sample), so counting samples would
    compare different things."""
    spans = [(v, t1 - t0) for (t0, v), (t1, _) in zip(series, series[1:]) if t1 > t0]
    total = sum(d for _, d in spans)
    if not total:
        return math.nan, math.nan
    mean = sum(v * d for v, d in spans) / total
    acc = 0.0
    for v, d in sorted(spans):
        acc += d
        if acc >= total / 2:
            return mean, v
    return mean, math.nan
