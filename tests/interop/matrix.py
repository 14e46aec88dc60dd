#!/usr/bin/env python3
"""Interop matrix in the style of the QUIC interop runner (quic-interop-runner, testcases_quic.py).

Every test case runs recoup as the server against each client (aioquic, quinn) and recoup as the
client (`recoup get`) against each server (aioquic, quinn), through `recoup link` on loopback
with the case's network (the runner's ns-3 scenarios: 15 ms one way, 10 Mbit/s, a 25-packet
queue, plus loss, corruption, a blackhole or NAT rebinding). Each run captures both legs
(client <-> link, link <-> server) with tshark, decrypts them with the endpoints' key logs and
checks what the runner checks: the files byte-exact, the number of handshakes, one QUIC version,
and per case the Retry and its token, the key phase bits, the new paths with their
PATH_CHALLENGE / PATH_RESPONSE, the new DCID on migration, the stream limit; the link's report
must show that its loss, corruption, blackhole or rebinding actually happened. The runs with
`--policy fixed:2` count the copies in recoup's server qlog.

A peer that lacks a feature exits with 127, which the runner (and this script) report as
"unsupported"; everything else that does not pass is "failed", including a feature recoup lacks.

    python3 tests/interop/matrix.py --bin target/debug [--cases a,b] [--servers aioquic,quinn]
        [--clients recoup] [--jobs 2] [--write docs/INTEROP.md] [--keep DIR]

Exits non-zero if any run failed. File sizes and timings are scaled down from the runner's so
the whole matrix fits in a few minutes on 2 cores; docs/INTEROP.md lists both.
"""

import argparse
import concurrent.futures
import datetime
import filecmp
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
KB = 1024
MB = 1024 * KB
UNSUPPORTED_EXIT = 127
QUIC_V1 = "0x00000001"

# The runner's base network: `--delay=15ms --bandwidth=10Mbps --queue=25`.
BASE_NET = ["--delay", "15ms", "--rate", "10Mbps", "--queue", "droptail packets=25"]

# Each case: files (sizes), extra link flags, client mode, server mode, timeout (s), and what
# the runner's value was where we scaled it down.
CASES = {
    "handshake": dict(files=[1 * KB]),
    "transfer": dict(files=[200 * KB, 300 * KB, 500 * KB], scaled="2, 3 and 5 MB"),
    "multiplexing": dict(files=[32] * 500, timeout=90, scaled="1999 files"),
    "retry": dict(files=[10 * KB], server="retry"),
    "keyupdate": dict(files=[1 * MB], client="keyupdate", scaled="3 MB"),
    "rebind-port": dict(
        files=[2 * MB],
        net=["--rebind-first", "300ms", "--rebind-every", "600ms"],
        scaled="10 MB, first rebinding at 1 s, then every 5 s",
    ),
    "rebind-addr": dict(
        files=[2 * MB],
        net=["--rebind-first", "300ms", "--rebind-every", "600ms", "--rebind-addr"],
        scaled="10 MB, first rebinding at 1 s, then every 5 s",
    ),
    "connectionmigration": dict(files=[2 * MB], client="migrate"),
    "http3": dict(files=[5 * KB, 10 * KB, 500 * KB], client="h3", server="h3"),
    "handshakeloss": dict(
        files=[1 * KB] * 10,
        client="multiconnect",
        net=["--loss", "bernoulli 30%"],
        timeout=120,
        scaled="50 connections; the runner caps loss bursts at 3 packets, ours does not",
    ),
    "transferloss": dict(
        files=[1 * MB],
        net=["--loss", "bernoulli 2%"],
        scaled="2 MB; no burst cap",
    ),
    "handshakecorruption": dict(
        files=[1 * KB] * 10,
        client="multiconnect",
        net=["--corrupt", "30% burst=3 within=50"],
        timeout=120,
        scaled="50 connections",
    ),
    "transfercorruption": dict(
        files=[1 * MB],
        net=["--corrupt", "2% burst=3 within=50"],
        scaled="2 MB",
    ),
    "blackhole": dict(
        files=[2 * MB],
        net=["--blackhole", "on=600ms off=1s"],
        scaled="10 MB, on 5 s, off 2 s",
    ),
    # Not a runner case: transferloss with recoup's server sending two copies of each loss; the
    # server's qlog must show copies.
    "transferloss-fixed2": dict(
        files=[1 * MB],
        net=["--loss", "bernoulli 2%"],
        policy="fixed:2",
        roles=("server",),
    ),
}

