//! HTTP/0.9 over QUIC (`hq-interop`, the QUIC interop runner's application): one request per
//! client-initiated bidirectional stream, `GET /path\r\n`, answered with the file's bytes and FIN.
//! Pure logic: request parsing and safe path resolution under a served root.

use std::path::{Path, PathBuf};

use crate::error::Error;

/// The ALPN token of HTTP/0.9 over QUIC.
pub const ALPN: &[u8] = b"hq-interop";

/// Longest request line accepted; a peer sending more is refused before it can grow the buffer.
pub const MAX_REQUEST: usize = 8 * 1024;

/// Application error code on a stream reset when a request is refused (bad request, outside the
/// root). hq-interop defines no codes; the peer only needs to see the stream fail.
pub const REFUSED_CODE: u64 = 0x10;

/// Application error code on a stream reset when the requested file does not exist; 0x194 is
/// 404, so that a client (ours reports "not found") or a person reading a trace can tell a
/// missing file from other refusals.
pub const NOT_FOUND_CODE: u64 = 0x194;

/// The reset code for a request refused with `error`.
#[must_use]
pub fn refusal_code(error: &Error) -> u64 {
    match error {
        Error::NotFound(_) => NOT_FOUND_CODE,
        _ => REFUSED_CODE,
    }
}

/// The request line for `path` as a client sends it.
#[must_use]
pub fn request_line(path: &str) -> Vec<u8> {
    format!("GET {path}\r\n").into_bytes()
}

/// Accumulates the bytes of one request stream until the request line is complete.
#[derive(Debug, Default)]
pub struct RequestBuffer {
    buf: Vec<u8>,
}

impl RequestBuffer {
    /// Appends stream data; returns the request path once the line is complete (a line end was
    /// seen, or `fin` ends the stream).
    pub fn push(&mut self, data: &[u8], fin: bool) -> Result<Option<String>, Error> {
        if self.buf.len() + data.len() > MAX_REQUEST {
            return Err(Error::BadRequest(format!(
                "request longer than {MAX_REQUEST} bytes"
            )));
        }
        self.buf.extend_from_slice(data);
        let line_end = self.buf.iter().position(|&b| b == b'\n');
        let line = match (line_end, fin) {
            (Some(end), _) => &self.buf[..end],
            (None, true) => &self.buf[..],
            (None, false) => return Ok(None),
        };
        parse_request(line).map(Some)
    }
}

impl RequestBuffer {
    /// Reads stream `id` into the buffer: the request path once the line is complete, an error
    /// for a bad request or a failed stream, `None` while the line is still incomplete.
    pub(crate) fn read(
        &mut self,
        conn: &mut recoup_transport::Connection,
        id: recoup_transport::streams::StreamId,
    ) -> Option<Result<String, Error>> {
        let mut buf = [0u8; 4096];
        loop {
            match crate::stream_io::read(conn, id, &mut buf) {
                Ok((n, fin)) => match self.push(&buf[..n], fin) {
                    Ok(Some(path)) => return Some(Ok(path)),
                    Ok(None) if n == 0 || fin => return None,
                    Ok(None) => {}
                    Err(e) => return Some(Err(e)),
                },
                Err(e) => return Some(Err(Error::Transport(e))),
            }
        }
    }
}

/// Applies the `key=value` items of a query string (`&`-separated, percent-decoded) with
/// `set`; an item without `=`, a key given twice or a value `set` refuses is an error naming
/// the key.
pub(crate) fn parse_query(
    query: &str,
    mut set: impl FnMut(&str, &str) -> Result<(), String>,
) -> Result<(), Error> {
    let mut seen: Vec<String> = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| Error::BadRequest(format!("query item {pair:?} has no `=`")))?;
        let key = percent_decode(key)?;
        let value = percent_decode(value)?;
        if seen.contains(&key) {
            return Err(Error::BadRequest(format!("{key}: given twice")));
        }
        set(&key, &value).map_err(|why| Error::BadRequest(format!("{key}={value:?}: {why}")))?;
        seen.push(key);
    }
    Ok(())
}

