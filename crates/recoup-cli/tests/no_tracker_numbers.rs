//! The repository never cites an issue or a work session by number: a reader cannot look either
//! up, so code, tests and documents say what the number stood for (the requirement, the paper's
//! figure, the RFC section). `git grep` over the tracked files: either word in any letter case,
//! singular or plural, then a space, a hyphen or a `#`, then a digit.

use std::path::Path;
use std::process::Command;

#[test]
fn no_file_cites_an_issue_or_session_number() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if !root.join(".git").exists() {
        // A source archive without history: nothing to ask git about.
        eprintln!("no .git at {}: skipped", root.display());
        return;
    }
    let out = Command::new("git")
        .current_dir(&root)
        .args([
            "grep",
            "-n",
            "-I",
            "-i",
            "-E",
            r"\b(issue|session)s?[ -]#?[0-9]",
        ])
        .output()
        .expect("run git grep (git is needed where .git exists)");
    // git grep: 0 = found, 1 = nothing found, anything else = it failed.
    match out.status.code() {
        Some(1) => {}
        Some(0) => panic!(
            "issue or session numbers in the repository; say what each stood for instead:\n{}",
            String::from_utf8_lossy(&out.stdout)
        ),
        _ => panic!("git grep failed: {}", String::from_utf8_lossy(&out.stderr)),
    }
}
