"""The interop matrix's path-validation check (tests/interop/matrix.py, check_paths).

Datagrams are the dicts `Trace` builds from tshark: address pairs and decimal frame types.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "interop"))

import matrix  # noqa: E402

SERVER = ("127.0.0.1", 4433)
OLD = ("127.0.0.1", 5000)
NEW = ("127.0.0.1", 5001)


def dgram(src, dst, frames, challenge=(), response=(), t=0.0, pn=None, acked=None):
    return {
        "src": src,
        "dst": dst,
        "frame.time_epoch": [str(t)],
        "quic.frame_type": [str(f) for f in frames],
        "quic.path_challenge.data": list(challenge),
        "quic.path_response.data": list(response),
        "quic.dcid": [],
        "quic.packet_number": [] if pn is None else [str(pn)],
        "quic.ack.largest_acknowledged": [] if acked is None else [str(acked)],
    }


def check(from_server, to_server):
    chk = matrix.Check()
    # The client's leg sees what the server sent, so every challenge reached the open client.
    matrix.check_paths("rebind-port", from_server, to_server, to_server, from_server, chk)
    return chk


STREAM, ACK = 8, 2


def test_ack_only_first_packet_then_challenge_passes():
    chk = check(
        [
            dgram(SERVER, OLD, [STREAM]),
            dgram(SERVER, NEW, [ACK]),
            dgram(SERVER, NEW, [ACK, 26, STREAM], challenge=["aa"]),
        ],
        [dgram(NEW, SERVER, [27], response=["aa"])],
    )
    assert chk.failures == []
    assert "1 new path(s) opened with an ACK-only packet" in chk.notes


def test_data_on_new_path_without_challenge_fails():
    chk = check(
        [
            dgram(SERVER, OLD, [STREAM]),
            dgram(SERVER, NEW, [ACK]),
            dgram(SERVER, NEW, [ACK, STREAM]),
            dgram(SERVER, NEW, [26], challenge=["aa"]),
        ],
        [dgram(NEW, SERVER, [27], response=["aa"])],
    )
    assert chk.failures == [
        f"first ack-eliciting server packet on new path {NEW} has no PATH_CHALLENGE"
    ]


def test_unanswered_challenge_fails():
    chk = check(
        [dgram(SERVER, OLD, [STREAM]), dgram(SERVER, NEW, [26], challenge=["aa"])],
        [],
    )
    assert chk.failures == ["PATH_CHALLENGE without PATH_RESPONSE: ['aa']"]


CLOSE = 29


def test_challenge_arriving_after_the_clients_last_read_is_not_owed():
    # Packet 11 carries the challenge; the client acknowledged up to 10 and closed.
    server = [
        dgram(SERVER, OLD, [STREAM], t=1.0, pn=9),
        dgram(SERVER, OLD, [STREAM], t=2.0, pn=10),
        dgram(SERVER, NEW, [26], challenge=["aa"], t=3.0, pn=11),
    ]
    client = [dgram(NEW, SERVER, [ACK], t=2.5, acked=10), dgram(NEW, SERVER, [CLOSE], t=3.1)]
    chk = matrix.Check()
    matrix.check_paths("rebind-port", server, client, client, server, chk)
    assert chk.failures == []
    assert any("never read by the open client" in n for n in chk.notes), chk.notes


def test_challenge_the_client_acknowledged_but_did_not_answer_fails():
    server = [
        dgram(SERVER, OLD, [STREAM], t=1.0, pn=9),
        dgram(SERVER, NEW, [26], challenge=["aa"], t=2.0, pn=10),
    ]
    client = [dgram(NEW, SERVER, [ACK], t=2.5, acked=10), dgram(NEW, SERVER, [CLOSE], t=3.1)]
    chk = matrix.Check()
    matrix.check_paths("rebind-port", server, client, client, server, chk)
    assert chk.failures == ["PATH_CHALLENGE without PATH_RESPONSE: ['aa']"]
