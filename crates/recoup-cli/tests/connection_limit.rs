//! `recoup serve --max-connections N`: the N+1st client is refused at once with
//! CONNECTION_REFUSED (RFC 9000 §5.2.2) and told why, the connections being served go on, and
//! a slot freed by a closed connection takes the next client.

mod common;

use std::time::Duration;

use common::{now, read_log, run_get, serve_files, spawn_get, Proc};

#[test]
fn the_client_beyond_the_limit_is_refused_at_once_and_a_closed_slot_is_reused() {
    let www = tempfile::tempdir().expect("tempdir");
    std::fs::write(www.path().join("small.bin"), vec![7u8; 10_000]).expect("write");
    let (mut server, addr) = serve_files(www.path(), &["--max-connections", "1"]);

    // The one allowed connection: a live stream of 4 s, kept open meanwhile.
    let logs = tempfile::tempdir().expect("tempdir");
    let first_err = logs.path().join("first");
    let live = logs.path().join("live.bin");
    let mut first = spawn_get(
        &[
            "--insecure",
            "-o",
            &live.display().to_string(),
            &format!("https://{addr}/live/a?bitrate=200kbps&fps=10&duration=4s"),
        ],
        &first_err,
    );
    assert!(
        server.wait_for_log("connection accepted", Duration::from_secs(10)),
        "the first client was not accepted:\n{}",
        server.output()
    );

    let url = format!("https://{addr}/small.bin");
    let out = logs.path().join("small.bin");
    let args = |u: &str| {
        vec![
            "--insecure".to_owned(),
            "-o".into(),
            out.display().to_string(),
            u.to_owned(),
        ]
    };
    let start = now();
    let (status, stderr) = run_get(&args(&url), &mut server);
    let took = now() - start;
    assert!(!status.success(), "the second client was served:\n{stderr}");
    assert!(
        stderr.contains("code 0x2") && stderr.contains("connection limit"),
        "no CONNECTION_REFUSED in the client's error:\n{stderr}"
    );
    // One round trip, not a handshake timeout.
    assert!(took < Duration::from_secs(3), "refused after {took:?}");
    assert!(!out.exists(), "a refused download left a file");

    let done = first.wait().expect("wait");
    assert!(
        done.success(),
        "the first client failed:\n{}",
        read_log(&first_err)
    );
    // Its connection closed (the client's CONNECTION_CLOSE, then three PTOs of draining): the
    // slot is free again well before the 30 s idle timeout.
    assert!(
        server.wait_for_log("connection released", Duration::from_secs(5)),
        "the closed connection was not released:\n{}",
        server.output()
    );
    let (status, stderr) = run_get(&args(&url), &mut server);
    assert!(
        status.success(),
        "the client after the close failed:\n{stderr}\n{}",
        server.output()
    );
    assert_eq!(std::fs::read(&out).expect("file").len(), 10_000);
    drop::<Proc>(server);
}
