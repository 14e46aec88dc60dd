//! Mahimahi `mm-link` trace files.
//!
//! One non-negative integer per line: a millisecond timestamp at which the link can deliver up to
//! [`MM_PACKET_SIZE`] bytes. Timestamps never decrease and may repeat; the trace repeats shifted
//! by its last timestamp. The checks match `LinkQueue`'s loader in mahimahi (empty lines, a
//! decreasing timestamp, an empty file and a last timestamp of 0 are errors).

use std::path::Path;

use crate::error::Error;

/// Bytes per delivery opportunity (`PACKET_SIZE` in mahimahi's link_queue).
pub const MM_PACKET_SIZE: usize = 1504;

/// Larger trace files are refused rather than read into memory (the biggest shipped is 3.4 MB).
pub const MAX_TRACE_FILE_BYTES: u64 = 512 << 20;

/// A loaded delivery schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trace {
    schedule_ms: Vec<u64>,
}

impl Trace {
    /// Read an `mm-link` trace file.
    pub fn load(path: &Path) -> Result<Self, Error> {
        let text = read_bounded(path)?;
        Self::parse(path, &text)
    }

    /// Parse trace text; `path` only names the source in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, Error> {
        let mut schedule_ms = Vec::with_capacity(text.len() / 6);
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            let n = i + 1;
            if line.is_empty() {
                return Err(Error::file(path, Some(n), "empty line"));
            }
            let ms: u64 = line.parse().map_err(|_| {
                Error::file(
                    path,
                    Some(n),
                    format!("`{line}` is not a non-negative integer"),
                )
            })?;
            if let Some(&prev) = schedule_ms.last() {
                if ms < prev {
                    return Err(Error::file(
                        path,
                        Some(n),
                        format!("timestamp {ms} is before the previous one ({prev})"),
                    ));
                }
            }
            schedule_ms.push(ms);
        }
        Self::from_millis(schedule_ms).map_err(|detail| Error::file(path, None, detail))
    }

    /// A trace from opportunity timestamps in milliseconds (for tests and generated traces).
    pub fn from_millis(schedule_ms: Vec<u64>) -> Result<Self, String> {
        match schedule_ms.last() {
            None => Err("empty trace (no timestamps)".to_owned()),
            Some(0) => Err("trace must last a nonzero time (last timestamp is 0)".to_owned()),
            Some(_) if schedule_ms.windows(2).any(|w| w[1] < w[0]) => {
                Err("timestamps decrease".to_owned())
            }
            Some(_) => Ok(Self { schedule_ms }),
        }
    }

    /// Opportunity timestamps of one period, in milliseconds.
    #[must_use]
    pub fn opportunities_ms(&self) -> &[u64] {
        &self.schedule_ms
    }

    /// Length of one period: the last timestamp (mm-link shifts each repetition by it).
    #[must_use]
    pub fn period_ms(&self) -> u64 {
        // Non-empty by construction.
        self.schedule_ms.last().copied().unwrap_or(1)
    }

    /// Mean capacity over one period: opportunities × 1504 bytes / last timestamp, in bit/s.
    #[must_use]
    pub fn mean_rate_bps(&self) -> f64 {
        (self.schedule_ms.len() * MM_PACKET_SIZE * 8) as f64 * 1000.0 / self.period_ms() as f64
    }
}

pub(crate) fn read_bounded(path: &Path) -> Result<String, Error> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let len = std::fs::metadata(path).map_err(io)?.len();
    if len > MAX_TRACE_FILE_BYTES {
        return Err(Error::file(
            path,
            None,
            format!("file is {len} bytes, more than the {MAX_TRACE_FILE_BYTES} allowed"),
        ));
    }
    std::fs::read_to_string(path).map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Trace, Error> {
        Trace::parse(Path::new("t.trace"), text)
    }

    #[test]
    fn loads_repeated_timestamps() {
        let t = parse("1\n1\n3\n").expect("valid");
        assert_eq!(t.opportunities_ms(), &[1, 1, 3]);
        assert_eq!(t.period_ms(), 3);
        let one = parse("1\n").expect("valid");
        assert!((one.mean_rate_bps() - 12_032_000.0).abs() < 1e-6);
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse("1\nx\n").unwrap_err().to_string();
        assert!(e.contains("t.trace line 2") && e.contains("`x`"), "{e}");
        let e = parse("5\n3\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("before"), "{e}");
        let e = parse("1\n\n2\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("empty"), "{e}");
        let e = parse("").unwrap_err().to_string();
        assert!(e.contains("empty trace"), "{e}");
        let e = parse("0\n0\n").unwrap_err().to_string();
        assert!(e.contains("nonzero"), "{e}");
        let e = parse("-1\n").unwrap_err().to_string();
        assert!(e.contains("line 1"), "{e}");
        let e = Trace::load(Path::new("/nonexistent/x.down"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/x.down"), "{e}");
    }
}
