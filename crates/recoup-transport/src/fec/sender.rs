//! The sending half: keeps the recent source symbols, asks the scheme for repairs, codes them
//! and hands them out one per packet.

use std::collections::{HashMap, VecDeque};

use recoup_recovery::fec::{FecContext, RepairRequest, SourcePacket, MAX_WINDOW_SPAN};
use recoup_recovery::{Fec, FecScheme, SendKind, SentRange};
use recoup_time::Instant;

use super::code;

/// Source symbols are kept for this many packet numbers after they were sent: a repair
/// request may name any of them (a window spans at most [`MAX_WINDOW_SPAN`]).
const HOLD_SPAN: u64 = 2 * MAX_WINDOW_SPAN;
/// Stream deadlines kept before past ones are dropped (one per video frame in flight).
const MAX_DEADLINES: usize = 1024;

/// One coded repair symbol waiting for a packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodedRepair {
    pub first_pn: u64,
    pub span: u64,
    pub window: u128,
    pub repairs: u16,
    pub index: u16,
    pub symbol: Vec<u8>,
}

/// The sending half of FEC for one connection (active only once the peer announced that it
/// decodes).
#[derive(Debug)]
pub struct FecSender {
    scheme: Fec,
    /// Source symbols by packet number, ascending.
    symbols: VecDeque<(u64, Vec<u8>)>,
    /// Repair symbols coded and not yet sent.
    coded: VecDeque<CodedRepair>,
    /// Playout deadlines the application gave streams.
    deadlines: HashMap<u64, Instant>,
}

impl FecSender {
    #[must_use]
    pub fn new(scheme: Fec) -> Self {
        Self {
            scheme,
            symbols: VecDeque::new(),
            coded: VecDeque::new(),
            deadlines: HashMap::new(),
        }
    }

    pub fn scheme(&self) -> &Fec {
        &self.scheme
    }

    pub fn scheme_mut(&mut self) -> &mut Fec {
        &mut self.scheme
    }

    pub fn set_deadline(&mut self, stream: u64, deadline: Instant) {
        self.deadlines.insert(stream, deadline);
    }

    /// A packet carrying stream data (`symbol`: its STREAM frames, as [`super::source_symbol`]
    /// writes them) was sent.
    pub fn on_source_sent(
        &mut self,
        now: Instant,
        pn: u64,
        kind: SendKind,
        ranges: &[SentRange],
        fins: u64,
        symbol: Vec<u8>,
    ) {
        if self.deadlines.len() > MAX_DEADLINES {
            // Past deadlines tell a scheme nothing it can still act on.
            self.deadlines.retain(|_, d| *d > now);
        }
        let deadline = ranges
            .iter()
            .filter_map(|r| self.deadlines.get(&r.range.stream).copied())
            .min();
        self.scheme.on_source_sent(
            now,
            &SourcePacket {
                pn,
                sent: now,
                symbol_bytes: symbol.len(),
                kind,
                ranges,
                fins,
                deadline,
            },
        );
        self.symbols.push_back((pn, symbol));
        while self
            .symbols
            .front()
            .is_some_and(|&(old, _)| old + HOLD_SPAN <= pn)
        {
            self.symbols.pop_front();
        }
    }

    /// The next repair symbol to send, coding the scheme's next request if none is waiting.
    pub fn peek(&mut self, now: Instant, ctx: &FecContext) -> Option<&CodedRepair> {
        while self.coded.is_empty() {
            let request = self.scheme.poll_repair(now, ctx)?;
            self.code(&request);
        }
        self.coded.front()
    }

    /// The repair symbol [`FecSender::peek`] returned went out.
    pub fn pop(&mut self) {
        self.coded.pop_front();
    }

    /// Codes `request` over the symbols still held (a request for others is narrowed to these;
    /// nothing is coded if none is left).
    fn code(&mut self, request: &RepairRequest) {
        let held: Vec<(u64, &[u8])> = request
            .window
            .iter()
            .filter_map(|pn| {
                let i = self.symbols.binary_search_by_key(pn, |(p, _)| *p).ok()?;
                Some((*pn, self.symbols[i].1.as_slice()))
            })
            .collect();
        let (Some(&(first, _)), Some(&(last, _))) = (held.first(), held.last()) else {
            return;
        };
        if last - first >= MAX_WINDOW_SPAN || request.repairs == 0 {
            tracing::debug!(
                ?request,
                "FEC scheme asked for a window no repair frame can name"
            );
            return;
        }
        let window = held.iter().fold(0u128, |w, (pn, _)| w | 1 << (pn - first));
        let sources: Vec<&[u8]> = held.iter().map(|(_, s)| *s).collect();
        let len = code::symbol_len(sources.iter().copied());
        let repairs = match code::encode(&sources, usize::from(request.repairs), len) {
            Ok(r) => r,
            Err(e) => {
                tracing::warn!(error = %e, "FEC encoding failed; window not protected");
                return;
            }
        };
        for (index, symbol) in repairs.into_iter().enumerate() {
            self.coded.push_back(CodedRepair {
                first_pn: first,
                span: last - first + 1,
                window,
                repairs: request.repairs,
                index: index as u16,
                symbol,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use recoup_recovery::fec::{BlockConfig, BlockFec};
    use recoup_recovery::SendState;

    fn t(ms: u64) -> Instant {
        Instant::from_nanos(ms * 1_000_000)
    }

    fn ctx() -> FecContext {
        FecContext {
            state: SendState::OnMode,
            rtt: None,
            cwnd: 1 << 20,
            bytes_in_flight: 0,
        }
    }

    #[test]
    fn a_block_is_coded_into_m_repair_symbols_naming_its_window() {
        let mut s = FecSender::new(Fec::Block(BlockFec::new(BlockConfig {
            k: 3,
            m: 2,
            flush: false,
        })));
        for (pn, len) in [(5u64, 10usize), (6, 3), (9, 7)] {
            s.on_source_sent(t(0), pn, SendKind::New, &[], 0, vec![pn as u8; len]);
        }
        let r = s.peek(t(0), &ctx()).unwrap().clone();
        assert_eq!((r.first_pn, r.span, r.window), (5, 5, 0b10011));
        assert_eq!((r.repairs, r.index, r.symbol.len()), (2, 0, 10));
        s.pop();
        assert_eq!(s.peek(t(0), &ctx()).unwrap().index, 1);
        s.pop();
        assert!(s.peek(t(0), &ctx()).is_none());
    }
}
