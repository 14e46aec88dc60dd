//! The README's `compare` example is what `recoup compare` prints: the default comparison (the
//! main job of `scripts/compare.sh`) is run here and its table must stand in README.md verbatim,
//! so a change of results fails this test until the README shows the new table.

use std::path::Path;
use std::process::Command;

#[test]
fn readme_shows_what_the_default_compare_prints() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md readable");
    let dir = tempfile::tempdir().expect("tempdir");
    let res = Command::new(env!("CARGO_BIN_EXE_recoup"))
        .arg("compare")
        .arg("--out")
        .arg(dir.path().join("out"))
        .output()
        .expect("run recoup compare");
    assert!(
        res.status.success(),
        "recoup compare failed:\n{}",
        String::from_utf8_lossy(&res.stderr)
    );
    let stdout = String::from_utf8(res.stdout).expect("UTF-8 output");
    // The heading line and the table: everything before the first blank line.
    let table: Vec<&str> = stdout.lines().take_while(|l| !l.is_empty()).collect();
    assert!(table.len() >= 3, "no table in compare's output:\n{stdout}");
    let block = table.join("\n");
    assert!(
        readme.contains(&block),
        "README.md's compare example differs from what `recoup compare` prints today; \
         replace the table in README.md's \"The main job\" section with:\n{block}"
    );
}