# How `recoup get` would be asked for a case's client mode. Flags recoup does not have make the
# run fail (clap's usage error), as they should until the feature lands.
RECOUP_GET_MODE = {
    # The flags of wt-rfcpath (key update, migration) and wt-h3 (ALPN) as they stand.
    "keyupdate": ["--key-update-interval", "100"],
    "migrate": ["--migrate-after", "300ms"],
    "h3": ["--alpn", "h3"],
}
RECOUP_SERVE_MODE = {"retry": ["--retry"]}


ANSI = re.compile(r"\x1b\[[0-9;]*m")
ERROR_LINE = re.compile(r"fail|error|closed|timed out|usage|lost", re.IGNORECASE)


class Skip(Exception):
    """The peer does not support the case (exit code 127)."""


class Proc:
    """A background process whose output goes to a file; killed on stop."""

    def __init__(self, name, cmd, log, env=None):
        self.name = name
        self.log = log
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=open(log, "w"),
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )

    def wait_for(self, pattern, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.output()
            m = re.search(pattern, text)
            if m:
                return m
            if self.proc.poll() is not None:
                if self.proc.returncode == UNSUPPORTED_EXIT:
                    raise Skip(f"{self.name}: {text.strip()}")
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}:\n{text}")
            time.sleep(0.05)
        raise RuntimeError(
            f"{self.name} did not print {pattern!r} in {timeout} s:\n{self.output()}"
        )

    def output(self):
        with open(self.log, errors="replace") as f:
            return f.read()

    def stop(self, sig=signal.SIGINT, timeout=5):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout)
            except (subprocess.TimeoutExpired, ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        return self.output()


def server_cmd(peer, bins, root, mode, policy, serve_flags=()):
    if peer == "recoup":
        cmd = [os.path.join(bins, "recoup"), "serve", "--no-gso", "--listen", "127.0.0.1:0"]
        cmd += ["--root", root, *serve_flags]
        if policy:
            cmd += ["--policy", policy]
        return cmd + RECOUP_SERVE_MODE.get(mode, [])
    if peer == "aioquic":
        cmd = [sys.executable, os.path.join(HERE, "aioquic_server.py"), "--root", root]
        return cmd + (["--retry"] if mode == "retry" else [])
    cmd = [os.path.join(bins, "quinn-server"), "--no-gso", "--listen", "127.0.0.1:0"]
    cmd += ["--root", root]
    return cmd + {"retry": ["--retry"], "h3": ["--h3"]}.get(mode, [])


def client_cmds(peer, bins, urls, out, mode, timeout):
    """The client processes to run one after the other."""
    if peer == "recoup":
        get = [os.path.join(bins, "recoup"), "get", "--no-gso", "--insecure"]
        get += RECOUP_GET_MODE.get(mode, [])
        if mode == "multiconnect":
            return [get + [u, "-o", os.path.join(out, u.rsplit("/", 1)[1])] for u in urls]
        # All URLs on one connection, each saved in `out` under its name, as the runner asks.
        return [get + ["-o", out] + urls]
    flags = {
        "keyupdate": ["--keyupdate"],
        "migrate": ["--migrate"],
        "h3": ["--h3"],
        "multiconnect": ["--multiconnect"],
    }.get(mode, [])
    if peer == "aioquic":
        cmd = [sys.executable, os.path.join(HERE, "aioquic_client.py"), "--timeout", str(timeout)]
    else:
        cmd = [os.path.join(bins, "quinn-client"), "--no-gso"]
    return [cmd + flags + ["-d", out] + urls]


class Trace:
    """The datagrams of one leg's capture (those to or from `port`), decrypted by tshark, one
    dict per UDP datagram. Each leg has its own capture: every datagram crosses both legs, and
    tshark would take the second copy for a retransmission of the first."""

    FIELDS = [
        "frame.time_epoch",
        "quic.frame_type",
        "ip.src",
        "udp.srcport",
        "ip.dst",
        "udp.dstport",
        "quic.header_form",
        "quic.long.packet_type",
        "quic.scid",
        "quic.dcid",
        "quic.version",
        "quic.key_phase",
        "quic.path_challenge.data",
        "quic.path_response.data",
        "quic.retry_token",
        "quic.token_length",
        "quic.token",
        "quic.packet_number",
        "quic.ack.largest_acknowledged",
        "tls.quic.parameter.initial_max_streams_bidi",
        "tls.handshake.extensions_alpn_str",
    ]

    def __init__(self, pcap, keylog, port):
        cmd = ["tshark", "-r", pcap, "-o", f"tls.keylog_file:{keylog}"]
        cmd += ["-d", f"udp.port=={port},quic"]
        cmd += ["-Y", "quic", "-T", "fields", "-E", "occurrence=a", "-E", "aggregator=,"]
        for f in self.FIELDS:
            cmd += ["-e", f]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"tshark -r failed: {out.stderr}")
        self.datagrams = []
        for line in out.stdout.splitlines():
            values = line.split("\t")
            d = {}
            for f, v in zip(self.FIELDS, values):
                d[f] = v.split(",") if v else []
            d["src"] = (d["ip.src"][0], int(d["udp.srcport"][0]))
            d["dst"] = (d["ip.dst"][0], int(d["udp.dstport"][0]))
            d["from_port"] = d["src"][1] == port
            self.datagrams.append(d)


