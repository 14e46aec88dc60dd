//! Where `recoup get` puts the bodies of the URLs it fetches on one connection, and the
//! bookkeeping its two applications (hq-interop, HTTP/3) share: which URLs ended, and how.

use std::time::Duration;

use recoup_time::Instant;

use crate::error::Error;

/// Where [`crate::Client::run_all`] puts the bodies, by the index of their URL in
/// [`crate::GetOptions::urls`]. Each URL ends with exactly one call of [`Bodies::complete`] or
/// [`Bodies::failed`], except when the download is interrupted (then with neither).
pub trait Bodies {
    /// The next bytes of body `index`. An error fails that URL (the others go on).
    fn write(&mut self, index: usize, data: &[u8]) -> Result<(), Error>;
    /// Body `index` is complete, `bytes` long. An error fails that URL.
    fn complete(&mut self, index: usize, bytes: u64) -> Result<(), Error>;
    /// URL `index` failed with `error`: what was written of it is no body.
    fn failed(&mut self, index: usize, error: &Error);
}

/// One URL whose body arrived whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: u64,
    /// From the connection's first packet to the body's last byte.
    pub elapsed: Duration,
}

/// What became of each URL of a download so far.
pub(crate) struct Files<'a> {
    bodies: &'a mut dyn Bodies,
    start: Instant,
    received: Vec<u64>,
    outcomes: Vec<Option<Result<Fetched, Error>>>,
    /// Body bytes received over all URLs.
    pub(crate) total: u64,
    /// When the last body completed.
    pub(crate) done_at: Option<Instant>,
}

impl std::fmt::Debug for Files<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Files")
            .field("urls", &self.outcomes.len())
            .field("total", &self.total)
            .finish_non_exhaustive()
    }
}

impl<'a> Files<'a> {
    pub(crate) fn new(bodies: &'a mut dyn Bodies, start: Instant, urls: usize) -> Self {
        Self {
            bodies,
            start,
            received: vec![0; urls],
            outcomes: (0..urls).map(|_| None).collect(),
            total: 0,
            done_at: None,
        }
    }

    pub(crate) fn is_ended(&self, index: usize) -> bool {
        self.outcomes[index].is_some()
    }

    /// Every URL has its outcome.
    pub(crate) fn all_ended(&self) -> bool {
        self.outcomes.iter().all(Option::is_some)
    }

    /// URLs that ended in failure so far.
    pub(crate) fn failures(&self) -> usize {
        self.outcomes
            .iter()
            .filter(|o| matches!(o, Some(Err(_))))
            .count()
    }

    /// Hands bytes of URL `index` on; `false` if that URL has ended (before, or now because
    /// the bytes could not be written), so that the caller stops reading it.
    pub(crate) fn write(&mut self, index: usize, data: &[u8]) -> bool {
        if self.is_ended(index) {
            return false;
        }
        if data.is_empty() {
            return true;
        }
        match self.bodies.write(index, data) {
            Ok(()) => {
                self.received[index] += data.len() as u64;
                self.total += data.len() as u64;
                true
            }
            Err(e) => {
                self.fail(index, e);
                false
            }
        }
    }

    /// URL `index`'s body ended (FIN after the last byte).
    pub(crate) fn complete(&mut self, now: Instant, index: usize) {
        if self.is_ended(index) {
            return;
        }
        let bytes = self.received[index];
        match self.bodies.complete(index, bytes) {
            Ok(()) => {
                self.outcomes[index] = Some(Ok(Fetched {
                    bytes,
                    elapsed: now.saturating_duration_since(self.start),
                }));
                self.done_at = Some(now);
            }
            Err(e) => self.fail(index, e),
        }
    }

    /// URL `index` failed; a URL that already ended keeps its outcome.
    pub(crate) fn fail(&mut self, index: usize, error: Error) {
        if self.is_ended(index) {
            return;
        }
        tracing::debug!(index, "failed: {error}");
        self.bodies.failed(index, &error);
        self.outcomes[index] = Some(Err(error));
    }

    /// Fails every URL that has not ended, each with the error `why` makes.
    pub(crate) fn fail_rest(&mut self, why: impl Fn() -> Error) {
        for index in 0..self.outcomes.len() {
            if !self.is_ended(index) {
                self.fail(index, why());
            }
        }
    }

    /// The outcome of every URL, in order; a URL still open failed with `why`.
    pub(crate) fn into_outcomes(mut self, why: impl Fn() -> Error) -> Vec<Result<Fetched, Error>> {
        self.fail_rest(why);
        self.outcomes.into_iter().flatten().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records the calls, refusing writes to URL 2.
    #[derive(Default)]
    struct Log(Vec<String>);

    impl Bodies for Log {
        fn write(&mut self, index: usize, data: &[u8]) -> Result<(), Error> {
            if index == 2 {
                return Err(Error::Config("disk full".into()));
            }
            self.0.push(format!("write {index} {}", data.len()));
            Ok(())
        }

        fn complete(&mut self, index: usize, bytes: u64) -> Result<(), Error> {
            self.0.push(format!("complete {index} {bytes}"));
            Ok(())
        }

        fn failed(&mut self, index: usize, error: &Error) {
            self.0.push(format!("failed {index} {error}"));
        }
    }

    #[test]
    fn each_url_ends_once_and_a_failed_write_fails_only_its_url() {
        let mut log = Log::default();
        let start = Instant::ZERO;
        let later = start + Duration::from_millis(30);
        let mut files = Files::new(&mut log, start, 4);
        assert!(files.write(0, b"abc"));
        assert!(files.write(1, b"de"));
        assert!(!files.write(2, b"x"), "the refused write ends URL 2");
        files.complete(later, 0);
        files.complete(later, 0);
        assert!(!files.write(0, b"late"), "URL 0 has ended");
        files.fail(0, Error::Config("too late".into()));
        assert!(!files.all_ended());
        files.fail(1, Error::NotFound("/b".into()));
        assert_eq!((files.total, files.failures()), (5, 2));
        assert_eq!(files.done_at, Some(later));
        let outcomes = files.into_outcomes(|| Error::Connection("gone".into()));
        assert_eq!(
            outcomes[0].as_ref().expect("0 complete"),
            &Fetched {
                bytes: 3,
                elapsed: Duration::from_millis(30)
            }
        );
        assert!(matches!(outcomes[1], Err(Error::NotFound(_))));
        assert!(matches!(outcomes[2], Err(Error::Config(_))));
        assert!(matches!(outcomes[3], Err(Error::Connection(_))));
        assert_eq!(
            log.0,
            [
                "write 0 3",
                "write 1 2",
                "failed 2 configuration: disk full",
                "complete 0 3",
                "failed 1 not found: /b",
                "failed 3 connection failed: gone",
            ]
        );
    }
}
