"""The aioquic live player's frame checks and playback model (tests/interop/live_player.py).

The playback cases are those of recoup-apps' LivePlayer unit tests
(crates/recoup-apps/src/live.rs), so the real-time player and the simulated one count freezes
the same way.
"""

import struct
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests" / "interop"))

import live_player  # noqa: E402

MS = 1_000_000


def frame(sequence, payload=b"x" * 10, crc=None):
    checksum = zlib.crc32(payload) if crc is None else crc
    head = live_player.HEADER.pack(b"RCPF", 1, 0, 0, sequence, 0, len(payload), checksum)
    return head + payload


def play(fps, startup_ms, rebuffer_ms, arrivals, finish_ms):
    p = live_player.Player(0, fps, startup_ms * MS, rebuffer_ms * MS)
    for at_ms, frames, fin in arrivals:
        p.arrive(at_ms * MS, frames, fin)
    p.finish(finish_ms * MS)
    return p


def test_late_frame_stalls_until_the_rebuffer_amount_arrived():
    # 10 fps, start after 2 frames, resume after 2: frame 3 due at 450 ms arrives at 700 ms.
    arrivals = [(50, 1, False), (150, 1, False), (300, 1, False), (700, 1, False)]
    arrivals += [(720, 1, False), (800, 1, False)]
    p = play(10, 200, 200, arrivals, 1000)
    assert p.startup_delay == 150 * MS
    assert (p.freezes, p.frozen) == (1, 270 * MS)
    assert p.played == 6
    assert p.session == 1000 * MS


def test_a_stall_at_the_end_counts_until_finish_and_fin_drains_the_buffer():
    p = play(10, 100, 300, [(0, 1, False), (50, 1, False)], 500)
    assert (p.freezes, p.frozen) == (1, 300 * MS)

    p = play(10, 100, 1000, [(0, 1, False), (300, 1, True)], 1000)
    assert (p.freezes, p.frozen, p.played) == (1, 200 * MS, 2)
    assert p.state[0] == "ended"


def test_frames_split_anywhere_are_checked_and_counted():
    stream = b"".join(frame(i, bytes([i]) * (7 * i)) for i in range(5))
    checker = live_player.FrameChecker()
    done = sum(checker.push(stream[i : i + 3]) for i in range(0, len(stream), 3))
    checker.finish(fin=True)
    assert (done, checker.frames, checker.bad_frames, checker.missing) == (5, 5, 0, 0)
    assert checker.errors == []


def test_corruption_gaps_repeats_and_truncation_are_reported():
    checker = live_player.FrameChecker()
    checker.push(frame(0) + frame(1, crc=0) + frame(3) + frame(3) + frame(1) + frame(4))
    # Frame 2 missing; frame 1 corrupt; frame 3 and then 1 repeated (neither played twice, and
    # a repeat does not move the expected sequence back).
    assert (checker.frames, checker.bad_frames, checker.missing) == (3, 3, 1)
    assert checker.captures == [0, 0, 0]

    checker = live_player.FrameChecker()
    checker.push(frame(0)[:-4])
    checker.finish(fin=True)
    assert checker.bad_frames == 1 and "ended inside" in checker.errors[-1]

    checker = live_player.FrameChecker()
    checker.push(b"error: bad bitrate" + bytes(40))
    assert checker.framing_lost and checker.frames == 0


def test_frames_in_rounds_up_as_the_simulator_does():
    assert live_player.frames_in(1000 * MS, 30) == 30
    assert live_player.frames_in(1001 * MS, 30) == 31
    assert live_player.frames_in(0, 30) == 1
    assert struct.calcsize(">4sBBHQQII") == live_player.HEADER.size == 32