def long_packets(d, ptype):
    """Indexes into the per-packet long-header fields of datagram `d` with packet type `ptype`
    (0 Initial, 2 Handshake, 3 Retry)."""
    return [i for i, t in enumerate(d["quic.long.packet_type"]) if t == str(ptype)]


class Check:
    def __init__(self):
        self.failures = []
        self.notes = []

    def expect(self, ok, message):
        if not ok:
            self.failures.append(message)
        return ok


def check_run(case, spec, ctx, chk):
    """The runner's checks for `case` on the capture and the link's report."""
    server_port, link_port = ctx["server_port"], ctx["link_port"]
    server_leg = Trace(ctx["pcap"] + ".server", ctx["keylog"], server_port).datagrams
    client_leg = Trace(ctx["pcap"] + ".client", ctx["keylog"], link_port).datagrams
    from_server = [d for d in server_leg if d["from_port"]]
    to_server = [d for d in server_leg if not d["from_port"]]
    from_client = [d for d in client_leg if not d["from_port"]]
    to_client = [d for d in client_leg if d["from_port"]]
    chk.notes.append(f"{len(server_leg)} datagrams at the server, {len(client_leg)} at the client")

    # _count_handshakes: distinct SCIDs of the server's Initial packets.
    scids = set()
    versions = set()
    for d in from_server:
        for i in long_packets(d, 0):
            if i < len(d["quic.scid"]):
                scids.add(d["quic.scid"][i])
        versions.update(v for v in d["quic.version"] if v)
    want = len(spec["files"]) if spec.get("client") == "multiconnect" else 1
    chk.expect(len(scids) == want, f"expected {want} handshake(s), saw {len(scids)}")
    chk.expect(versions == {QUIC_V1}, f"expected QUIC version 1 only, saw {sorted(versions)}")

    retries = [d for d in from_server if long_packets(d, 3)]
    if case == "retry":
        check_retry(from_server, to_server, chk)
    else:
        chk.expect(not retries, "a Retry was sent though the case does not ask for one")

    if case == "multiplexing":
        field = "tls.quic.parameter.initial_max_streams_bidi"
        limits = [int(v) for d in from_server for v in d[field]]
        if chk.expect(limits, "could not read the server's initial_max_streams_bidi"):
            chk.expect(max(limits) <= 1000, f"server stream limit {max(limits)} > 1000")
            chk.notes.append(f"server stream limit {max(limits)}")
    if case == "keyupdate":
        client_kp1 = sum(1 for d in from_client if key_phase_1(d))
        server_kp1 = sum(1 for d in from_server if key_phase_1(d))
        chk.notes.append(f"key phase 1: client {client_kp1}, server {server_kp1} datagrams")
        chk.expect(
            client_kp1 > 0 and server_kp1 > 0,
            f"expected key phase 1 from both ends (client {client_kp1}, server {server_kp1})",
        )
    if case in ("rebind-port", "rebind-addr", "connectionmigration"):
        check_paths(case, from_server, to_server, from_client, to_client, chk)
    if case == "http3":
        alpn = {a for d in from_server for a in d["tls.handshake.extensions_alpn_str"]}
        chk.expect(alpn == {"h3"}, f"expected ALPN h3, the server chose {sorted(alpn)}")

    report = ctx["link_report"]
    counters = parse_link_report(report)
    net = " ".join(spec.get("net", []))
    if "--loss" in net:
        lost = counters["down"]["lost"] + counters["up"]["lost"]
        chk.expect(lost > 0, "the link lost nothing")
        chk.notes.append(f"link lost {lost}")
    if "--corrupt" in net:
        n = counters["down"]["corrupted"] + counters["up"]["corrupted"]
        chk.expect(n > 0, "the link corrupted nothing")
        chk.notes.append(f"link corrupted {n}")
    if "--blackhole" in net:
        lost = counters["down"]["lost"] + counters["up"]["lost"]
        chk.expect(lost > 0, "the blackhole dropped nothing: the transfer ended before it began")
        chk.notes.append(f"blackhole dropped {lost}")
    if "--rebind-first" in net:
        chk.expect(counters["rebinds"] > 0, "the link never rebound the client")
        chk.notes.append(f"link rebound {counters['rebinds']} times")

    if spec.get("policy", "").startswith("fixed") and ctx["server"] == "recoup":
        copies = count_copies(ctx["qlog_server"])
        chk.notes.append(f"server qlog: {copies} copies")
        chk.expect(copies > 0, f"policy {spec['policy']}: the server qlog shows no copies")


