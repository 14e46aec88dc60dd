//! CPU cost of FEC coding (docs/FEC.md) per MB of source data: encoding k:m windows of
//! 1300-byte source symbols, and decoding a window that lost as many sources as it has
//! repairs (the most work a decoder does), for XOR (m = 1) and Reed-Solomon (m > 1).
//!
//! Run: `cargo run -p recoup-transport --release --example fec_bench`

use std::hint::black_box;

use recoup_transport::fec::{decode, encode, symbol_len};

/// Source bytes coded per measurement.
const SOURCE_BYTES: usize = 64 * 1024 * 1024;
const SYMBOL: usize = 1300;

#[expect(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall-clock time"
)]
fn main() {
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
        for _ in 0..3 {
            let start = std::time::Instant::now();
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
            let start = std::time::Instant::now();
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
