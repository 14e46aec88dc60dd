//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong building an element or loading its file. Running one cannot
/// fail.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file (trace, loss replay) could not be opened or read.
    #[error("{path}: {source}")]
    Io {
        /// The file as given.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// A file was read but its content is wrong; `line` is 1-based when it applies.
    #[error("{path}{}: {detail}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
    File {
        /// The file as given.
        path: PathBuf,
        /// 1-based line number, if the problem is on one line.
        line: Option<usize>,
        /// What is wrong.
        detail: String,
    },
    /// An element description (scenario string) is malformed; `part` is the offending token.
    #[error("bad spec `{input}`: `{part}`: {detail}")]
    Spec {
        /// The whole string that was parsed.
        input: String,
        /// The token at fault (or the whole input if none in particular).
        part: String,
        /// What is wrong with it.
        detail: String,
    },
}

impl Error {
    pub(crate) fn spec(input: &str, part: &str, detail: impl Into<String>) -> Self {
        Self::Spec {
            input: input.to_owned(),
            part: part.to_owned(),
            detail: detail.into(),
        }
    }

    pub(crate) fn file(
        path: &std::path::Path,
        line: Option<usize>,
        detail: impl Into<String>,
    ) -> Self {
        Self::File {
            path: path.to_owned(),
            line,
            detail: detail.into(),
        }
    }
}