def key_phase_1(d):
    # tshark versions print a set key phase bit as "1" or "True" (the runner allows both).
    return any(v in ("1", "True") for v in d["quic.key_phase"])


def check_retry(from_server, to_server, chk):
    tokens = set()
    for d in from_server:
        if long_packets(d, 3):
            chk.expect(d["quic.retry_token"], "Retry packet without a token")
            tokens.update(t.replace(":", "") for t in d["quic.retry_token"])
    if not chk.expect(tokens, "no Retry packet was sent"):
        return
    highest_before = -1
    for d in to_server:
        idx = long_packets(d, 0)
        if not idx:
            continue
        pn = int(d["quic.packet_number"][0]) if d["quic.packet_number"] else -1
        if d["quic.token_length"][:1] == ["0"]:
            highest_before = max(highest_before, pn)
            continue
        if not chk.expect(pn > highest_before, f"client reset its packet number ({pn})"):
            return
        if any(t.replace(":", "") in tokens for t in d["quic.token"]):
            chk.notes.append("Initial with the Retry token seen")
            return
    chk.expect(False, "no Initial used the Retry token")


def answerable(challenges, from_client, to_client):
    """The challenges the client could answer: those it read while open. Our rebindings come
    every 600 ms (the runner's every 5 s), so a server's challenge can go to a binding the link
    has already retired (lost, as a NAT loses it) or reach the client after it closed, where RFC
    9000 §10.2.1 allows only CONNECTION_CLOSE in reply; neither says anything about the client.
    Nor does one that reached the client's socket after its last read: a client that read its
    last data closes microseconds later, and a challenge arriving in between is never read (CI
    saw this: challenge in packet 1944 delivered 190 us before the close, the client's qlog ends
    its reads at 1943). Read means acknowledged: the packet that carried the challenge has a
    number at most the largest the client acknowledged before closing. Where the capture shows
    no packet numbers or ACKs (not decrypted), delivery before the close counts as read."""
    closed = min(
        (
            float(d["frame.time_epoch"][0])
            for d in from_client
            if {"28", "29"} & set(d["quic.frame_type"])
        ),
        default=float("inf"),
    )
    largest_acked = max(
        (
            int(a)
            for d in from_client
            if float(d["frame.time_epoch"][0]) <= closed
            for a in d.get("quic.ack.largest_acknowledged", [])
        ),
        default=None,
    )
    delivered = set()
    for d in to_client:
        if float(d["frame.time_epoch"][0]) >= closed:
            continue
        numbers = [int(n) for n in d.get("quic.packet_number", [])]
        if largest_acked is None or not numbers or max(numbers) <= largest_acked:
            delivered.update(d["quic.path_challenge.data"])
    return challenges & delivered


# Frames that do not make a packet ack-eliciting (RFC 9002 §2): PADDING, ACK, CONNECTION_CLOSE.
NOT_ACK_ELICITING = {"0", "2", "3", "28", "29"}


