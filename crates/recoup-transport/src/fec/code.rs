//! The erasure code: XOR for one repair symbol per window (k:1), Reed-Solomon over GF(2^16)
//! through `reed-solomon-simd` for more (k:m). No field arithmetic of our own.
//!
//! Source symbols are zero-padded to the symbol length (even, as the Reed-Solomon engine
//! wants). Both sides pick the code from the window's repair count alone, so they always agree.

use std::collections::BTreeMap;

use crate::Error;

/// Pads `symbol` with zeros to `len`.
fn padded(symbol: &[u8], len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    v.extend_from_slice(symbol);
    v.resize(len, 0);
    v
}

/// The symbol length for these source symbols: the longest, rounded up to even.
#[must_use]
pub fn symbol_len<'a>(sources: impl IntoIterator<Item = &'a [u8]>) -> usize {
    let longest = sources.into_iter().map(<[u8]>::len).max().unwrap_or(0);
    longest.max(1).next_multiple_of(2)
}

/// `repairs` repair symbols of `len` bytes over `sources` (each at most `len` bytes).
pub fn encode(sources: &[&[u8]], repairs: usize, len: usize) -> Result<Vec<Vec<u8>>, Error> {
    if repairs == 1 {
        let mut out = vec![0u8; len];
        for s in sources {
            for (o, b) in out.iter_mut().zip(s.iter()) {
                *o ^= b;
            }
        }
        return Ok(vec![out]);
    }
    let padded: Vec<Vec<u8>> = sources.iter().map(|s| padded(s, len)).collect();
    reed_solomon_simd::encode(sources.len(), repairs, &padded)
        .map_err(|e| Error::FecCodec(e.to_string()))
}

/// Restores the missing source symbols of a window of `k` with `repairs` repair symbols in
/// total: `present` are the source symbols received (index in the window, bytes of at most
/// `len`), `received` the repair symbols received (repair index, `len` bytes). Returns the
/// missing ones by index, `len` bytes each (zero-padded).
pub fn decode(
    k: usize,
    repairs: usize,
    present: &[(usize, &[u8])],
    received: &[(usize, &[u8])],
    len: usize,
) -> Result<BTreeMap<usize, Vec<u8>>, Error> {
    let missing = k - present.len();
    if missing == 0 {
        return Ok(BTreeMap::new());
    }
    if missing > received.len() {
        return Err(Error::FecNotEnough {
            missing,
            repairs: received.len(),
        });
    }
    if repairs == 1 {
        // XOR of the repair and every present source is the one missing source.
        let mut out = received[0].1.to_vec();
        for (_, s) in present {
            for (o, b) in out.iter_mut().zip(s.iter()) {
                *o ^= b;
            }
        }
        let index = (0..k)
            .find(|i| !present.iter().any(|(p, _)| p == i))
            .ok_or_else(|| Error::FecCodec("no missing index".into()))?;
        return Ok(BTreeMap::from([(index, out)]));
    }
    let present: Vec<(usize, Vec<u8>)> =
        present.iter().map(|(i, s)| (*i, padded(s, len))).collect();
    reed_solomon_simd::decode(k, repairs, present, received.iter().copied())
        .map_err(|e| Error::FecCodec(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sources of varied lengths (a window mixes full packets and a frame's short tail).
    fn sources(k: usize, seed: u8) -> Vec<Vec<u8>> {
        (0..k)
            .map(|i| {
                let n = 40 + (i * 37 + usize::from(seed)) % 200;
                (0..n)
                    .map(|j| (j as u8).wrapping_mul(31) ^ seed ^ i as u8)
                    .collect()
            })
            .collect()
    }

    /// Every subset of `k + m` symbols with `lost` of them missing, as bitmasks.
    fn loss_patterns(n: usize, lost: usize) -> impl Iterator<Item = u32> {
        (0u32..1 << n).filter(move |p| p.count_ones() as usize == lost)
    }

    /// Codes a window, loses the symbols in `pattern` (bit i < k: source i, bit k + j: repair
    /// j) and decodes; returns what decoding said.
    fn round_trip(k: usize, m: usize, pattern: u32, seed: u8) -> Result<(), Error> {
        let src = sources(k, seed);
        let refs: Vec<&[u8]> = src.iter().map(Vec::as_slice).collect();
        let len = symbol_len(refs.iter().copied());
        let rep = encode(&refs, m, len)?;
        let lost = |i: usize| pattern >> i & 1 == 1;
        let present: Vec<(usize, &[u8])> =
            (0..k).filter(|&i| !lost(i)).map(|i| (i, refs[i])).collect();
        let received: Vec<(usize, &[u8])> = (0..m)
            .filter(|&j| !lost(k + j))
            .map(|j| (j, rep[j].as_slice()))
            .collect();
        let restored = decode(k, m, &present, &received, len)?;
        for i in (0..k).filter(|&i| lost(i)) {
            let got = restored.get(&i).expect("every missing source restored");
            assert_eq!(
                &got[..src[i].len()],
                &src[i][..],
                "k={k} m={m} pattern={pattern:b} source {i}"
            );
            assert!(
                got[src[i].len()..].iter().all(|&b| b == 0),
                "padding is zeros"
            );
        }
        Ok(())
    }

    #[test]
    fn every_loss_pattern_up_to_m_decodes_and_beyond_fails_cleanly() {
        // k:1 (XOR) and k:m (Reed-Solomon), every pattern of lost sources and repairs.
        for (k, m) in [(1, 1), (4, 1), (9, 1), (1, 2), (3, 2), (5, 3), (8, 4)] {
            let n = k + m;
            for lost in 0..=n {
                for pattern in loss_patterns(n, lost) {
                    let sources_lost = (pattern & ((1 << k) - 1)).count_ones() as usize;
                    let repairs_left = m - (pattern >> k).count_ones() as usize;
                    let result = round_trip(k, m, pattern, (k * 7 + m) as u8);
                    if sources_lost <= repairs_left {
                        assert_eq!(result, Ok(()), "k={k} m={m} pattern={pattern:b}");
                    } else {
                        assert_eq!(
                            result,
                            Err(Error::FecNotEnough {
                                missing: sources_lost,
                                repairs: repairs_left
                            }),
                            "k={k} m={m} pattern={pattern:b}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn symbol_length_is_the_longest_rounded_to_even() {
        assert_eq!(symbol_len([&[1u8, 2, 3][..], &[1][..]]), 4);
        assert_eq!(symbol_len([&[1u8, 2][..]]), 2);
        assert_eq!(symbol_len(std::iter::empty()), 2);
    }
}
