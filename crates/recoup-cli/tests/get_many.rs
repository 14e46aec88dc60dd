//! `recoup get URL1 URL2 ... -o DIR` (the interop runner's client): every URL on one
//! connection, over hq-interop and HTTP/3, byte-exact; more URLs than the server's stream limit
//! wait for its MAX_STREAMS instead of failing; a failed URL is named and leaves no file; URLs
//! of different origins and several URLs without a directory are refused before connecting.

mod common;

use std::path::Path;

use std::process::{Command, Stdio};

use common::{recoup, run_get, serve_files, sha256};

/// `size` deterministic pseudo-random bytes (xorshift64 from `seed`).
fn bytes(seed: u64, size: usize) -> Vec<u8> {
    let mut x = seed | 1;
    let mut data = Vec::with_capacity(size + 8);
    while data.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        data.extend_from_slice(&x.to_le_bytes());
    }
    data.truncate(size);
    data
}

/// A served directory with `sizes.len()` files `fNNN.bin`; their names and contents.
fn www(sizes: &[usize]) -> (tempfile::TempDir, Vec<(String, Vec<u8>)>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let files: Vec<(String, Vec<u8>)> = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| (format!("f{i:03}.bin"), bytes(i as u64 + 1, size)))
        .collect();
    for (name, data) in &files {
        std::fs::write(dir.path().join(name), data).expect("write");
    }
    (dir, files)
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Every file in `out`, byte-exact, and nothing else.
fn assert_downloaded(out: &Path, files: &[(String, Vec<u8>)], context: &str) {
    let want: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(listing(out), want, "{context}");
    for (name, data) in files {
        let got = std::fs::read(out.join(name)).expect("read");
        assert!(
            got == *data,
            "{name}: {} bytes, sha256 {}, want {} bytes, {}\n{context}",
            got.len(),
            sha256(&got),
            data.len(),
            sha256(data)
        );
    }
}

fn args(alpn: &str, urls: &[String], out: &Path, qlog: &Path) -> Vec<String> {
    let mut args = vec![
        "--insecure".to_owned(),
        "--alpn".to_owned(),
        alpn.to_owned(),
        "--qlog-dir".to_owned(),
        qlog.display().to_string(),
        "-o".to_owned(),
        out.display().to_string(),
    ];
    args.extend_from_slice(urls);
    args
}

#[test]
fn three_files_on_one_connection_over_hq_interop_and_h3_byte_exact() {
    // An empty file, one smaller than a packet, one of many round trips.
    let (root, files) = www(&[0, 700, 600_000]);
    let (mut server, addr) = serve_files(root.path(), &[]);
    let urls: Vec<String> = files
        .iter()
        .map(|(name, _)| format!("https://{addr}/{name}"))
        .collect();
    for alpn in ["hq-interop", "h3"] {
        let work = tempfile::tempdir().expect("tempdir");
        // -o names a directory that does not exist yet: several URLs make it one.
        let out = work.path().join("downloads");
        let qlog = work.path().join("qlog");
        let (status, stderr) = run_get(&args(alpn, &urls, &out, &qlog), &mut server);
        let context = format!("{alpn}:\n{stderr}\n{}", server.output());
        assert!(status.success(), "{context}");
        assert_downloaded(&out, &files, &context);
        assert_eq!(
            listing(&qlog).len(),
            1,
            "one connection (one client qlog) for three URLs: {context}"
        );
        for (url, (_, data)) in urls.iter().zip(&files) {
            assert!(
                stderr.contains(&format!("recoup get: {url}: {} bytes", data.len())),
                "no line for {url}: {context}"
            );
        }
        assert!(
            !stderr.contains('\u{1b}'),
            "ANSI escapes in a pipe: {context}"
        );
    }
}

