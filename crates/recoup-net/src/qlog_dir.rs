//! One qlog file per connection in a directory (`--qlog-dir` or `QLOGDIR`), named
//! `{odcid}_{client|server}.sqlog` as qvis and other stacks expect.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use recoup_time::Instant;
use recoup_transport::qlog::{QlogWriter, VantagePoint};

use crate::error::Error;

/// Where qlog traces go.
#[derive(Clone, Debug)]
pub struct QlogDir {
    dir: PathBuf,
}

impl QlogDir {
    /// The given directory, else `QLOGDIR` when set, else none (no traces).
    #[must_use]
    pub fn from_option_or_env(dir: Option<PathBuf>) -> Option<Self> {
        dir.or_else(|| std::env::var_os("QLOGDIR").map(PathBuf::from))
            .map(|dir| Self { dir })
    }

    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Creates the directory if needed and starts a trace for one connection, named by its
    /// ODCID; `start` is the trace's time 0, `unix_ms` the same moment on the wall clock.
    pub fn create(
        &self,
        vantage: VantagePoint,
        odcid: &str,
        start: Instant,
        unix_ms: f64,
    ) -> Result<QlogWriter, Error> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| Error::io(format!("qlog dir {}", self.dir.display()), e))?;
        let side = match vantage {
            VantagePoint::Client => "client",
            VantagePoint::Server => "server",
        };
        let path = self.dir.join(format!("{odcid}_{side}.sqlog"));
        let file =
            File::create(&path).map_err(|e| Error::io(format!("qlog {}", path.display()), e))?;
        Ok(QlogWriter::new(
            Box::new(BufWriter::new(file)),
            vantage,
            start,
            unix_ms,
        ))
    }
}

/// Hex of connection ID bytes, as qlog names a connection.
pub use recoup_transport::qlog::hex as hex_id;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_one_trace_file_per_connection() {
        let dir = tempfile::tempdir().expect("tempdir");
        let qlog = QlogDir::from_option_or_env(Some(dir.path().join("q"))).expect("dir");
        let id = hex_id(&[0xab, 0x01]);
        assert_eq!(id, "ab01");
        let mut w = qlog
            .create(VantagePoint::Server, &id, Instant::ZERO, 1.7e12)
            .expect("create");
        // The connection writes the header when it takes the writer.
        w.write_header(&id);
        w.flush();
        drop(w);
        let text = std::fs::read_to_string(dir.path().join("q/ab01_server.sqlog")).expect("read");
        assert!(
            text.starts_with('\u{1e}'),
            "not a JSON text sequence: {text:?}"
        );
        assert!(text.contains("\"ODCID\":\"ab01\""), "{text}");
    }
}
