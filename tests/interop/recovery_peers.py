"""The servers of the recovery benchmark (recovery_bench.py): how each is started, as its users
would set it up, to serve a directory of static files or to relay a live origin.

    quicgo                  quic-go's http3 server around net/http's file server, /live/ by
                            httputil's ReverseProxy flushing every write (tests/peers/quicgo)
    caddy                   Debian's caddy: file_server, and reverse_proxy with flush_interval -1
                            for /live/ (HTTP/3 over quic-go)
    quinn                   h3 on h3-quinn and quinn (crates/recoup-interop's h3-quinn-server);
                            files only: it has no relay
    aioquic                 aioquic's HTTP/3 server (aioquic_server.py); files only
    quiche                  quiche-h3-server (tests/peers/quiche): quiche's h3 module and
                            transport, crates.io's quiche; files only
    recoup-POLICY-CC        recoup serve --policy POLICY --cc CC (--origin for the live push)
    recoup-POLICY-CC-adjusted
                            the same with --threshold-rtt adjusted: the time threshold reads the
                            latest RTT less its ACK delay, as quic-go's does
    recoup-POLICY-CC-iw32   the same with --initial-window 32: quic-go's initial window instead
                            of RFC 9002 §7.2's ten packets
    recoup-POLICY-CC-tailping
                            the same with --tail-ping: a PING after each burst's last packet

Every server keeps its own defaults (congestion control, pacing, loss detection); only recoup's
policy and controller are named. Each one is started by `start(...)`, which returns the process
and the UDP address to point the link at, or raises ServerFailed naming the server and why.
"""

import os
import re
import shutil
import socket
import sys

from bench_harness import HERE, ServerFailed

RECOUP_POLICIES = ("arq", "too", "art", "autorec", "crest")
RECOUP_CCS = ("bbr", "cubic", "newreno", "copa", "bbr3")
# Name suffixes of recoup variants and the serve flags they add.
RECOUP_VARIANTS = {
    "adjusted": ["--threshold-rtt", "adjusted"],
    # quic-go's cubic sender starts with 32 packets (internal/congestion/cubic_sender.go).
    "iw32": ["--initial-window", "32"],
    "tailping": ["--tail-ping"],
}
PEERS = ("quicgo", "caddy", "quinn", "aioquic", "quiche")
FILES_ONLY = "cannot relay a streamed response (files only)"
# The peers whose server writes qlog when QLOGDIR is set. quiche-h3-server writes one too, but
# in quiche's newer schema (`file_schema`, `quic:`-prefixed event names), which `recoup analyze`
# (qlog 0.3) does not read.
QLOG_PEERS = ("quicgo", "aioquic")


def parse_server(name):
    """(kind, policy, cc) of a server name; ServerFailed for one we do not know."""
    if name in PEERS:
        return name, None, None
    m = re.fullmatch(r"recoup-([a-z]+)-([a-z0-9]+)(?:-([a-z0-9]+))?", name)
    if (
        m
        and m.group(1) in RECOUP_POLICIES
        and m.group(2) in RECOUP_CCS
        and (m.group(3) is None or m.group(3) in RECOUP_VARIANTS)
    ):
        return "recoup", m.group(1), m.group(2)
    raise ServerFailed(
        f"{name}: unknown server ({', '.join(PEERS)} or recoup-POLICY-CC[-VARIANT] with POLICY "
        f"in {RECOUP_POLICIES}, CC in {RECOUP_CCS} and VARIANT in {tuple(RECOUP_VARIANTS)})"
    )


def relays(name):
    """Whether the server can relay a streamed response from an origin (the live push)."""
    return parse_server(name)[0] in ("quicgo", "caddy", "recoup")


def writes_qlog(name):
    kind = parse_server(name)[0]
    return kind == "recoup" or kind in QLOG_PEERS


