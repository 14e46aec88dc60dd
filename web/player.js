// The live player page: reads a recoup live stream with streaming fetch, checks every frame
// (frames.js), plays it back with recoup's player model (playback.js), shows what happens and,
// when the stream ends, publishes a JSON summary as `window.recoupResult` and in
// <pre id="result"> (for the DevTools protocol or --dump-dom).
//
// Page query: `stream` (the stream's path and query, default /live/browser?duration=20s),
// `fps` (default: the stream query's, else measured from the first frames' capture times),
// `startup` and `rebuffer` (ms, default 1000 and 500, as recoup's player), `note` (a line of
// text shown under the title, e.g. the server's policy and the path).
"use strict";

(() => {
  const page = new URLSearchParams(location.search);
  const streamPath = page.get("stream") || "/live/browser?duration=20s";
  const streamUrl = new URL(streamPath, location.href);
  const startupMs = Number(page.get("startup") || 1000);
  const rebufferMs = Number(page.get("rebuffer") || 500);
  const $ = (id) => document.getElementById(id);
  // Frames whose capture times give the frame rate when neither query names it.
  const FPS_FRAMES = 10;

  // recoup's duration syntax (`20s`, `500ms`) in ms; null if not understood.
  function parseDurationMs(text) {
    const m = /^([0-9.]+)(ms|us|ns|s)$/.exec(text || "");
    if (!m) return null;
    const scale = { s: 1000, ms: 1, us: 1e-3, ns: 1e-6 }[m[2]];
    const v = Number(m[1]) * scale;
    return Number.isFinite(v) ? v : null;
  }

  const checker = new RecoupFrames.FrameChecker();
  const arrivals = []; // [ms since start, good frames completed, fin]
  const samples = []; // [ms since start, seconds buffered] for the chart
  let start = null;
  let fps = Number(page.get("fps") || streamUrl.searchParams.get("fps")) || null;
  let player = null;
  let fin = false;
  let failure = null;
  let done = false;

  // The player starts once the frame rate is known, replaying what arrived before.
  function ensurePlayer() {
    if (player || !fps) return player;
    player = new RecoupPlayback.Player(0, fps, startupMs, rebufferMs);
    for (const [t, n, end] of arrivals) player.arrive(t, n, end);
    return player;
  }

  function onBytes(now, data, end) {
    const frames = data ? checker.push(data) : 0;
    arrivals.push([now, frames, end]);
    if (!fps && (checker.captures.length >= FPS_FRAMES || (end && checker.captures.length))) {
      const c = checker.captures;
      const span = c[c.length - 1] - c[0];
      fps = span > 0 ? Math.max(1, Math.round(((c.length - 1) * 1e6) / span)) : 30;
    }
    if (player) player.arrive(now, frames, end);
    else ensurePlayer();
  }

  function elapsed() {
    return performance.now() - start;
  }

  async function read() {
    start = performance.now();
    const response = await fetch(streamUrl, { cache: "no-store" });
    if (!response.ok) {
      const text = (await response.text()).trim().slice(0, 200);
      throw new Error(`HTTP ${response.status} for ${streamPath}: ${text}`);
    }
    const reader = response.body.getReader();
    for (;;) {
      const { value, done: end } = await reader.read();
      if (end) {
        fin = true;
        onBytes(elapsed(), null, true);
        return;
      }
      onBytes(elapsed(), value, false);
    }
  }

  // The protocol Chromium's network stack used for `url` (Resource Timing's nextHopProtocol).
  function protocolOf(url) {
    const entries = url
      ? performance.getEntriesByName(url)
      : performance.getEntriesByType("navigation");
    return entries.length ? entries[entries.length - 1].nextHopProtocol : null;
  }

  function expectedFrames() {
    const duration = parseDurationMs(streamUrl.searchParams.get("duration"));
    return duration !== null && fps ? RecoupPlayback.framesIn(duration, fps) : null;
  }

  function summary() {
    const p = ensurePlayer();
    const session = p ? p.session / 1000 : 0;
    const expected = expectedFrames();
    if (fin && !checker.framingLost && expected !== null && checker.nextSequence < expected) {
      checker.missing += expected - checker.nextSequence;
      checker.error(`frames ${checker.nextSequence}..${expected - 1} never came`);
    }
    if (checker.framingLost && checker.frames === 0 && checker.prefix.startsWith("error:")) {
      failure = `server refused: ${checker.prefix.trim()}`;
    }
    const ok =
      failure === null &&
      fin &&
      checker.frames > 0 &&
      checker.badFrames === 0 &&
      checker.missing === 0 &&
      checker.errors.length === 0;
    return {
      ok,
      frames: checker.frames,
      expected_frames: expected,
      bytes: checker.bytes,
      bad_frames: checker.badFrames,
      missing_frames: checker.missing,
      frames_played: p ? p.played : 0,
      fps,
      startup_ms: p && p.startupDelay !== null ? p.startupDelay : null,
      freezes: p ? p.freezes : 0,
      frozen_ms: p ? p.frozen : 0,
      freezes_per_100s: session > 0 ? (p.freezes * 100) / session : null,
      frozen_ms_per_100s: session > 0 ? (p.frozen * 100) / session : null,
      duration: session,
      fin,
      errors: checker.errors,
      failure,
      page_protocol: protocolOf(null),
      stream_protocol: protocolOf(streamUrl.href),
      user_agent: navigator.userAgent,
      startup_setting_ms: startupMs,
      rebuffer_setting_ms: rebufferMs,
      arrivals,
      // With `arrivals`, each frame's delay from its capture (the sender's wall clock, in us)
      // to its arrival here: arrival times are ms after `start_epoch_ms` on this clock.
      captures: checker.captures,
      start_epoch_ms: performance.timeOrigin + start,
    };
  }

  function show(now) {
    const p = ensurePlayer();
    // Up to just before now (an arrival at now plays first); after the FIN, `publish` finishes
    // the session at the FIN's arrival, so the display must not play past it.
    if (p && !done && !fin) p.advance(now - 1e-3);
    // The model keeps playing what is buffered after the FIN; the page stops measuring there.
    const state = done ? (fin && !failure ? "ended" : "failed") : p ? p.state : "starting";
    const buffered = p ? p.buffered() / fps : 0;
    samples.push([now, buffered]);
    $("state").textContent = failure ? "failed" : state;
    $("state").className = `state ${failure ? "failed" : state}`;
    $("frames").textContent = `${checker.frames}` + (expectedFrames() ? ` / ${expectedFrames()}` : "");
    $("played").textContent = p ? p.played : 0;
    $("freezes").textContent = p ? p.freezes : 0;
    $("frozen").textContent = p ? `${Math.round(p.frozen)} ms` : "0 ms";
    $("startup").textContent = p && p.startupDelay !== null ? `${Math.round(p.startupDelay)} ms` : "–";
    $("bad").textContent = `${checker.badFrames} / ${checker.missing}`;
    $("mbytes").textContent = (checker.bytes / 1e6).toFixed(2);
    $("protocol").textContent = `${protocolOf(null) || "?"} / ${protocolOf(streamUrl.href) || "…"}`;
    $("picture").textContent = p ? `#${Math.max(0, p.played - 1)}` : "";
    $("picture").style.background = p && p.played ? `hsl(${(p.played * 7) % 360} 45% 35%)` : "#222";
    $("picture").classList.toggle("frozen", state === "stalled");
    drawChart(p, now);
  }

  function drawChart(p, now) {
    const canvas = $("chart");
    const ctx = canvas.getContext("2d");
    const { width, height } = canvas;
    const pad = { l: 44, r: 10, t: 10, b: 26 };
    const durationMs = parseDurationMs(streamUrl.searchParams.get("duration"));
    const span = Math.max(now, (durationMs || 0) + startupMs + 500, 1000);
    const top = Math.max(2, ...samples.map((s) => s[1]));
    const x = (t) => pad.l + ((width - pad.l - pad.r) * t) / span;
    const y = (v) => height - pad.b - ((height - pad.t - pad.b) * v) / top;
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, width, height);
    ctx.fillStyle = "rgba(220, 40, 40, 0.25)";
    for (const [from, to] of p ? p.stalls : []) {
      ctx.fillRect(x(from), pad.t, x(to === null ? now : to) - x(from), height - pad.t - pad.b);
    }
    ctx.strokeStyle = "#999";
    ctx.fillStyle = "#333";
    ctx.font = "12px sans-serif";
    ctx.beginPath();
    ctx.moveTo(pad.l, pad.t);
    ctx.lineTo(pad.l, height - pad.b);
    ctx.lineTo(width - pad.r, height - pad.b);
    ctx.stroke();
    for (let s = 0; s * 1000 <= span; s += Math.max(1, Math.ceil(span / 10000))) {
      ctx.fillText(`${s}s`, x(s * 1000) - 6, height - 8);
    }
    for (let v = 0; v <= top; v += Math.max(1, Math.ceil(top / 4))) {
      ctx.fillText(`${v}s`, 8, y(v) + 4);
    }
    ctx.strokeStyle = "#1f6fb4";
    ctx.lineWidth = 2;
    ctx.beginPath();
    samples.forEach(([t, v], i) => (i ? ctx.lineTo(x(t), y(v)) : ctx.moveTo(x(t), y(v))));
    ctx.stroke();
    ctx.lineWidth = 1;
  }

  function publish() {
    done = true;
    const end = elapsed();
    const p = ensurePlayer();
    if (p) p.finish(fin ? arrivals[arrivals.length - 1][0] : end);
    checker.finish(fin);
    const result = summary();
    show(end);
    $("result").textContent = JSON.stringify({ ...result, arrivals: `${arrivals.length} reads` });
    $("verdict").textContent = result.ok ? "stream complete, every frame intact" : `failed: ${result.failure || result.errors[0]}`;
    $("verdict").className = result.ok ? "verdict ok" : "verdict bad";
    window.recoupResult = result;
  }

  $("source").textContent = streamUrl.href;
  $("note").textContent = page.get("note") || "";
  const timer = setInterval(() => start !== null && show(elapsed()), 100);
  read()
    .catch((e) => {
      failure = `${e.name}: ${e.message}`;
    })
    // Resource Timing records the stream's entry just after its body ends.
    .then(() => new Promise((resolve) => setTimeout(resolve, 50)))
    .then(() => {
      clearInterval(timer);
      publish();
    });
})();