def check_paths(case, from_server, to_server, from_client, to_client, chk):
    """TestCasePortRebinding / AddressRebinding / ConnectionMigration checks.

    The runner wants a PATH_CHALLENGE in the server's very first packet on a new path. We want it
    in the first ack-eliciting one: a server whose congestion window is full may only send
    packets that are not in flight (RFC 9002 §7), so its first packet there can be ACK-only, and
    its PATH_CHALLENGE, which counts in flight, follows once the window opens. aioquic does this
    (its packet builder stops at the in-flight PATH_CHALLENGE when cwnd - bytes_in_flight <= 0);
    RFC 9000 §9.3 asks for path validation, not for the challenge in the first packet."""
    last = None
    paths = set()
    unchecked = set()
    challenges = set()
    opened_ack_only = set()
    for d in from_server:
        cur = (d["src"], d["dst"])
        if last is None:
            last = cur
            continue
        if cur != last and cur not in paths:
            paths.add(last)
            last = cur
            unchecked.add(cur)
        if cur not in unchecked:
            continue
        if not set(d["quic.frame_type"]) - NOT_ACK_ELICITING:
            opened_ack_only.add(cur)
            continue
        unchecked.discard(cur)
        if not chk.expect(
            d["quic.path_challenge.data"],
            f"first ack-eliciting server packet on new path {cur[1]} has no PATH_CHALLENGE",
        ):
            return
        challenges.update(d["quic.path_challenge.data"])
    if opened_ack_only:
        chk.notes.append(f"{len(opened_ack_only)} new path(s) opened with an ACK-only packet")
    if last is not None:
        paths.add(last)
    chk.notes.append(f"server used {len(paths)} paths")
    if not chk.expect(len(paths) > 1, "the server saw a single path"):
        return
    responses = {r for d in to_server for r in d["quic.path_response.data"]}
    due = answerable(challenges, from_client, to_client)
    if due != challenges:
        chk.notes.append(
            f"{len(challenges - due)} PATH_CHALLENGE(s) never read by the open client "
            "(sent to a retired binding, after its CONNECTION_CLOSE, or after its last read)"
        )
    missing = due - responses
    chk.expect(not missing, f"PATH_CHALLENGE without PATH_RESPONSE: {sorted(missing)}")
    if case == "rebind-addr":
        ips = {d["dst"][0] for d in from_server}
        chk.expect(len(ips) > 1, f"the server saw one client address only: {ips}")
    if case == "connectionmigration":
        last, dcid, changed = None, None, 0
        for d in from_client:
            if not d["quic.dcid"]:
                continue
            cur = d["src"]
            if last is None:
                last, dcid = cur, d["quic.dcid"][0]
                continue
            if cur != last:
                last = cur
                new = d["quic.dcid"][0]
                chk.expect(new != dcid, f"client migrated to {cur} with its old DCID {dcid}")
                dcid = new
                changed += 1
        chk.expect(changed > 0, "the client never sent from a new address")


def parse_link_report(text):
    """The counters of `recoup link`'s summary: per direction the datagrams and bytes in, lost,
    dropped by the queue, corrupted and delivered, and the p99 timing error (how late the link
    sent, in microseconds), and the rebindings."""
    c = {"rebinds": 0}
    m = re.search(r"rebinds: (\d+)", text)
    if m:
        c["rebinds"] = int(m.group(1))
    for name in ("down", "up"):
        m = re.search(
            rf"{name}: in (\d+) \((\d+) B\), lost (\d+), queue-dropped (\d+), corrupted (\d+)"
            rf".*?delivered (\d+) \((\d+) B\).*?\n\s*timing error.*?p99 (-?\d+) us",
            text,
            re.DOTALL,
        )
        keys = (
            "in",
            "bytes_in",
            "lost",
            "queue",
            "corrupted",
            "delivered",
            "bytes_out",
            "late_p99_us",
        )
        c[name] = dict(zip(keys, map(int, m.groups()))) if m else dict.fromkeys(keys, 0)
    return c


def count_copies(qlog_dir):
    n = 0
    for root, _, files in os.walk(qlog_dir):
        for f in files:
            with open(os.path.join(root, f), errors="replace") as fh:
                n += fh.read().count('"recoup_copy"')
    return n


def start_capture(port, pcap, log):
    return Proc("dumpcap", ["dumpcap", "-i", "lo", "-f", f"udp port {port}", "-w", pcap], log)