def free_port():
    """A UDP and TCP port free on 127.0.0.1 (Caddy wants its port in its configuration)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
        u.bind(("127.0.0.1", 0))
        port = u.getsockname()[1]
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as t:
        t.bind(("127.0.0.1", port))
    return port


CADDYFILE = """{{
	admin off
	auto_https disable_redirects
	skip_install_trust
	default_sni 127.0.0.1
	http_port 0
}}
https://127.0.0.1:{port} {{
	bind 127.0.0.1
	tls {tls}
{relay}	handle {{
		root * {root}
		file_server
	}}
}}
"""
CADDY_RELAY = """	handle /live/* {{
		reverse_proxy {origin} {{
			flush_interval -1
		}}
	}}
"""


def start(procs, name, tools, root, origin, run_dir, qlog_dir, cert=None):
    """Starts server `name` serving `root`, or relaying `origin` (host:port of the HTTP/1.1
    origin) when it is not None; returns (process, address). `tools` names the built peers:
    recoup, quicgo_dir, quinn_server, quiche_server. `cert` is (certificate, key) PEM files for
    a browser to pin, else each server makes its own."""
    kind, policy, cc = parse_server(name)
    log = os.path.join(run_dir, "server.log")
    env = dict(os.environ, QLOGDIR=os.path.abspath(qlog_dir)) if qlog_dir else None
    if origin and not relays(name):
        raise ServerFailed(f"{name}: {FILES_ONLY}")
    if kind == "recoup":
        cmd = [tools.recoup, "serve", "--listen", "127.0.0.1:0", "--policy", policy, "--cc", cc]
        variant = name.removeprefix(f"recoup-{policy}-{cc}").removeprefix("-")
        cmd += RECOUP_VARIANTS.get(variant, [])
        cmd += ["--origin", f"http://{origin}"] if origin else ["--root", root]
        cmd += ["--cert", cert[0], "--key", cert[1]] if cert else []
        return procs.start_listening(name, cmd, log, env)
    if kind == "quicgo":
        cmd = [os.path.join(tools.quicgo_dir, "server"), "-listen", "127.0.0.1:0", "-root", root]
        cmd += ["-origin", f"http://{origin}"] if origin else []
        cmd += ["-cert", cert[0], "-key", cert[1]] if cert else []
        return procs.start_listening(name, cmd, log, env)
    if cert and kind != "caddy":
        raise ServerFailed(f"{name}: no browser run (its certificate cannot be given)")
    if kind == "aioquic":
        cmd = [sys.executable, os.path.join(HERE, "aioquic_server.py"), "--root", root]
        return procs.start_listening(name, cmd, log, env)
    if kind == "quinn":
        cmd = [tools.quinn_server, "--listen", "127.0.0.1:0", "--root", root]
        return procs.start_listening(name, cmd, log, env)
    if kind == "quiche":
        cmd = [tools.quiche_server, "--listen", "127.0.0.1:0", "--root", root]
        return procs.start_listening(name, cmd, log, env)
    # Caddy: its port goes in its configuration, its state (the local CA) in the run directory.
    caddy = shutil.which("caddy")
    if not caddy:
        raise ServerFailed("caddy: not installed (scripts/install-peers.sh caddy installs it)")
    port = free_port()
    relay = CADDY_RELAY.format(origin=origin) if origin else ""
    conf = os.path.join(run_dir, "Caddyfile")
    with open(conf, "w") as f:
        tls = f"{cert[0]} {cert[1]}" if cert else "internal"
        f.write(CADDYFILE.format(port=port, root=root, relay=relay, tls=tls))
    home = os.path.join(run_dir, "caddy-home")
    env = dict(
        os.environ,
        HOME=home,
        XDG_DATA_HOME=os.path.join(home, "data"),
        XDG_CONFIG_HOME=os.path.join(home, "config"),
    )
    cmd = [caddy, "run", "--config", conf, "--adapter", "caddyfile"]
    # Ready once it holds its certificate: a handshake before that finds none.
    ready = r"(serving initial configuration)" if cert else r"(certificate obtained successfully)"
    proc, _ = procs.start_listening(name, cmd, log, env, pattern=ready, timeout=30)
    return proc, f"127.0.0.1:{port}"
