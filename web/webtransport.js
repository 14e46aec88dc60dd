// The WebTransport echo page: opens a WebTransport session (Chromium's `new WebTransport(url)`)
// to `recoup serve`'s echo (`--datagram-frame-size` above 0), exchanges one bidirectional stream,
// one unidirectional stream and a number of datagrams, asks for a session at an unknown path
// (which must fail: the server answers 404), closes the session, and publishes a JSON summary as
// `window.recoupResult` and in <pre id="result"> (for the DevTools protocol, as the players do).
//
// Page query: `path` (the session's path, default /webtransport/echo), `bytes` (stream bytes
// each way, default 100000), `datagrams` (how many, default 100), `size` (datagram bytes,
// default 500), `note` (a line of text shown under the title).
"use strict";

(() => {
  const page = new URLSearchParams(location.search);
  const path = page.get("path") || "/webtransport/echo";
  const streamBytes = Number(page.get("bytes") || 100000);
  const datagramCount = Number(page.get("datagrams") || 100);
  const datagramSize = Math.max(4, Number(page.get("size") || 500));
  const url = new URL(path, location.href).href;
  const $ = (id) => document.getElementById(id);
  const TIMEOUT_MS = 20000;

  // Deterministic bytes, different per seed, so an echo from the wrong stream cannot pass.
  function pattern(seed, n) {
    const b = new Uint8Array(n);
    for (let i = 0; i < n; i++) b[i] = (seed * 7 + i * 13) & 0xff;
    return b;
  }

  function equal(a, b) {
    if (a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
    return true;
  }

  // Everything a readable stream delivers, as one array.
  async function readAll(readable) {
    const reader = readable.getReader();
    const parts = [];
    let n = 0;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parts.push(value);
      n += value.length;
    }
    const all = new Uint8Array(n);
    let at = 0;
    for (const p of parts) {
      all.set(p, at);
      at += p.length;
    }
    return all;
  }

  async function write(writable, data) {
    const writer = writable.getWriter();
    await writer.write(data);
    await writer.close();
  }

  function withTimeout(promise, what) {
    let timer;
    const timeout = new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: no answer within ${TIMEOUT_MS} ms`)), TIMEOUT_MS);
    });
    return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
  }

  async function bidiEcho(wt) {
    const data = pattern(1, streamBytes);
    const stream = await wt.createBidirectionalStream();
    const [back] = await Promise.all([readAll(stream.readable), write(stream.writable, data)]);
    return { sent: data.length, echoed: back.length, intact: equal(back, data) };
  }

  async function uniEcho(wt) {
    const data = pattern(2, streamBytes);
    const incoming = wt.incomingUnidirectionalStreams.getReader();
    const sending = (async () => write(await wt.createUnidirectionalStream(), data))();
    const { value: stream } = await incoming.read();
    incoming.releaseLock();
    const [back] = await Promise.all([readAll(stream), sending]);
    return { sent: data.length, echoed: back.length, intact: equal(back, data) };
  }

  // Sends numbered datagrams, paced, and counts the intact echoes that arrive by a second after
  // the last: datagrams may be lost and are never retransmitted (RFC 9221).
  async function datagramEcho(wt) {
    const seen = new Set();
    let bad = 0;
    const reader = wt.datagrams.readable.getReader();
    let reading = true;
    const receiving = (async () => {
      while (reading) {
        const { value, done } = await reader.read();
        if (done) break;
        const n = new DataView(value.buffer, value.byteOffset).getUint32(0);
        if (value.length === datagramSize && equal(value.subarray(4), pattern(n, datagramSize).subarray(4))) {
          seen.add(n);
        } else {
          bad++;
        }
        if (seen.size === datagramCount) break;
      }
    })();
    const writer = wt.datagrams.writable.getWriter();
    for (let n = 0; n < datagramCount; n++) {
      const d = pattern(n, datagramSize);
      new DataView(d.buffer).setUint32(0, n);
      await writer.write(d);
      await new Promise((r) => setTimeout(r, 2));
    }
    writer.releaseLock();
    receiving.catch(() => {}); // a read still pending when the lock is released rejects
    await Promise.race([receiving, new Promise((r) => setTimeout(r, 1000))]);
    reading = false;
    reader.releaseLock();
    return { sent: datagramCount, echoed: seen.size, bad };
  }

  // A session at a path with nothing behind it must fail to open (404), leaving others alone.
  async function unknownPath() {
    const bad = new WebTransport(new URL(path + "-unknown", location.href).href);
    try {
      await withTimeout(bad.ready, "unknown path");
      bad.close();
      return { refused: false, error: null };
    } catch (e) {
      return { refused: true, error: String(e && e.message ? e.message : e) };
    }
  }

  function navigationProtocol() {
    const entries = performance.getEntriesByType("navigation");
    return entries.length ? entries[entries.length - 1].nextHopProtocol : null;
  }

  function show(id, r) {
    $(id).textContent = `${r.sent} / ${r.echoed}${r.intact === false ? " (differs)" : ""}`;
  }

  async function run() {
    const result = { ok: false, webtransport: true, url, page_protocol: navigationProtocol() };
    const problems = [];
    const start = performance.now();
    try {
      $("state").textContent = "connecting";
      const wt = new WebTransport(url);
      await withTimeout(wt.ready, "session");
      result.connect_ms = Math.round(performance.now() - start);
      $("state").textContent = "exchanging";
      result.bidi = await withTimeout(bidiEcho(wt), "bidirectional stream");
      show("bidi", result.bidi);
      result.uni = await withTimeout(uniEcho(wt), "unidirectional stream");
      show("uni", result.uni);
      result.datagrams = await datagramEcho(wt);
      show("datagrams", result.datagrams);
      result.unknown_path = await unknownPath();
      $("unknown").textContent = result.unknown_path.refused ? `refused: ${result.unknown_path.error}` : "accepted";
      // The session still works after the other one failed: one more bidirectional echo.
      result.after_unknown = await withTimeout(bidiEcho(wt), "bidirectional stream after the unknown path");
      wt.close({ closeCode: 7, reason: "done" });
      const closed = await withTimeout(wt.closed, "close");
      result.closed = { code: closed.closeCode, reason: closed.reason };
      $("closed").textContent = `code ${closed.closeCode} ${closed.reason}`;
      if (!result.bidi.intact) problems.push("the bidirectional echo differs");
      if (!result.uni.intact) problems.push("the unidirectional echo differs");
      if (!result.after_unknown.intact) problems.push("the echo after the unknown path differs");
      if (result.unknown_path.refused !== true) problems.push("a session at an unknown path was accepted");
      if (result.datagrams.bad > 0) problems.push(`${result.datagrams.bad} echoed datagrams differ`);
    } catch (e) {
      problems.push(String(e && e.message ? e.message : e));
    }
    result.elapsed_ms = Math.round(performance.now() - start);
    result.ok = problems.length === 0;
    result.failure = problems.length ? problems.join("; ") : null;
    $("state").textContent = result.ok ? "done" : "failed";
    $("state").className = result.ok ? "state ended" : "state failed";
    $("verdict").textContent = result.ok ? "streams echoed intact, session closed" : `failed: ${result.failure}`;
    $("verdict").className = result.ok ? "verdict ok" : "verdict bad";
    $("result").textContent = JSON.stringify(result);
    window.recoupResult = result;
  }

  $("source").textContent = url;
  $("note").textContent = page.get("note") || "";
  run();
})();