def run_one(case, spec, server, client, bins, work, serve_flags=()):
    """Runs one case; returns (status, detail) with status succeeded/failed/unsupported."""
    run_dir = os.path.join(work, f"{case}_{server}_{client}")
    os.makedirs(run_dir)
    www = os.path.join(run_dir, "www")
    down = os.path.join(run_dir, "downloads")
    os.makedirs(www)
    os.makedirs(down)
    names = []
    for i, size in enumerate(spec["files"]):
        name = f"f{i:04d}_{size}.bin"
        with open(os.path.join(www, name), "wb") as f:
            f.write(os.urandom(size))
        names.append(name)
    keylog = os.path.join(run_dir, "keys.log")
    qlog_server = os.path.join(run_dir, "qlog-server")
    qlog_client = os.path.join(run_dir, "qlog-client")
    os.makedirs(qlog_server)
    os.makedirs(qlog_client)
    timeout = spec.get("timeout", 30)
    procs = []
    chk = Check()
    try:
        env = dict(os.environ, SSLKEYLOGFILE=keylog + ".server", QLOGDIR=qlog_server)
        srv = Proc(
            f"{server} server",
            server_cmd(server, bins, www, spec.get("server"), spec.get("policy"), serve_flags),
            os.path.join(run_dir, "server.log"),
            env,
        )
        procs.append(srv)
        server_addr = srv.wait_for(r"listening on (\S+)", 20).group(1)
        link = Proc(
            "recoup link",
            [os.path.join(bins, "recoup"), "link", "--listen", "127.0.0.1:0"]
            + ["--upstream", server_addr]
            + BASE_NET
            + spec.get("net", []),
            os.path.join(run_dir, "link.log"),
        )
        procs.append(link)
        link_addr = link.wait_for(r"listening on (\S+)", 20).group(1)
        server_port = int(server_addr.rsplit(":", 1)[1])
        link_port = int(link_addr.rsplit(":", 1)[1])
        pcap = os.path.join(run_dir, "capture.pcapng")
        caps = [
            start_capture(server_port, pcap + ".server", os.path.join(run_dir, "dumpcap.server")),
            start_capture(link_port, pcap + ".client", os.path.join(run_dir, "dumpcap.client")),
        ]
        procs += caps
        for cap in caps:
            cap.wait_for(r"Capturing on", 15)
        time.sleep(0.3)  # dumpcap reports before its first poll

        urls = [f"https://{link_addr}/{n}" for n in names]
        env = dict(
            os.environ,
            SSLKEYLOGFILE=keylog + ".client",
            QLOGDIR=qlog_client,
        )
        deadline = time.monotonic() + timeout
        client_log = os.path.join(run_dir, "client.log")
        with open(client_log, "w") as log:
            for cmd in client_cmds(client, bins, urls, down, spec.get("client"), timeout):
                log.write("$ " + " ".join(cmd) + "\n")
                log.flush()
                left = max(1.0, deadline - time.monotonic())
                try:
                    rc = subprocess.run(
                        cmd, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=left
                    ).returncode
                except subprocess.TimeoutExpired:
                    chk.expect(False, f"client timed out after {timeout} s")
                    break
                if rc == UNSUPPORTED_EXIT:
                    raise Skip(f"{client} client: exit 127")
                if not chk.expect(rc == 0, f"client exited with {rc}"):
                    break
        time.sleep(0.5)  # the last packets reach the capture
        for cap in caps:
            cap.stop()
        link_report = link.stop()
        srv.stop()
        with open(keylog, "w") as out:
            for part in (".server", ".client"):
                if os.path.exists(keylog + part):
                    with open(keylog + part) as f:
                        out.write(f.read())

        missing = [n for n in names if not os.path.exists(os.path.join(down, n))]
        wrong = [
            n
            for n in names
            if n not in missing
            and not filecmp.cmp(os.path.join(www, n), os.path.join(down, n), shallow=False)
        ]
        chk.expect(not missing, f"{len(missing)} of {len(names)} files missing")
        chk.expect(not wrong, f"{len(wrong)} files differ")
        extra = set(os.listdir(down)) - set(names)
        chk.expect(not extra, f"unexpected files {sorted(extra)[:3]}")
        if not missing and not wrong:
            ctx = dict(
                pcap=pcap,
                keylog=keylog,
                server_port=server_port,
                link_port=link_port,
                link_report=link_report,
                qlog_server=qlog_server,
                server=server,
            )
            check_run(case, spec, ctx, chk)
    except Skip as s:
        return "unsupported", str(s).splitlines()[0]
    except Exception as e:  # a harness failure is a failed run, with its reason
        text = str(e).strip().splitlines()
        chk.expect(False, f"{type(e).__name__}: {' / '.join(text[:1] + text[-1:])[:300]}")
    finally:
        for p in procs:
            p.stop(signal.SIGKILL)
    if chk.failures:
        tail = ""
        client_log = os.path.join(run_dir, "client.log")
        if os.path.exists(client_log):
            with open(client_log, errors="replace") as f:
                text = ANSI.sub("", f.read())
            lines = [ln for ln in text.splitlines() if ln.strip() and ln[:2] != "$ "]
            errors = [ln for ln in lines if ERROR_LINE.search(ln)]
            tail = " | client: " + (errors or lines or [""])[-1][:300]
        return "failed", "; ".join(chk.failures) + tail
    return "succeeded", "; ".join(chk.notes)


