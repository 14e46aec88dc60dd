//! Time is injected (DESIGN.md principle 1): nothing in this crate's sources reads a clock.
//! Clippy enforces it (root clippy.toml `disallowed-methods`, denied in lib.rs); this test also
//! catches a call hidden from clippy by an `allow`, or code clippy never sees (cfg'd out).

use std::path::Path;

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_sources_never_read_a_clock() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    assert!(files.len() > 20, "found the sources: {}", files.len());
    let mut offenders = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
            if ["Instant::now(", "SystemTime::now(", "UNIX_EPOCH.elapsed("]
                .iter()
                .any(|banned| compact.contains(banned))
            {
                offenders.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "clock reads:\n{}",
        offenders.join("\n")
    );
}
