//! CPU cost of FEC (docs/FEC.md) per MB of source data, two tables from one command:
//!
//! 1. The code alone: encoding k:m windows of 1300-byte source symbols, and decoding a window
//!    that lost as many sources as it has repairs (the most work a decoder does), for XOR
//!    (m = 1) and Reed-Solomon (m > 1).
//! 2. Every scheme over a 60 s video call at 5 % random loss, through the transport's own
//!    halves (`tests/common/fec_call.rs` describes the call): encode is the time in the
//!    sender's (the scheme's decisions and the coding), decode the time in the receiver's
//!    (keeping source symbols, collecting repairs, decoding).
//!
//! Run: `cargo run -p recoup-transport --release --example fec_bench` (from the repository, so
//! that WebRTC's rate table is found in `../shared/data/`).

use std::hint::black_box;
use std::time::Duration;

use recoup_recovery::fec::FecSpec;
use recoup_transport::fec::{decode, encode, symbol_len};

#[path = "../tests/common/fec_call.rs"]
mod fec_call;

use fec_call::{clock, video_call, CallCost};

/// Source bytes coded per measurement of table 1.
const SOURCE_BYTES: usize = 64 * 1024 * 1024;
const SYMBOL: usize = 1300;

/// Table 2's call.
const CALL: Duration = Duration::from_secs(60);
const LOSS: f64 = 0.05;
const SEED: u64 = 15;
/// Every dual-side FEC scheme (docs/FEC.md), with AutoRec §VII's settings where it gives them.
const SCHEMES: [&str; 9] = [
    "block:k=4,m=1",
    "block:k=9,m=1",
    "block:k=9,m=3",
    "block:k=16,m=4",
    "webrtc14",
    "webrtc-now",
    "hairpin:lambda=1e-4",
    "hairpin:lambda=1e-7",
    "tambur:max_ratio=0.25",
];
/// Passes per row; the fastest counts (the machine is shared).
const PASSES: usize = 3;

fn main() {
    code_table();
    println!();
    scheme_table();
}

fn code_table() {
    println!("| k:m | code | encode ms / MB | decode ms / MB (m sources lost) |");
    println!("|---|---|---|---|");
    for (k, m) in [(4, 1), (9, 1), (4, 2), (9, 3), (8, 4), (16, 4), (32, 8)] {
        let sources: Vec<Vec<u8>> = (0..k)
            .map(|i| (0..SYMBOL).map(|j| (i * 31 + j * 7) as u8).collect())
            .collect();
        let refs: Vec<&[u8]> = sources.iter().map(Vec::as_slice).collect();
        let len = symbol_len(refs.iter().copied());
        let windows = SOURCE_BYTES / (k * SYMBOL);
        let mb = (windows * k * SYMBOL) as f64 / 1e6;
        let mut best = (f64::MAX, f64::MAX);
        for _ in 0..PASSES {
            let start = clock();
            for _ in 0..windows {
                black_box(encode(black_box(&refs), m, len).expect("encode"));
            }
            let enc = start.elapsed().as_secs_f64() * 1e3 / mb;
            let repairs = encode(&refs, m, len).expect("encode");
            let lost = m.min(k);
            let present: Vec<(usize, &[u8])> = (lost..k).map(|i| (i, refs[i])).collect();
            let received: Vec<(usize, &[u8])> = repairs
                .iter()
                .enumerate()
                .map(|(j, r)| (j, r.as_slice()))
                .collect();
            let start = clock();
            for _ in 0..windows {
                let restored = decode(k, m, black_box(&present), &received, len).expect("decode");
                black_box(restored);
            }
            let dec = start.elapsed().as_secs_f64() * 1e3 / mb;
            best = (best.0.min(enc), best.1.min(dec));
        }
        let code = if m == 1 { "XOR" } else { "Reed-Solomon" };
        println!("| {k}:{m} | {code} | {:.2} | {:.2} |", best.0, best.1);
    }
}

fn scheme_table() {
    println!(
        "| scheme | source MB | repair / source bytes | encode ms / MB | decode ms / MB | \
         packets restored | restored / lost sources |"
    );
    println!("|---|---|---|---|---|---|---|");
    for name in SCHEMES {
        let spec: FecSpec = name.parse().unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut best: Option<CallCost> = None;
        for _ in 0..PASSES {
            let c = video_call(&spec, LOSS, SEED, CALL, None);
            if best
                .as_ref()
                .is_none_or(|b| c.encode + c.decode < b.encode + b.decode)
            {
                best = Some(c);
            }
        }
        let c = best.expect("at least one pass");
        let mb = c.source_bytes as f64 / 1e6;
        println!(
            "| `{name}` | {mb:.1} | {:.1} % | {:.2} | {:.2} | {} | {:.0} % |",
            100.0 * c.repair_bytes as f64 / c.source_bytes as f64,
            c.encode.as_secs_f64() * 1e3 / mb,
            c.decode.as_secs_f64() * 1e3 / mb,
            c.restored,
            100.0 * c.restored as f64 / c.sources_lost.max(1) as f64,
        );
    }
}
