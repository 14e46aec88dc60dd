//! `recoup link --log FILE`: the downlink's per-packet log in the format of Mahimahi's
//! `mm-link --downlink-log`, so mm-graph and scripts written for it read ours.
//!
//! After `#` comment lines (the init timestamp: the wall clock at time 0, ms since the Unix
//! epoch), one line per event, times in integer milliseconds since time 0:
//! `T + BYTES` a datagram arrived at the link, `T - BYTES DELAY` it left the link after
//! `DELAY` ms. (mm-link also logs `T # BYTES`, a delivery opportunity of its trace-driven link;
//! our elements have none to log.) A datagram dropped by a loss model or a queue has an arrival
//! and no departure.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use recoup_time::Instant;

use crate::error::Error;

/// Appends events to the log file.
#[derive(Debug)]
pub struct LinkLog {
    out: BufWriter<File>,
    failed: bool,
}

fn ms(t: Instant) -> u64 {
    t.saturating_duration_since(Instant::ZERO).as_millis() as u64
}

impl LinkLog {
    /// Creates `path` and writes the header; `init_unix_ms` is the wall clock at time 0.
    pub fn create(path: &Path, init_unix_ms: f64) -> Result<Self, Error> {
        let file =
            File::create(path).map_err(|e| Error::io(format!("link log {}", path.display()), e))?;
        let mut log = Self {
            out: BufWriter::new(file),
            failed: false,
        };
        log.line(format_args!(
            "# recoup link (downlink) > {}\n# init timestamp: {}\n# base timestamp: 0",
            path.display(),
            init_unix_ms.round() as u64
        ));
        Ok(log)
    }

    /// A datagram of `bytes` entered the link at `at`.
    pub fn arrival(&mut self, at: Instant, bytes: usize) {
        self.line(format_args!("{} + {bytes}", ms(at)));
    }

    /// A datagram of `bytes` that arrived at `arrived` left the link at `left`.
    pub fn departure(&mut self, left: Instant, bytes: usize, arrived: Instant) {
        let delay = left.saturating_duration_since(arrived).as_millis();
        self.line(format_args!("{} - {bytes} {delay}", ms(left)));
    }

    fn line(&mut self, args: std::fmt::Arguments<'_>) {
        if self.failed {
            return;
        }
        if writeln!(self.out, "{args}").is_err() {
            tracing::warn!("link log: write failed; logging stops");
            self.failed = true;
        }
    }

    /// Flushes the file (when the relay stops).
    pub fn flush(&mut self) {
        if !self.failed && self.out.flush().is_err() {
            tracing::warn!("link log: flush failed");
            self.failed = true;
        }
    }
}

/// One event of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogEvent {
    Arrival { ms: u64, bytes: u64 },
    Departure { ms: u64, bytes: u64, delay_ms: u64 },
    Opportunity { ms: u64, bytes: u64 },
}

/// Reads a log in mm-link's format (ours or Mahimahi's): the init timestamp and the events.
/// A malformed line is an error naming its number.
pub fn parse(text: &str) -> Result<(Option<u64>, Vec<LogEvent>), String> {
    let mut init = None;
    let mut events = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || format!("line {}: not an mm-link log event: {line:?}", i + 1);
        if let Some(comment) = line.strip_prefix('#') {
            if let Some(v) = comment.trim().strip_prefix("init timestamp:") {
                init = Some(v.trim().parse().map_err(|_| bad())?);
            }
            continue;
        }
        if line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |s: &str| s.parse::<u64>().map_err(|_| bad());
        events.push(match f.as_slice() {
            [t, "+", b] => LogEvent::Arrival {
                ms: num(t)?,
                bytes: num(b)?,
            },
            [t, "-", b, d] => LogEvent::Departure {
                ms: num(t)?,
                bytes: num(b)?,
                delay_ms: num(d)?,
            },
            [t, "#", b] => LogEvent::Opportunity {
                ms: num(t)?,
                bytes: num(b)?,
            },
            _ => return Err(bad()),
        });
    }
    Ok((init, events))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn written_log_parses_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("down.log");
        let mut log = LinkLog::create(&path, 1.7e12).expect("create");
        let t = |ms: u64| Instant::ZERO + Duration::from_millis(ms);
        log.arrival(t(5), 1200);
        log.arrival(t(6), 80);
        log.departure(t(35), 1200, t(5));
        log.flush();
        let text = std::fs::read_to_string(&path).expect("read");
        let (init, events) = parse(&text).expect("parses");
        assert_eq!(init, Some(1_700_000_000_000));
        assert_eq!(
            events,
            [
                LogEvent::Arrival { ms: 5, bytes: 1200 },
                LogEvent::Arrival { ms: 6, bytes: 80 },
                LogEvent::Departure {
                    ms: 35,
                    bytes: 1200,
                    delay_ms: 30
                },
            ]
        );
        // Mahimahi's own lines read too; garbage names its line.
        let (_, mm) = parse("# base timestamp: 0\n0 # 1504\n").expect("mm-link line");
        assert_eq!(mm, [LogEvent::Opportunity { ms: 0, bytes: 1504 }]);
        assert!(parse("1 + x\n").unwrap_err().contains("line 1"));
    }
}