/// Parses `GET /path` (trailing CR and whitespace ignored) and returns the raw path.
pub fn parse_request(line: &[u8]) -> Result<String, Error> {
    let line = std::str::from_utf8(line)
        .map_err(|_| Error::BadRequest("request line is not UTF-8".into()))?;
    let line = line.trim_end();
    let mut parts = line.split_ascii_whitespace();
    let method = parts.next().unwrap_or_default();
    if method != "GET" {
        return Err(Error::BadRequest(format!("method {method:?} is not GET")));
    }
    let path = parts
        .next()
        .ok_or_else(|| Error::BadRequest("no path".into()))?;
    // HTTP/1.0-style clients may append a version; HTTP/0.9 has none, anything else is junk.
    if let Some(extra) = parts.next() {
        if !extra.starts_with("HTTP/") || parts.next().is_some() {
            return Err(Error::BadRequest(format!(
                "unexpected {extra:?} after the path"
            )));
        }
    }
    Ok(path.to_owned())
}

/// Decodes `%XX` escapes; a malformed escape or a NUL byte is refused.
pub fn percent_decode(s: &str) -> Result<String, Error> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| Error::BadRequest(format!("bad percent escape in {s:?}")))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.contains(&0) {
        return Err(Error::BadRequest("NUL in path".into()));
    }
    String::from_utf8(out).map_err(|_| Error::BadRequest("decoded path is not UTF-8".into()))
}

/// The files a server may hand out: regular files under one directory, symlinks resolved.
#[derive(Clone, Debug)]
pub struct Root {
    dir: PathBuf,
}

impl Root {
    /// `dir` must exist and be a directory; it is canonicalized once here.
    pub fn new(dir: &Path) -> Result<Self, Error> {
        let dir = dir
            .canonicalize()
            .map_err(|e| Error::io(format!("root {}", dir.display()), e))?;
        if !dir.is_dir() {
            return Err(Error::Config(format!(
                "root {} is not a directory",
                dir.display()
            )));
        }
        Ok(Self { dir })
    }

    /// The canonical directory served.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Maps a request path to a regular file under the root. Refuses paths that are not rooted
    /// at `/`, contain `..` (also percent-encoded), or resolve (through symlinks) outside the
    /// root; a query string or fragment is ignored.
    pub fn resolve(&self, request_path: &str) -> Result<PathBuf, Error> {
        let path = request_path.split(['?', '#']).next().unwrap_or_default();
        if !path.starts_with('/') {
            return Err(Error::Refused(format!(
                "{request_path:?} is not an absolute URL path"
            )));
        }
        let decoded = percent_decode(path)?;
        let mut full = self.dir.clone();
        for segment in decoded.split('/') {
            match segment {
                "" | "." => {}
                ".." => {
                    return Err(Error::Refused(format!(
                        "{request_path:?} climbs out with .."
                    )));
                }
                s if s.contains('\\') => {
                    return Err(Error::Refused(format!("{request_path:?} has a backslash")));
                }
                s => full.push(s),
            }
        }
        let real = full
            .canonicalize()
            .map_err(|_| Error::NotFound(request_path.to_owned()))?;
        // A symlink inside the root may point anywhere; only its target counts.
        if !real.starts_with(&self.dir) {
            return Err(Error::Refused(format!(
                "{request_path:?} leads outside the root"
            )));
        }
        if !real.is_file() {
            return Err(Error::NotFound(request_path.to_owned()));
        }
        Ok(real)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root_with_files() -> (tempfile::TempDir, Root) {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a.txt"), b"hello").expect("write");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        std::fs::write(dir.path().join("sub/b c.bin"), b"x").expect("write");
        let root = Root::new(dir.path()).expect("root");
        (dir, root)
    }

    #[test]
    fn request_line_round_trips() {
        let line = request_line("/a.txt");
        assert_eq!(line, b"GET /a.txt\r\n");
        let mut buf = RequestBuffer::default();
        assert_eq!(buf.push(&line[..5], false).expect("partial"), None);
        assert_eq!(
            buf.push(&line[5..], false).expect("complete"),
            Some("/a.txt".to_owned())
        );
    }

    #[test]
    fn request_completes_on_fin_without_newline() {
        let mut buf = RequestBuffer::default();
        assert_eq!(buf.push(b"GET /x", true).expect("fin"), Some("/x".into()));
    }

    #[test]
    fn bad_requests_are_refused() {
        assert!(matches!(
            parse_request(b"POST /x"),
            Err(Error::BadRequest(_))
        ));
        assert!(matches!(parse_request(b"GET"), Err(Error::BadRequest(_))));
        assert!(matches!(
            parse_request(b"GET /x y"),
            Err(Error::BadRequest(_))
        ));
        assert!(matches!(
            parse_request(b"GET /x\xff"),
            Err(Error::BadRequest(_))
        ));
        assert_eq!(parse_request(b"GET /x HTTP/1.0\r").expect("1.0"), "/x");
        let mut buf = RequestBuffer::default();
        let long = vec![b'a'; MAX_REQUEST + 1];
        assert!(matches!(buf.push(&long, false), Err(Error::BadRequest(_))));
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("/b%20c").expect("decode"), "/b c");
        assert!(percent_decode("/%2").is_err());
        assert!(percent_decode("/%zz").is_err());
        assert!(percent_decode("/%00").is_err());
        assert!(percent_decode("/%ff").is_err());
    }

