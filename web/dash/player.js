// The DASH player page: dash.js plays a video-on-demand presentation or a live one, the page
// records what dash.js itself reports (segments loaded, the bitrate of each, rendered quality
// switches, buffer-empty stalls and their duration, errors, and for a live stream its live
// latency) and, when playback ends or fails, publishes a JSON summary as `window.recoupResult`
// and in <pre id="result"> (for the DevTools protocol).
//
// Page query: `mpd` (the manifest's path, default media/manifest.mpd), `abr` (`throughput`, the
// default for video on demand: dash.js's throughput rule alone, the rate-based kind of ABR ART's
// §7.5 player uses; `dynamic`: dash.js's defaults, BOLA included, the default for a live
// stream), `timeout` (s, default 120: the page reports a failure if playback has not ended by
// then), `note` (a line of text under the title), `live` (s: the manifest is a live one, and
// the page watches it for this long after playback starts, then ends its run; dash.js's own
// low-latency mode is switched on by the manifest, as any dash.js page gets it).
//
// Any dash.js error (a manifest that cannot be loaded or parsed, a segment that cannot be
// loaded after dash.js's retries) ends the page's run at once with `ok: false`, so that a
// broken presentation is reported, not waited on.
"use strict";

(() => {
  const page = new URLSearchParams(location.search);
  const mpd = new URL(page.get("mpd") || "media/manifest.mpd", location.href).href;
  const live = Number(page.get("live") || 0);
  const abr = page.get("abr") || (live ? "dynamic" : "throughput");
  const timeoutS = Number(page.get("timeout") || 120);
  const $ = (id) => document.getElementById(id);
  const video = $("video");
  const t0 = performance.now();
  const since = () => performance.now() - t0;

  const loads = []; // media segments loaded: {index, kbps, at}
  const indices = new Set();
  const errors = [];
  const stalls = []; // [start ms, end ms or null]
  const bufferSamples = []; // [ms, s buffered]
  const rendered = []; // [ms, kbps] of each quality change rendered
  const latency = []; // [ms, s]: dash.js's live latency while playing (live streams)
  let segmentDuration = null;
  let switches = 0;
  let startupMs = null;
  let ended = false;
  let done = false;
  let failure = null;
  // Set once the player runs; `finish` may come first (dash.js missing, a bad query).
  let sampler = null;
  let timer = null;
  let player = null;

  $("note").textContent = page.get("note") || "";
  $("source").textContent = mpd;
  if (typeof dashjs === "undefined") {
    failure = "dash.js did not load (dash.all.min.js missing from the site?)";
    finish();
    return;
  }
  $("version").textContent = `dash.js ${dashjs.Version}`;

  player = dashjs.MediaPlayer().create();
  const events = dashjs.MediaPlayer.events;
  if (abr === "throughput") {
    player.updateSettings({
      streaming: {
        abr: {
          rules: {
            throughputRule: { active: true },
            bolaRule: { active: false },
            insufficientBufferRule: { active: false },
            switchHistoryRule: { active: false },
            droppedFramesRule: { active: false },
            abandonRequestsRule: { active: false },
          },
        },
      },
    });
  } else if (abr !== "dynamic") {
    failure = `unknown abr=${abr} (throughput or dynamic)`;
    finish();
    return;
  }

  const kbps = (representation) =>
    representation && representation.bandwidth ? representation.bandwidth / 1000 : null;
  const openStall = () => stalls.length && stalls[stalls.length - 1][1] === null;
  const closeStall = () => {
    if (openStall()) stalls[stalls.length - 1][1] = since();
  };

  player.on(events.FRAGMENT_LOADING_COMPLETED, (e) => {
    const r = e.request || {};
    if (r.mediaType !== "video") return;
    if (e.error) {
      const status = r.url ? httpStatus(r.url) : null;
      const what = e.error.message || JSON.stringify(e.error);
      fail(`segment ${r.url || "?"} could not be loaded: ${what}${status ? ` (HTTP ${status})` : ""}`);
      return;
    }
    if (r.type !== "MediaSegment") return;
    segmentDuration = r.duration || segmentDuration;
    loads.push({ index: r.index, kbps: kbps(r.representation), at: since() });
    indices.add(r.index);
  });
  player.on(events.QUALITY_CHANGE_RENDERED, (e) => {
    if (e.mediaType !== "video") return;
    const k = kbps(e.newRepresentation);
    if (e.oldRepresentation && kbps(e.oldRepresentation) !== k) switches += 1;
    rendered.push([since(), k]);
  });
  player.on(events.BUFFER_EMPTY, (e) => {
    if (e.mediaType === "video" && startupMs !== null && !ended && !openStall()) {
      stalls.push([since(), null]);
    }
  });
  player.on(events.BUFFER_LOADED, (e) => {
    if (e.mediaType === "video") closeStall();
  });
  player.on(events.PLAYBACK_PLAYING, () => {
    if (startupMs === null) {
      startupMs = since();
      // A live stream has no end: the page watches it for `live` seconds of wall time.
      if (live) setTimeout(() => ((ended = true), closeStall(), finish()), live * 1000);
    }
  });
  player.on(events.PLAYBACK_ENDED, () => {
    ended = true;
    closeStall();
    finish();
  });
  player.on(events.ERROR, (e) => {
    const err = e.error || {};
    const url = err.data && err.data.request ? err.data.request.url : null;
    const status = url ? httpStatus(url) : null;
    const message = err.message || JSON.stringify(err);
    fail(`dash.js error ${err.code ?? "?"}: ${message}${status ? ` (HTTP ${status})` : ""}`);
  });

  // The HTTP status of the last fetch of `url` (Resource Timing's responseStatus), if known.
  function httpStatus(url) {
    const entries = performance.getEntriesByName(url);
    const last = entries[entries.length - 1];
    return last && last.responseStatus ? last.responseStatus : null;
  }

  function fail(text) {
    errors.push(text);
    failure = failure || text;
    finish();
  }

  // Resource Timing's next-hop protocol of the page and of the media segments (the ALPN, "h3"
  // for HTTP/3); segments fetched over several protocols are listed.
  function protocols() {
    const entries = performance.getEntriesByType("resource");
    const nav = performance.getEntriesByType("navigation")[0];
    const segs = new Set(
      entries.filter((e) => /\.m4s(\?|$)/.test(e.name)).map((e) => e.nextHopProtocol || "?"),
    );
    return {
      page: nav ? nav.nextHopProtocol : "?",
      segments: segs.size ? [...segs].sort().join("+") : "none",
    };
  }

  function summary() {
    const known = loads.filter((l) => l.kbps !== null);
    const mean = known.length ? known.reduce((s, l) => s + l.kbps, 0) / known.length : null;
    const duration = Number.isFinite(video.duration) ? video.duration : null;
    const proto = protocols();
    // dash.js can report the buffer empty and then loaded again within a millisecond (a CI run
    // of the dash.js test saw one such stall): `stall_ms` rounds it to 0, `stall_each_ms` keeps
    // each stall at 0.1 ms.
    const stallEach = stalls.map(([a, b]) => (b ?? since()) - a);
    const stallMs = stallEach.reduce((s, d) => s + d, 0);
    const lat = latency.map(([, l]) => l).sort((a, b) => a - b);
    const q = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(p * lat.length))] : null);
    const r3 = (x) => (x === null ? null : Math.round(x * 1000) / 1000);
    return {
      ok: ended && failure === null,
      failure,
      errors,
      dashjs_version: typeof dashjs === "undefined" ? null : dashjs.Version,
      mpd,
      abr,
      segments: indices.size,
      segment_loads: loads.length,
      segment_duration_s: segmentDuration,
      segments_expected:
        !live && duration && segmentDuration
          ? Math.ceil(duration / segmentDuration - 1e-6)
          : null,
      live_s: live || null,
      latency_samples: lat.length,
      latency_mean_s: lat.length ? r3(lat.reduce((s, l) => s + l, 0) / lat.length) : null,
      latency_p50_s: r3(q(0.5)),
      latency_p95_s: r3(q(0.95)),
      latency_max_s: r3(lat.length ? lat[lat.length - 1] : null),
      target_latency_s: live ? r3(player.getTargetLiveDelay ? player.getTargetLiveDelay() : null) : null,
      bitrate_kbps: mean === null ? null : Math.round(mean * 10) / 10,
      segment_kbps: loads.map((l) => l.kbps),
      bitrate_switches: switches,
      stalls: stalls.length,
      stall_ms: Math.round(stallMs),
      stall_each_ms: stallEach.map((d) => Math.round(d * 10) / 10),
      startup_ms: startupMs === null ? null : Math.round(startupMs),
      played_s: Math.round(video.currentTime * 1000) / 1000,
      duration_s: duration,
      wall_s: Math.round(since()) / 1000,
      page_protocol: proto.page,
      stream_protocol: proto.segments,
    };
  }

  function render() {
    const s = summary();
    const state = done
      ? failure
        ? "failed"
        : "ended"
      : openStall()
        ? "stalled"
        : startupMs === null
          ? "loading"
          : "playing";
    $("state").textContent = state;
    $("state").className = `state ${state}`;
    $("segments").textContent = `${s.segments} / ${s.segments_expected ?? "?"}`;
    $("bitrate").textContent = s.bitrate_kbps === null ? "–" : `${s.bitrate_kbps.toFixed(0)} kbit/s`;
    $("switches").textContent = s.bitrate_switches;
    $("stalls").textContent = s.stalls;
    $("stalltime").textContent = `${s.stall_ms} ms`;
    $("startup").textContent = s.startup_ms === null ? "–" : `${s.startup_ms} ms`;
    $("played").textContent = live
      ? `live, at ${s.played_s.toFixed(1)} s of its timeline`
      : `${s.played_s.toFixed(1)} s / ${s.duration_s ? s.duration_s.toFixed(1) : "?"} s`;
    $("latency").textContent =
      s.latency_mean_s === null
        ? "–"
        : `${s.latency_mean_s.toFixed(2)} s mean, ${s.latency_p95_s.toFixed(2)} s p95`;
    $("protocol").textContent = `${s.page_protocol} / ${s.stream_protocol}`;
    draw();
    return s;
  }

  function draw() {
    const c = $("chart");
    const g = c.getContext("2d");
    const w = c.width;
    const h = c.height;
    const pad = 36;
    g.clearRect(0, 0, w, h);
    const span = Math.max(10_000, since());
    const maxBuf = Math.max(8, ...bufferSamples.map(([, b]) => b));
    const maxKbps = Math.max(1, ...rendered.map(([, k]) => k || 0));
    const x = (ms) => pad + ((w - 2 * pad) * ms) / span;
    const yb = (b) => h - pad / 2 - ((h - pad) * b) / maxBuf;
    const yk = (k) => h - pad / 2 - ((h - pad) * k) / maxKbps;
    g.fillStyle = "rgba(200, 30, 30, 0.25)";
    for (const [a, b] of stalls) g.fillRect(x(a), 0, Math.max(2, x(b ?? since()) - x(a)), h);
    g.strokeStyle = "#2a6fb0";
    g.lineWidth = 2;
    g.beginPath();
    bufferSamples.forEach(([t, b], i) => (i ? g.lineTo(x(t), yb(b)) : g.moveTo(x(t), yb(b))));
    g.stroke();
    g.strokeStyle = "#1b7a2c";
    g.beginPath();
    rendered.forEach(([t, k], i) => {
      if (i) g.lineTo(x(t), yk(rendered[i - 1][1] || 0));
      if (i) g.lineTo(x(t), yk(k || 0));
      else g.moveTo(x(t), yk(k || 0));
    });
    if (rendered.length) g.lineTo(x(since()), yk(rendered[rendered.length - 1][1] || 0));
    g.stroke();
    g.fillStyle = "#555";
    g.font = "11px DejaVu Sans";
    g.fillText(`${maxBuf.toFixed(0)} s buffered`, 4, 12);
    g.fillText(`${maxKbps.toFixed(0)} kbit/s`, w - 90, 12);
    g.fillText(`${(span / 1000).toFixed(0)} s`, w - pad, h - 4);
  }

  function finish() {
    if (done) return;
    done = true;
    clearInterval(sampler);
    clearTimeout(timer);
    const s = render();
    const what = live ? `played ${live} s live, latency ${s.latency_mean_s} s mean` : "played to the end";
    $("verdict").textContent = s.ok
      ? `${what}: ${s.stalls} stalls, ${s.stall_ms} ms stalled, ${s.bitrate_kbps} kbit/s`
      : `failed: ${failure || "playback did not end"}`;
    $("verdict").className = `verdict ${s.ok ? "ok" : "bad"}`;
    $("result").textContent = JSON.stringify(s);
    window.recoupResult = s;
    if (failure !== null && player) {
      // Stop dash.js's retries; a finished player keeps its last picture on the page.
      try {
        player.reset();
      } catch (_) {
        // A player that failed to initialize has nothing to reset.
      }
    }
  }

  sampler = setInterval(() => {
    if (startupMs !== null || Number.isFinite(video.duration)) {
      bufferSamples.push([since(), player.getDashMetrics().getCurrentBufferLevel("video") || 0]);
    }
    if (live && startupMs !== null && !done && !video.paused) {
      const l = player.getCurrentLiveLatency();
      if (Number.isFinite(l) && l > 0) latency.push([since(), l]);
    }
    render();
  }, 250);
  timer = setTimeout(() => {
    failure = failure || `playback did not end within ${timeoutS} s`;
    finish();
  }, timeoutS * 1000);

  // The manifest is checked with the browser's own XML parser before dash.js sees it: dash.js
  // 5.2.1 never returns from parsing some malformed manifests (the page stops answering), so
  // a missing, empty or malformed MPD is reported here, naming what is wrong.
  async function checkManifest() {
    const response = await fetch(mpd, { cache: "no-store" });
    if (!response.ok) return `manifest ${mpd}: HTTP ${response.status}`;
    const doc = new DOMParser().parseFromString(await response.text(), "application/xml");
    const error = doc.querySelector("parsererror");
    if (error) {
      // Chromium puts the parser's message in a <div> between two lines of its own.
      const detail = (error.querySelector("div") || error).textContent.trim();
      return `manifest ${mpd} is not well-formed XML: ${detail}`;
    }
    const root = doc.documentElement.localName;
    return root === "MPD" ? null : `manifest ${mpd}: its root element is <${root}>, not <MPD>`;
  }

  checkManifest().then(
    (problem) => (problem ? fail(problem) : player.initialize(video, mpd, true)),
    (e) => fail(`manifest ${mpd} could not be fetched: ${e}`),
  );
})();