PEERS = ("aioquic", "quinn")


def runs(cases, servers=None, clients=None):
    """The runs of `cases`, those with a server in `servers` and a client in `clients` (all
    when None)."""
    for case in cases:
        spec = CASES[case]
        roles = spec.get("roles", ("server", "client"))
        pairs = []
        if "server" in roles:
            pairs += [("recoup", client) for client in PEERS]
        if "client" in roles:
            pairs += [(server, "recoup") for server in PEERS]
        for server, client in pairs:
            if (servers is None or server in servers) and (clients is None or client in clients):
                yield case, server, client


COLUMNS = [
    ("recoup", "aioquic"),
    ("recoup", "quinn"),
    ("aioquic", "recoup"),
    ("quinn", "recoup"),
]
MARK = {"succeeded": "✅", "failed": "❌", "known": "⚠️", "unsupported": "➖"}
KNOWN_FAILURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "known_failures.txt")


def read_known(path):
    """`case server client  # cause` per line: runs that fail for a cause written down (a gap in
    recoup or a peer, each with its issue), so CI catches every new failure but these."""
    known = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            body, _, cause = line.partition("#")
            words = body.split()
            if not words:
                continue
            if len(words) != 3 or words[0] not in CASES or not cause.strip():
                raise SystemExit(f"{path}:{n}: want 'case server client  # cause', got {line!r}")
            known[tuple(words)] = cause.strip()
    return known