    #[test]
    fn resolves_files_under_the_root() {
        let (_dir, root) = root_with_files();
        assert_eq!(root.resolve("/a.txt").expect("a"), root.dir().join("a.txt"));
        assert_eq!(
            root.resolve("//sub/./b%20c.bin?q=1").expect("b"),
            root.dir().join("sub/b c.bin")
        );
        assert!(matches!(root.resolve("/missing"), Err(Error::NotFound(_))));
        assert!(matches!(root.resolve("/sub"), Err(Error::NotFound(_))));
        assert!(matches!(root.resolve("/"), Err(Error::NotFound(_))));
    }

    #[test]
    fn traversal_is_refused() {
        let (_dir, root) = root_with_files();
        for path in [
            "/../etc/passwd",
            "/sub/../../etc/passwd",
            "/%2e%2e/etc/passwd",
            "/sub%2F..%2F..%2Fetc",
            "/..",
            "etc/passwd",
            "a.txt",
            "/sub\\..\\a.txt",
        ] {
            assert!(
                matches!(root.resolve(path), Err(Error::Refused(_))),
                "{path} was not refused: {:?}",
                root.resolve(path)
            );
        }
        // An absolute path in the request stays under the root.
        assert!(matches!(
            root.resolve("//etc/passwd"),
            Err(Error::NotFound(_))
        ));
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_escaping_the_root_are_refused() {
        let (dir, root) = root_with_files();
        let outside = tempfile::tempdir().expect("tempdir");
        std::fs::write(outside.path().join("secret"), b"s").expect("write");
        std::os::unix::fs::symlink(outside.path().join("secret"), dir.path().join("leak"))
            .expect("symlink");
        std::os::unix::fs::symlink(outside.path(), dir.path().join("outdir")).expect("symlink");
        std::os::unix::fs::symlink(dir.path().join("a.txt"), dir.path().join("inside"))
            .expect("symlink");
        assert!(matches!(root.resolve("/leak"), Err(Error::Refused(_))));
        assert!(matches!(
            root.resolve("/outdir/secret"),
            Err(Error::Refused(_))
        ));
        assert_eq!(
            root.resolve("/inside").expect("inside"),
            root.dir().join("a.txt")
        );
    }
}
