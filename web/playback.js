// The playback model of recoup's live player (crates/recoup-apps/src/live.rs, LivePlayer; the
// same as tests/interop/live_player.py), on arrival times in milliseconds.
//
// Playback starts once `startup` worth of frames has arrived; then one frame every frame
// interval. If the next frame has not fully arrived when its turn comes, the picture freezes
// until `rebuffer` worth of frames is buffered again (or the stream ended and everything left
// has arrived); playback resumes then, late by the frozen time. A freeze is such a stall after
// playback started; frozen time is the time spent in stalls (one still going on at the end
// counts up to the end). Playback is computed lazily from arrival times: advancing to a time
// only ever uses frames that arrived before it, so it can be advanced for display at any moment.
"use strict";

const RecoupPlayback = (() => {
  // Whole frames in `ms` at `fps`, rounded up, at least one (recoup-apps' frames_in).
  function framesIn(ms, fps) {
    return Math.max(1, Math.ceil((ms * fps) / 1000 - 1e-9));
  }

  class Player {
    constructor(start, fps, startupMs, rebufferMs) {
      this.start = start;
      this.interval = 1000 / fps;
      this.startupFrames = framesIn(startupMs, fps);
      this.rebufferFrames = framesIn(rebufferMs, fps);
      this.buffer = []; // arrival times of frames received and not yet played
      this.head = 0; // index of the next frame to play in `buffer`
      this.state = "startup";
      this.at = null; // playing: when the next frame is due; stalled: frozen since
      this.endedAt = null;
      this.played = 0;
      this.startupDelay = null;
      this.freezes = 0;
      this.frozen = 0;
      this.session = 0;
      this.stalls = []; // [from, to] of each freeze, `to` null while it lasts
    }

    buffered() {
      return this.buffer.length - this.head;
    }

    // When `need` more frames (or, once the stream ended, all that is left) have arrived.
    bufferedAt(need) {
      if (this.buffered() >= need) return this.buffer[this.head + need - 1];
      if (this.endedAt === null) return null;
      return this.buffered() > 0
        ? Math.max(this.buffer[this.buffer.length - 1], this.endedAt)
        : this.endedAt;
    }

    // Plays out everything that happens up to `now`, given the frames received so far.
    advance(now) {
      for (;;) {
        if (this.state === "startup") {
          const t = this.bufferedAt(this.startupFrames);
          if (t !== null && this.buffered() === 0) {
            this.state = "ended";
          } else if (t !== null && t <= now) {
            this.startupDelay = t - this.start;
            this.state = "playing";
            this.at = t;
          } else {
            return;
          }
        } else if (this.state === "playing") {
          const due = this.at;
          if (due > now) return;
          if (this.buffered() > 0 && this.buffer[this.head] <= due) {
            this.head += 1;
            this.played += 1;
            this.at = due + this.interval;
          } else if (this.buffered() === 0 && this.endedAt !== null && this.endedAt <= due) {
            this.state = "ended";
          } else {
            this.freezes += 1;
            this.state = "stalled";
            this.stalls.push([due, null]);
          }
        } else if (this.state === "stalled") {
          const t = this.bufferedAt(this.rebufferFrames);
          if (t === null || Math.max(t, this.at) > now) return;
          const resume = Math.max(t, this.at);
          this.frozen += resume - this.at;
          this.stalls[this.stalls.length - 1][1] = resume;
          this.state = this.buffered() > 0 ? "playing" : "ended";
          this.at = resume;
        } else {
          return;
        }
      }
    }

    // Bytes arrived at `now`, completing `frames` frames (and ending the stream if `fin`).
    arrive(now, frames, fin) {
      // As the simulated player: what was due strictly before this arrival plays first.
      this.advance(now - 1e-6);
      for (let i = 0; i < frames; i++) this.buffer.push(now);
      if (fin) this.endedAt = now;
      if (this.head > 4096) {
        this.buffer = this.buffer.slice(this.head);
        this.head = 0;
      }
    }

    finish(now) {
      this.advance(now);
      if (this.state === "stalled") {
        this.frozen += now - this.at;
        this.stalls[this.stalls.length - 1][1] = now;
        this.at = now;
      }
      this.session = now - this.start;
    }
  }

  return { Player, framesIn };
})();
