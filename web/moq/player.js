// The MoQ page: plays one broadcast with @moq/watch's unmodified <moq-watch> element and
// measures what a viewer sees, from the player's own signals:
//
// - latency: the wall clock when a frame is presented minus the frame's wall time at the
//   publisher, which is the catalog's clock (the wall time of presentation time zero, fixed by
//   the publisher when it anchored the live source) plus the frame's presentation time: the
//   end-to-end latency from the publisher taking the frame to the screen, on one machine's
//   clock.
// - stalls: the decoder's `stalled` signal turning true after the first frame, and their total
//   duration.
// - frames dropped: presentation times skipped between two presented frames (a gap of more
//   than one frame interval at the page's `fps`).
//
// Page query: `url` (the relay, https://HOST:PORT/PATH), `name` (the broadcast), `seconds`
// (how long to measure after the first frame, default 20), `fps` (the stream's frame rate,
// default 30), `note` (a line under the title). The summary goes to `window.recoupResult` and
// <pre id="result"> when the time is up, as on recoup's other pages (tests/interop/
// chromium_player.py reads it).
import "@moq/watch/element";

const page = new URLSearchParams(location.search);
const relay = page.get("url");
const name = page.get("name") || "test";
const seconds = Number(page.get("seconds") || 20);
const fps = Number(page.get("fps") || 30);
// The page gives up when no frame came by then.
const FIRST_FRAME_TIMEOUT_MS = 20000;
const $ = (id) => document.getElementById(id);

$("note").textContent = page.get("note") || "";
$("source").textContent = relay;
$("name").textContent = name;

const latencies = [];
let presented = 0;
let dropped = 0;
let lastTimestamp;
let firstFrameAt;
let stalls = 0;
let stalledMs = 0;
let stalledSince;
let done = false;

// The moq epoch (2020-01-01) in Unix milliseconds: the catalog's clock counts from it.
const MOQ_EPOCH_UNIX_MS = 1_577_836_800_000;

// The wall clock (Unix ms) of presentation time zero, from the catalog's `clock` (hang's
// catalog: `wall` in `timescale` units since the moq epoch), which the publisher fixes when it
// anchors the live source: a frame's wall time is this plus its presentation time.
function wallOfZero() {
  const clock = watch.broadcast.out.catalog.peek()?.clock;
  if (!clock || clock.wall === undefined) return undefined;
  return MOQ_EPOCH_UNIX_MS + (clock.wall * 1000) / (clock.timescale || 1000);
}

function quantile(sorted, q) {
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function summary() {
  const sorted = [...latencies].sort((a, b) => a - b);
  const mean = sorted.length ? sorted.reduce((a, b) => a + b, 0) / sorted.length : null;
  return { mean, p95: quantile(sorted, 0.95), p50: quantile(sorted, 0.5) };
}

function show() {
  const s = summary();
  $("frames").textContent = String(presented);
  $("latency").textContent = latencies.length ? `${latencies[latencies.length - 1].toFixed(0)} ms` : "–";
  $("latency-summary").textContent = s.mean === null ? "–" : `${s.mean.toFixed(0)} / ${s.p95.toFixed(0)} ms`;
  $("stalls").textContent = `${stalls} / ${stalledMs.toFixed(0)} ms`;
  $("dropped").textContent = String(dropped);
}

function finish(failure) {
  if (done) return;
  done = true;
  const now = performance.now();
  if (stalledSince !== undefined) stalledMs += now - stalledSince;
  const s = summary();
  const result = {
    ok: !failure,
    failure: failure || null,
    webtransport: true,
    page_protocol: performance.getEntriesByType("navigation")[0]?.nextHopProtocol,
    protocol: $("protocol").textContent,
    relay,
    name,
    seconds,
    fps,
    frames_presented: presented,
    frames_dropped: dropped,
    stalls,
    stalled_ms: stalledMs,
    latency_mean_ms: s.mean,
    latency_p50_ms: s.p50,
    latency_p95_ms: s.p95,
    latency_max_ms: latencies.length ? Math.max(...latencies) : null,
    first_frame_ms: firstFrameAt,
    clock_wall_unix_ms: wallOfZero(),
  };
  $("state").textContent = failure ? "failed" : "done";
  $("verdict").textContent = failure ? `FAILED: ${failure}` : "measured";
  $("result").textContent = JSON.stringify(result, null, 1);
  window.recoupResult = result;
}

const watch = document.createElement("moq-watch");
// WebTransport only: the WebSocket fallback would bypass the QUIC path being measured.
watch.connection.websocket = { enabled: false };
watch.setAttribute("visible", "always");
watch.setAttribute("muted", "");
const canvas = document.createElement("canvas");
canvas.width = 480;
canvas.height = 270;
watch.append(canvas);
$("player").append(watch);
watch.setAttribute("name", name);
watch.setAttribute("url", relay);
$("state").textContent = "connecting";

watch.connection.established.subscribe((connection) => {
  if (connection) $("protocol").textContent = connection.version?.toString?.() ?? "connected";
});

watch.video.out.timestamp.subscribe((timestamp) => {
  if (timestamp === undefined || done) return;
  const now = performance.now();
  if (firstFrameAt === undefined) {
    firstFrameAt = now;
    $("state").textContent = "playing";
    setTimeout(() => finish(null), seconds * 1000);
  }
  presented += 1;
  const zero = wallOfZero();
  if (zero === undefined) {
    finish("the broadcast's catalog has no clock: a frame's encode time is unknown");
    return;
  }
  latencies.push(Date.now() - (zero + timestamp));
  if (lastTimestamp !== undefined) {
    const frames = Math.round(((timestamp - lastTimestamp) * fps) / 1000);
    if (frames > 1) dropped += frames - 1;
  }
  lastTimestamp = timestamp;
  show();
});

watch.video.out.stalled.subscribe((stalled) => {
  if (firstFrameAt === undefined || done) return;
  const now = performance.now();
  if (stalled && stalledSince === undefined) {
    stalls += 1;
    stalledSince = now;
  } else if (!stalled && stalledSince !== undefined) {
    stalledMs += now - stalledSince;
    stalledSince = undefined;
  }
  show();
});

setTimeout(() => {
  if (firstFrameAt === undefined) finish(`no frame within ${FIRST_FRAME_TIMEOUT_MS / 1000} s`);
}, FIRST_FRAME_TIMEOUT_MS);
