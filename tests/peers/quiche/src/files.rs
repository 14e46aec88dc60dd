//! What a request is answered with: a file under the root for GET and HEAD (404 for anything
//! that is not a regular file inside the root), 405 for other methods. Bodies are read from the
//! file a chunk at a time as the stream takes them, so a large file is never held whole.

use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// How much of a file is read at a time (the stream's send buffer takes it in pieces).
const CHUNK: usize = 64 * 1024;

/// A response: its status, its `content-length` and the bytes still to send.
pub struct Response {
    pub status: u16,
    pub length: u64,
    pub body: Body,
}

/// The body of a response, sent from `chunk[pos..]` and then from the file's next `left` bytes.
pub struct Body {
    file: Option<File>,
    left: u64,
    chunk: Vec<u8>,
    pos: usize,
}

impl Body {
    fn text(text: &str) -> Self {
        Self {
            file: None,
            left: 0,
            chunk: text.as_bytes().to_vec(),
            pos: 0,
        }
    }

    fn file(file: File, len: u64) -> Self {
        Self {
            file: Some(file),
            left: len,
            chunk: Vec::new(),
            pos: 0,
        }
    }

    /// Whether nothing is left to send.
    pub fn is_done(&self) -> bool {
        self.pos == self.chunk.len() && self.left == 0
    }

    /// The bytes to send next and whether they end the body; reads the file's next chunk once
    /// the previous one is sent. A file that ends before its length (it shrank while being
    /// sent) is an error: the stream must be reset rather than cut short silently.
    pub fn next(&mut self) -> io::Result<(&[u8], bool)> {
        if self.pos == self.chunk.len() && self.left > 0 {
            let want = CHUNK.min(usize::try_from(self.left).unwrap_or(CHUNK));
            self.chunk.resize(want, 0);
            let file = self.file.as_mut().ok_or(io::ErrorKind::UnexpectedEof)?;
            let n = file.read(&mut self.chunk)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!("the file ended {} bytes early", self.left),
                ));
            }
            self.chunk.truncate(n);
            self.pos = 0;
            self.left -= n as u64;
        }
        Ok((&self.chunk[self.pos..], self.left == 0))
    }

    /// Marks `n` bytes of what `next` returned as sent.
    pub fn consume(&mut self, n: usize) {
        self.pos += n;
    }
}

/// The response to `method path`, serving files under `root` (canonical).
pub fn respond(root: &Path, method: &[u8], path: &[u8]) -> Response {
    let head = match method {
        b"GET" => false,
        b"HEAD" => true,
        _ => {
            return Response {
                status: 405,
                length: 0,
                body: Body::text(""),
            }
        }
    };
    let opened = std::str::from_utf8(path)
        .ok()
        .and_then(|p| resolve(root, p))
        .and_then(|p| {
            let file = File::open(p).ok()?;
            let len = file.metadata().ok()?.len();
            Some((file, len))
        });
    match opened {
        Some((file, len)) => Response {
            status: 200,
            length: len,
            body: if head {
                Body::text("")
            } else {
                Body::file(file, len)
            },
        },
        None => {
            let text = "not found\n";
            Response {
                status: 404,
                length: text.len() as u64,
                body: Body::text(if head { "" } else { text }),
            }
        }
    }
}

/// The regular file that request path `path` names under `root` (canonical), if any: the query
/// is dropped, and `.`, `..`, backslashes, NULs and anything that resolves (through a symbolic
/// link) outside the root are refused.
fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let path = path.split(['?', '#']).next().unwrap_or_default();
    let rel = path.strip_prefix('/')?;
    let mut full = root.to_path_buf();
    for seg in rel.split('/').filter(|s| !s.is_empty()) {
        if seg == "." || seg == ".." || seg.contains(['\\', '\0']) {
            return None;
        }
        full.push(seg);
    }
    let real = full.canonicalize().ok()?;
    (real.starts_with(root) && real.is_file()).then_some(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root() -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("quiche-h3-files-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("www/sub")).unwrap();
        std::fs::write(dir.join("www/a.bin"), vec![7u8; 200_000]).unwrap();
        std::fs::write(dir.join("www/sub/b"), b"b").unwrap();
        std::fs::write(dir.join("secret"), b"s").unwrap();
        (dir.clone(), dir.join("www").canonicalize().unwrap())
    }

    #[test]
    fn only_files_inside_the_root_resolve() {
        let (_dir, www) = root();
        assert_eq!(resolve(&www, "/a.bin"), Some(www.join("a.bin")));
        assert_eq!(resolve(&www, "/sub/b?x=1"), Some(www.join("sub/b")));
        assert_eq!(resolve(&www, "/../secret"), None);
        assert_eq!(resolve(&www, "/sub/../../secret"), None);
        assert_eq!(resolve(&www, "/sub"), None, "a directory is not served");
        assert_eq!(resolve(&www, "/missing"), None);
        assert_eq!(resolve(&www, "a.bin"), None, "a path must start with /");
    }

    #[test]
    fn a_file_body_is_sent_whole_in_chunks() {
        let (_dir, www) = root();
        let mut r = respond(&www, b"GET", b"/a.bin");
        assert_eq!((r.status, r.length), (200, 200_000));
        let mut sent = Vec::new();
        loop {
            let (data, fin) = r.body.next().unwrap();
            let n = data.len().min(1000);
            sent.extend_from_slice(&data[..n]);
            r.body.consume(n);
            if fin && r.body.is_done() {
                break;
            }
        }
        assert_eq!(sent, vec![7u8; 200_000]);
        assert_eq!(respond(&www, b"GET", b"/../secret").status, 404);
        assert_eq!(respond(&www, b"POST", b"/a.bin").status, 405);
        let head = respond(&www, b"HEAD", b"/a.bin");
        assert_eq!((head.status, head.length), (200, 200_000));
        assert!(head.body.is_done());
    }
}
