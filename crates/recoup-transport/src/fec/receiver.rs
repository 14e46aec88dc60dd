//! The receiving half: keeps the source symbols of recent packets and the repair symbols of
//! open windows, and restores a window's missing source symbols once enough repairs arrived.

use std::collections::{BTreeMap, HashMap};

use recoup_recovery::fec::MAX_WINDOW_SPAN;

use super::code;
use crate::error::{transport_err, TransportError};
use crate::frame::RepairFrame;

/// Source symbols and open windows are kept for this many packet numbers behind the largest
/// received: repairs for older windows come too late to help and are ignored.
const HOLD_SPAN: u64 = 4 * MAX_WINDOW_SPAN;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct WindowKey {
    first_pn: u64,
    span: u64,
    window: u128,
    repairs: u16,
}

#[derive(Debug)]
struct OpenWindow {
    len: usize,
    /// Repair symbols received, by index.
    repairs: Vec<(usize, Vec<u8>)>,
}

/// A source symbol restored from repair symbols: packet `pn`'s STREAM frames, zero-padded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restored {
    pub pn: u64,
    pub symbol: Vec<u8>,
}

/// The receiving half of FEC for one connection.
#[derive(Debug, Default)]
pub struct FecReceiver {
    /// Source symbols of packets received or restored, by packet number.
    symbols: BTreeMap<u64, Vec<u8>>,
    windows: HashMap<WindowKey, OpenWindow>,
    largest: u64,
}

impl FecReceiver {
    /// Packet `pn` arrived (or was restored) carrying the STREAM frames `symbol`.
    pub fn on_source(&mut self, pn: u64, symbol: Vec<u8>) {
        self.symbols.insert(pn, symbol);
        if pn > self.largest {
            self.largest = pn;
            let horizon = pn.saturating_sub(HOLD_SPAN);
            self.symbols = self.symbols.split_off(&horizon);
            self.windows.retain(|k, _| k.first_pn >= horizon);
        }
    }

    /// A REPAIR frame arrived in packet `carrier`. Returns the source symbols it completes.
    pub fn on_repair(
        &mut self,
        carrier: u64,
        frame: &RepairFrame<'_>,
    ) -> Result<Vec<Restored>, TransportError> {
        let last = frame.first_pn + frame.span - 1;
        if last >= carrier {
            // A repair goes out after its sources: this one protects data never sent.
            return Err(transport_err!(
                PROTOCOL_VIOLATION,
                "REPAIR in packet {carrier} covers packet {last}, not sent before it"
            ));
        }
        let len = frame.symbol.len();
        let pns: Vec<u64> = frame.window_pns().collect();
        for (i, pn) in pns.iter().enumerate() {
            if let Some(s) = self.symbols.get(pn) {
                if s.len() > len {
                    return Err(transport_err!(
                        PROTOCOL_VIOLATION,
                        "REPAIR symbol of {len} bytes shorter than source {i} (packet {pn}, {} bytes)",
                        s.len()
                    ));
                }
            }
        }
        if frame.first_pn + HOLD_SPAN < self.largest {
            return Ok(Vec::new());
        }
        let key = WindowKey {
            first_pn: frame.first_pn,
            span: frame.span,
            window: frame.window,
            repairs: frame.repairs,
        };
        let open = self.windows.entry(key).or_insert_with(|| OpenWindow {
            len,
            repairs: Vec::new(),
        });
        if open.len != len {
            return Err(transport_err!(
                PROTOCOL_VIOLATION,
                "REPAIR symbols of one window with lengths {} and {len}",
                open.len
            ));
        }
        let index = usize::from(frame.index);
        if !open.repairs.iter().any(|(i, _)| *i == index) {
            open.repairs.push((index, frame.symbol.to_vec()));
        }
        let present: Vec<(usize, &[u8])> = pns
            .iter()
            .enumerate()
            .filter_map(|(i, pn)| self.symbols.get(pn).map(|s| (i, s.as_slice())))
            .collect();
        let missing = pns.len() - present.len();
        if missing == 0 {
            self.windows.remove(&key);
            return Ok(Vec::new());
        }
        if missing > open.repairs.len() {
            return Ok(Vec::new());
        }
        let received: Vec<(usize, &[u8])> = open
            .repairs
            .iter()
            .map(|(i, s)| (*i, s.as_slice()))
            .collect();
        let restored = code::decode(
            pns.len(),
            usize::from(frame.repairs),
            &present,
            &received,
            len,
        )
        .map_err(|e| transport_err!(PROTOCOL_VIOLATION, "REPAIR window cannot be decoded: {e}"))?;
        self.windows.remove(&key);
        Ok(restored
            .into_iter()
            .map(|(i, symbol)| Restored { pn: pns[i], symbol })
            .collect())
    }
}
