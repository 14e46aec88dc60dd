//! What a request path names, for every application protocol `recoup serve` speaks: a regular
//! file under `--root`, a live stream, or, with `--origin`, whatever the origin answers.

use std::fs::File;
use std::path::Path;

use crate::error::Error;
use crate::hq::Root;
use crate::live::{self, LiveParams};
use crate::metrics::Metrics;
use crate::origin::{Origin, OriginResponse};

/// Where the server's content comes from.
#[derive(Debug)]
pub struct Sources {
    /// Directory whose files are served; `None` serves live streams only.
    pub root: Option<Root>,
    /// Live stream parameters a request's query does not set.
    pub live: LiveParams,
    /// An origin every request is relayed from (instead of `root` and live streams).
    pub origin: Option<Origin>,
    /// What the origin serves: a live packager's output or stored files.
    pub origin_kind: ContentKind,
    /// Where live streams are counted (`recoup serve --metrics`).
    pub metrics: Option<Metrics>,
    /// A MoQ relay egress (`recoup serve --moq`): WebTransport sessions at
    /// [`crate::moq::PATH`] subscribe to the upstream's broadcasts.
    pub moq: Option<crate::moq::Egress>,
}

/// What a response carries, for the loss-recovery policy chosen per kind (`recoup serve
/// --live-policy`, `--file-policy`): media produced as it is sent, with gaps between frames (the
/// sender's off-mode), or bytes available in full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ContentKind {
    Live,
    File,
}

impl ContentKind {
    pub const NAMES: [&'static str; 2] = ["live", "file"];
}

impl std::str::FromStr for ContentKind {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim() {
            "live" => Ok(Self::Live),
            "file" => Ok(Self::File),
            other => Err(Error::Config(format!(
                "unknown content kind {other:?}; accepted: {}",
                Self::NAMES.join(", ")
            ))),
        }
    }
}

/// A resolved request.
#[derive(Debug)]
pub enum Content {
    /// An open regular file and its length.
    File { file: File, len: u64 },
    /// A live stream: its name and parameters.
    Live { name: String, params: LiveParams },
    /// The origin's answer, being fetched.
    Origin(OriginResponse),
}

impl Content {
    /// The kind of this content; an origin's is `origin_kind`.
    #[must_use]
    pub fn kind(&self, origin_kind: ContentKind) -> ContentKind {
        match self {
            Self::File { .. } => ContentKind::File,
            Self::Live { .. } => ContentKind::Live,
            Self::Origin(_) => origin_kind,
        }
    }
}

impl Sources {
    /// Resolves a request path (with query). Errors: [`Error::NotFound`] for a missing file,
    /// [`Error::Refused`] for a path leading outside the root or a file that cannot be read,
    /// [`Error::BadRequest`] for a malformed path or live query.
    pub fn resolve(&self, path: &str) -> Result<Content, Error> {
        if let Some(origin) = &self.origin {
            return origin.fetch(path).map(Content::Origin);
        }
        if live::is_live(path) {
            let (name, params) = self.live.from_request(path)?;
            return Ok(Content::Live { name, params });
        }
        let root = self
            .root
            .as_ref()
            .ok_or_else(|| Error::NotFound(format!("{path} (no --root: live streams only)")))?;
        let real = root.resolve(path)?;
        let unreadable =
            |e: std::io::Error| Error::Refused(format!("{path:?} cannot be read: {e}"));
        let file = File::open(&real).map_err(unreadable)?;
        let len = file.metadata().map_err(unreadable)?.len();
        Ok(Content::File { file, len })
    }
}

/// The media type for a file name's extension (what a browser page and a DASH player need);
/// `application/octet-stream` for anything else.
#[must_use]
pub fn content_type(path: &Path) -> &'static str {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "txt" => "text/plain; charset=utf-8",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "ico" => "image/x-icon",
        "wasm" => "application/wasm",
        "mp4" | "m4v" => "video/mp4",
        "m4a" => "audio/mp4",
        "m4s" => "video/iso.segment",
        "webm" => "video/webm",
        "mpd" => "application/dash+xml",
        "m3u8" => "application/vnd.apple.mpegurl",
        "ts" => "video/mp2t",
        _ => "application/octet-stream",
    }
}

/// The media type of a live stream's body: recoup's frame format (`recoup_apps::frame`).
pub const LIVE_CONTENT_TYPE: &str = "application/x-recoup-frames";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_types_follow_the_extension() {
        for (name, want) in [
            ("index.html", "text/html; charset=utf-8"),
            ("app.JS", "text/javascript; charset=utf-8"),
            ("s.css", "text/css; charset=utf-8"),
            ("m.json", "application/json"),
            ("p.png", "image/png"),
            ("v.mp4", "video/mp4"),
            ("v.webm", "video/webm"),
            ("seg-1.m4s", "video/iso.segment"),
            ("manifest.mpd", "application/dash+xml"),
            ("blob", "application/octet-stream"),
            ("x.bin", "application/octet-stream"),
        ] {
            assert_eq!(content_type(Path::new(name)), want, "{name}");
        }
    }

    #[test]
    fn resolves_files_live_streams_and_errors() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.txt"), b"hello").expect("write");
        let sources = Sources {
            root: Some(Root::new(dir.path()).expect("root")),
            live: LiveParams::default(),
            origin: None,
            origin_kind: ContentKind::File,
            metrics: None,
            moq: None,
        };
        assert!(matches!(
            sources.resolve("/a.txt"),
            Ok(Content::File { len: 5, .. })
        ));
        assert!(matches!(
            sources.resolve("/live/cam?fps=25"),
            Ok(Content::Live { ref name, params }) if name == "cam" && params.encoder.fps == 25
        ));
        assert!(matches!(sources.resolve("/nope"), Err(Error::NotFound(_))));
        assert!(matches!(sources.resolve("/../x"), Err(Error::Refused(_))));
        assert!(matches!(
            sources.resolve("/live/cam?fps=0"),
            Err(Error::BadRequest(_))
        ));
        let live_only = Sources {
            root: None,
            live: LiveParams::default(),
            origin: None,
            origin_kind: ContentKind::File,
            metrics: None,
            moq: None,
        };
        assert!(matches!(
            live_only.resolve("/a.txt"),
            Err(Error::NotFound(_))
        ));
    }
}
