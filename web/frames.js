// The frame format of crates/recoup-apps/src/frame.rs, parsed in the browser as bytes arrive.
//
// Every frame is a 32-byte big-endian header followed by its payload: magic "RCPF", version 1,
// kind (0 P frame, 1 I frame), 2 reserved zero bytes, sequence u64, capture time u64
// (microseconds on the server's clock), payload length u32 (at most 2^30), CRC-32 of the
// payload u32 (IEEE 802.3, as zlib's crc32).
//
// Checks match tests/interop/live_player.py: a bad checksum or a sequence gap is counted and
// parsing goes on (the header still says where the next frame starts); a bad header loses the
// framing and stops parsing. Classic script (no ES module), so it loads whatever Content-Type
// the server sends.
"use strict";

const RecoupFrames = (() => {
  const HEADER_LEN = 32;
  const MAGIC = [0x52, 0x43, 0x50, 0x46]; // "RCPF"
  const VERSION = 1;
  const MAX_PAYLOAD = 2 ** 30;
  const MAX_ERRORS = 20;

  const CRC_TABLE = (() => {
    const table = new Uint32Array(256);
    for (let n = 0; n < 256; n++) {
      let c = n;
      for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
      table[n] = c >>> 0;
    }
    return table;
  })();

  // Continues a CRC-32 (zlib's crc32(bytes, crc)) over `bytes`.
  function crc32(bytes, crc = 0) {
    let c = ~crc >>> 0;
    for (let i = 0; i < bytes.length; i++) c = CRC_TABLE[(c ^ bytes[i]) & 0xff] ^ (c >>> 8);
    return ~c >>> 0;
  }

  // A u64 field as a Number: sequence numbers and microsecond clocks stay far below 2^53.
  function u64(view, at) {
    return view.getUint32(at) * 2 ** 32 + view.getUint32(at + 4);
  }

  function hex(bytes) {
    return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  class FrameChecker {
    constructor() {
      this.head = new Uint8Array(HEADER_LEN);
      this.headLen = 0;
      this.current = null; // {sequence, capture, remaining, crc, expected, repeat}
      this.nextSequence = 0;
      this.frames = 0;
      this.bytes = 0;
      this.badFrames = 0;
      this.missing = 0;
      this.errors = [];
      this.framingLost = false;
      this.captures = []; // capture_us of every good frame, in order
      this.prefix = ""; // the stream's first bytes as text, to show a server's error line
    }

    error(message) {
      if (this.errors.length < MAX_ERRORS) this.errors.push(message);
    }

    // Consumes `data` (a Uint8Array); returns how many good frames it completed.
    push(data) {
      if (this.prefix.length < 512) {
        this.prefix += new TextDecoder().decode(data.subarray(0, 512 - this.prefix.length));
      }
      this.bytes += data.length;
      let done = 0;
      let at = 0;
      while (at < data.length && !this.framingLost) {
        if (this.current === null) {
          const take = Math.min(HEADER_LEN - this.headLen, data.length - at);
          this.head.set(data.subarray(at, at + take), this.headLen);
          this.headLen += take;
          at += take;
          if (this.headLen < HEADER_LEN) break;
          this.headLen = 0;
          done += this.startFrame();
          continue;
        }
        const f = this.current;
        const take = Math.min(f.remaining, data.length - at);
        f.crc = crc32(data.subarray(at, at + take), f.crc);
        f.remaining -= take;
        at += take;
        if (f.remaining === 0) done += this.endFrame();
      }
      return done;
    }

    startFrame() {
      const h = this.head;
      const view = new DataView(h.buffer);
      const magicOk = MAGIC.every((b, i) => h[i] === b);
      const length = view.getUint32(24);
      if (!magicOk || h[4] !== VERSION || h[5] > 1 || view.getUint16(6) || length > MAX_PAYLOAD) {
        this.badFrames += 1;
        this.framingLost = true;
        this.error(`bad header where frame ${this.nextSequence} should start: ${hex(h)}`);
        return 0;
      }
      const sequence = u64(view, 8);
      if (sequence > this.nextSequence) {
        this.missing += sequence - this.nextSequence;
        this.error(`frames ${this.nextSequence}..${sequence - 1} missing`);
      }
      const repeat = sequence < this.nextSequence;
      if (repeat) {
        // Counted bad once here; its payload is still read to keep the framing.
        this.badFrames += 1;
        this.error(`frame ${sequence} again after frame ${this.nextSequence - 1}`);
      }
      this.nextSequence = Math.max(this.nextSequence, sequence + 1);
      this.current = {
        sequence,
        capture: u64(view, 16),
        remaining: length,
        crc: 0,
        expected: view.getUint32(28),
        repeat,
      };
      return length === 0 ? this.endFrame() : 0;
    }

    endFrame() {
      const f = this.current;
      this.current = null;
      if (f.repeat) return 0;
      if (f.crc !== f.expected) {
        this.badFrames += 1;
        const got = f.crc.toString(16).padStart(8, "0");
        const want = f.expected.toString(16).padStart(8, "0");
        this.error(`frame ${f.sequence}: CRC-32 ${got}, header says ${want}`);
        return 0;
      }
      this.frames += 1;
      this.captures.push(f.capture);
      return 1;
    }

    // The stream ended (`fin`) or was given up on: checks it ended on a frame boundary.
    finish(fin) {
      if (!fin) {
        this.error("the stream did not end");
      } else if (this.current !== null || this.headLen > 0) {
        this.badFrames += 1;
        this.error(`the stream ended inside frame ${this.nextSequence - 1}`);
      }
    }
  }

  return { FrameChecker, crc32, HEADER_LEN };
})();
