//! `recoup report`: a results directory becomes one self-contained HTML page (plot embedded,
//! tables, scenario, commit) that headless Chromium opens and screenshots; an unreadable or
//! empty directory is an error naming the path.

use std::path::Path;
use std::process::Command;

const SCENARIO: &str = r#"
name = "report"
seed = 1
repetitions = 2
duration = "2s"

[path]
rtt = "60ms"
rate = "12Mbps"
loss = "bernoulli 5%"

[app]
kind = "live"
bitrate = "2Mbps"

[[policy]]
name = "arq"

[[policy]]
name = "autorec"
"#;

fn recoup() -> Command {
    Command::new(env!("CARGO_BIN_EXE_recoup"))
}

fn run_ok(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run recoup");
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr_of_failure(cmd: &mut Command) -> String {
    let out = cmd.output().expect("run recoup");
    assert!(!out.status.success(), "{cmd:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Debian's `chromium` (scripts/test.sh installs it).
fn chromium() -> &'static str {
    ["chromium", "chromium-browser"]
        .into_iter()
        .find(|c| {
            Command::new(c)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("chromium not installed (scripts/test.sh installs Debian's chromium)")
}

#[test]
fn report_is_one_page_that_chromium_renders() {
    let dir = tempfile::tempdir().expect("tempdir");
    let plan = dir.path().join("report.toml");
    std::fs::write(&plan, SCENARIO).expect("write scenario");
    let out = dir.path().join("results");
    run_ok(recoup().arg("run").arg(&plan).arg("--out").arg(&out));
    run_ok(recoup().arg("report").arg(&out));
    let html = std::fs::read_to_string(out.join("report.html")).expect("report.html");
    // Self-contained: the plot is inside, nothing is loaded from elsewhere.
    assert!(
        html.contains("src=\"data:image/png;base64,iVBORw0KGgo"),
        "no embedded PNG"
    );
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(html.contains("<h2>report</h2>") && html.contains("<td>autorec</td>"));
    assert!(html.contains("Redundancy cost") && html.contains("&plusmn;"));
    assert!(html.contains("bernoulli 5%"), "the scenario is shown");
    assert!(html.contains("recoup commit: <code>"));

    let shot = dir.path().join("report.png");
    let status = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--window-size=1400,1800",
        ])
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", out.join("report.html").display()))
        .output()
        .expect("run chromium");
    assert!(
        status.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&status.stderr)
    );
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"));
    // A page with a plot and tables, not a blank one (a blank 1400x1800 PNG is a few KB).
    assert!(png.len() > 40_000, "screenshot of {} bytes", png.len());
}

#[test]
fn unreadable_or_empty_directories_are_errors_naming_the_path() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("no-such-results");
    let err = stderr_of_failure(recoup().arg("report").arg(&missing));
    assert!(err.contains(&missing.display().to_string()), "{err}");
    let empty = dir.path().join("empty");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let err = stderr_of_failure(recoup().arg("report").arg(&empty));
    assert!(err.contains(&empty.display().to_string()), "{err}");
    assert!(err.contains("summary.csv"), "{err}");
    assert!(!Path::new(&empty.join("report.html")).exists());
}