def table(results, cases):
    head = "| case | " + " | ".join(f"{s} server ← {c} client" for s, c in COLUMNS) + " |"
    lines = [head, "|---" * (len(COLUMNS) + 1) + "|"]
    for case in cases:
        cells = []
        for col in COLUMNS:
            r = results.get((case,) + col)
            label = "known failure" if r and r[0] == "known" else r[0] if r else ""
            cells.append(MARK[r[0]] + " " + label if r else "n/a")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def git(*args):
    try:
        return subprocess.run(
            ["git", "-C", REPO, *args], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return "unknown"


def write_doc(path, results, cases, elapsed, args):
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    commit = git("rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes)" if git("status", "--porcelain") else ""
    lines = [
        "# Interop matrix",
        "",
        "```sh",
        f"python3 tests/interop/matrix.py --jobs {args.jobs} --write docs/INTEROP.md",
        "```",
        "",
        f"Run {now} on commit `{commit}`{dirty}, {os.cpu_count()} cores, {elapsed:.0f} s "
        f"(`python3 tests/interop/matrix.py --jobs {args.jobs}`; CI runs it from "
        "`scripts/test.sh`). ✅ succeeded, ❌ failed, ⚠️ known failure (listed with its cause in "
        "`tests/interop/known_failures.txt`), ➖ unsupported by the peer (exit 127).",
        "",
        "Cases are the QUIC interop runner's (`testcases_quic.py`), each checked as the runner "
        "checks it (files byte-exact; handshakes, version, Retry and token, key phase bits, paths "
        "with PATH_CHALLENGE/RESPONSE, new DCID on migration, stream limit, from a decrypted "
        "tshark capture of both legs; one deviation: the server's PATH_CHALLENGE on a new path "
        "must be in its first ack-eliciting packet there, not its first packet, since a full "
        "congestion window allows only ACK-only packets, RFC 9002 §7; every PATH_CHALLENGE the "
        "client read while open, i.e. acknowledged its packet, needs its PATH_RESPONSE) through "
        "`recoup link` with "
        "the runner's network "
        "(15 ms, 10 Mbit/s, 25 packets) and the case's loss, corruption, blackhole or rebinding, "
        "which the link's report must confirm. `transferloss-fixed2` runs recoup's server with "
        "`--policy fixed:2` and counts the copies in its qlog.",
        "",
        table(results, cases),
        "",
        "## Details",
        "",
        "| case | server | client | result | detail |",
        "|---|---|---|---|---|",
    ]
    for (case, server, client), (status, detail) in sorted(results.items()):
        detail = detail.replace("|", "\\|").replace("\n", " ")
        lines.append(f"| {case} | {server} | {client} | {status} | {detail} |")
    lines += ["", "## Scaled from the runner", "", "| case | ours | runner |", "|---|---|---|"]
    for case in cases:
        spec = CASES[case]
        sizes = spec["files"]
        ours = f"{len(sizes)} file(s), {sum(sizes) / KB:.0f} KB"
        if spec.get("net"):
            ours += ", link " + " ".join(spec["net"])
        lines.append(f"| {case} | {ours} | {spec.get('scaled', 'same')} |")
    # Sections written by hand after the generated ones (the 30 % loss benchmark from
    # loss_bench.py) are kept: they start at the first heading the matrix does not write.
    try:
        with open(path) as f:
            old = f.read().splitlines()
    except FileNotFoundError:
        old = []
    ours = {ln for ln in lines if ln.startswith("## ")} | {"## Scaled from the runner"}
    kept = next((i for i, ln in enumerate(old) if ln.startswith("## ") and ln not in ours), None)
    if kept is not None:
        lines += [""] + old[kept:]
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--bin", default=os.path.join(REPO, "target", "debug"))
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--servers", help="only runs with one of these servers (e.g. aioquic,quinn)")
    ap.add_argument("--clients", help="only runs with one of these clients (e.g. recoup)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--write", help="write the table to this Markdown file")
    ap.add_argument("--keep", help="keep every run's logs, captures and qlogs here")
    ap.add_argument(
        "--serve-flags",
        default="",
        help="more flags for recoup serve, e.g. '--workers 2'",
    )
    ap.add_argument(
        "--known-failures",
        default=KNOWN_FAILURES,
        help="runs expected to fail, with their causes (default: %(default)s)",
    )
    args = ap.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    known = read_known(args.known_failures)
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {', '.join(CASES)}")
    peers = {}
    for flag in ("servers", "clients"):
        value = getattr(args, flag)
        peers[flag] = None if value is None else [p for p in value.split(",") if p]
        bad = [p for p in peers[flag] or [] if p not in PEERS + ("recoup",)]
        if bad:
            raise SystemExit(f"unknown --{flag} {bad}; known: recoup, {', '.join(PEERS)}")
    for b in ("recoup", "quinn-server", "quinn-client"):
        if not os.access(os.path.join(args.bin, b), os.X_OK):
            raise SystemExit(f"{args.bin}/{b} missing: cargo build -p recoup-cli -p recoup-interop")
    if shutil.which("tshark") is None:
        raise SystemExit("tshark is needed to check the runs (Debian: apt-get install tshark)")
    work = args.keep or tempfile.mkdtemp(prefix="recoup-interop-")
    os.makedirs(work, exist_ok=True)
    start = time.monotonic()
    results = {}
    lock = threading.Lock()

    def one(run):
        t = time.monotonic()
        serve_flags = shlex.split(args.serve_flags)
        status, detail = run_one(run[0], CASES[run[0]], run[1], run[2], args.bin, work, serve_flags)
        if status == "failed" and run in known:
            status, detail = "known", f"known failure ({known[run]}): {detail}"
        elif status == "succeeded" and run in known:
            detail += " (listed in known failures: remove it)"
        with lock:
            results[run] = (status, detail)
            print(
                f"{MARK[status]} {run[0]:<20} {run[1]:>8} server <- {run[2]:<8} client "
                f"{time.monotonic() - t:5.1f} s  {detail}",
                flush=True,
            )

    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        list(pool.map(one, list(runs(cases, peers["servers"], peers["clients"]))))
    elapsed = time.monotonic() - start
    print()
    print(table(results, cases))
    counts = {s: sum(1 for r in results.values() if r[0] == s) for s in MARK}
    print(
        f"\n{counts['succeeded']} succeeded, {counts['failed']} failed, "
        f"{counts['known']} known failures, {counts['unsupported']} unsupported "
        f"in {elapsed:.0f} s"
    )
    if args.write:
        write_doc(args.write, results, cases, elapsed, args)
        print(f"wrote {args.write}")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