#[test]
fn rfc9000_4_6_more_urls_than_the_servers_stream_limit_wait_for_max_streams() {
    // `recoup serve` lets a client open 128 bidirectional streams at first (TransportConfig's
    // default): 300 URLs need at least two rounds of MAX_STREAMS. A client that opened more
    // would be closed with STREAM_LIMIT_ERROR (RFC 9000 §4.6); one that gave up at the limit
    // would leave files missing.
    let sizes: Vec<usize> = (0..300).map(|i| 32 + i % 7).collect();
    let (root, files) = www(&sizes);
    let (mut server, addr) = serve_files(root.path(), &[]);
    let urls: Vec<String> = files
        .iter()
        .map(|(name, _)| format!("https://{addr}/{name}"))
        .collect();
    for alpn in ["hq-interop", "h3"] {
        let work = tempfile::tempdir().expect("tempdir");
        let out = work.path().join("downloads");
        let qlog = work.path().join("qlog");
        let (status, stderr) = run_get(&args(alpn, &urls, &out, &qlog), &mut server);
        let context = format!("{alpn}:\n{stderr}\n{}", server.output());
        assert!(status.success(), "{context}");
        assert_downloaded(&out, &files, &context);
        assert_eq!(listing(&qlog).len(), 1, "one connection: {context}");
        // The client did hit the limit and said so (STREAMS_BLOCKED, RFC 9000 §19.14).
        let trace = std::fs::read_to_string(qlog.join(&listing(&qlog)[0])).expect("qlog");
        assert!(
            trace.contains("streams_blocked"),
            "no STREAMS_BLOCKED in the client's qlog: {context}"
        );
    }
}

#[test]
fn a_failed_url_is_named_and_leaves_no_file_the_others_arrive() {
    let (root, files) = www(&[5_000, 9_000]);
    let (mut server, addr) = serve_files(root.path(), &[]);
    let missing = format!("https://{addr}/missing.bin");
    let mut urls: Vec<String> = files
        .iter()
        .map(|(name, _)| format!("https://{addr}/{name}"))
        .collect();
    urls.insert(1, missing.clone());
    for alpn in ["hq-interop", "h3"] {
        let work = tempfile::tempdir().expect("tempdir");
        let out = work.path().join("downloads");
        let qlog = work.path().join("qlog");
        let (status, stderr) = run_get(&args(alpn, &urls, &out, &qlog), &mut server);
        let context = format!("{alpn}:\n{stderr}\n{}", server.output());
        assert!(!status.success(), "{context}");
        assert!(
            stderr.contains(&format!("1 of 3 downloads failed: {missing}")),
            "{context}"
        );
        assert!(
            stderr.contains(&format!("recoup get: {missing}: failed: ")),
            "{context}"
        );
        // The others are complete; nothing of the missing one (nor a temporary file) remains.
        assert_downloaded(&out, &files, &context);
    }
}

#[test]
fn urls_of_other_origins_and_several_urls_without_a_directory_are_refused() {
    let work = tempfile::tempdir().expect("tempdir");
    let refused = |args: &[&str]| {
        let out = Command::new(recoup())
            .arg("get")
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("recoup get");
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let out = work.path().join("d").display().to_string();
    let stderr = refused(&[
        "https://127.0.0.1:4433/a",
        "https://127.0.0.1:4434/b",
        "-o",
        &out,
    ]);
    assert!(
        stderr.contains("\"https://127.0.0.1:4434/b\"") && stderr.contains("host and port"),
        "{stderr}"
    );
    let stderr = refused(&["https://localhost:4433/a", "http://localhost:4433/b"]);
    assert!(stderr.contains("\"http://localhost:4433/b\""), "{stderr}");
    let stderr = refused(&["https://127.0.0.1:4433/a", "https://127.0.0.1:4433/b"]);
    assert!(stderr.contains("need -o DIR"), "{stderr}");
    let stderr = refused(&[
        "https://127.0.0.1:4433/x/a",
        "https://127.0.0.1:4433/y/a",
        "-o",
        &out,
    ]);
    assert!(stderr.contains("would both be saved as"), "{stderr}");
    let stderr = refused(&[
        "https://127.0.0.1:4433/a",
        "https://127.0.0.1:4433/dir/",
        "-o",
        &out,
    ]);
    assert!(
        stderr.contains("\"https://127.0.0.1:4433/dir/\"") && stderr.contains("no file name"),
        "{stderr}"
    );
}
