//! What the real-time side pulls in: `recoup-net` runs the simulator's path elements
//! and live encoder from their own crates, not the simulator, and the transport builds rcgen and
//! the seeded TLS only for those who ask for them by feature.

use std::process::Command;

/// Names of the packages `package` depends on when built alone (normal dependencies, the
/// features it enables itself), from `cargo tree`.
fn dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let out = Command::new(cargo)
        .args(["tree", "--offline", "--edges", "normal", "--prefix", "none"])
        .args(["--package", package])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn recoup_net_does_not_depend_on_the_simulator() {
    let deps = dependencies("recoup-net");
    for needed in ["recoup-elements", "recoup-apps", "recoup-transport"] {
        assert!(
            deps.iter().any(|d| d == needed),
            "{needed} missing: {deps:?}"
        );
    }
    assert!(
        !deps.iter().any(|d| d == "recoup-sim"),
        "recoup-sim in {deps:?}"
    );
}

#[test]
fn the_transport_alone_builds_neither_rcgen_nor_the_seeded_tls() {
    let deps = dependencies("recoup-transport");
    assert!(
        deps.iter().any(|d| d == "rustls"),
        "rustls missing: {deps:?}"
    );
    for unwanted in ["rcgen", "x25519-dalek"] {
        assert!(
            !deps.iter().any(|d| d == unwanted),
            "{unwanted} in {deps:?}"
        );
    }
}
