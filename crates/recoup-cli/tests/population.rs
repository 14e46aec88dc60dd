//! `recoup population` as a user runs it: a small fleet's result files, streams that do not
//! depend on the fleet's size, and bad population files refused before any run.

use std::path::Path;
use std::process::{Command, Output};

const TRACES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../../shared/traces/mahimahi"
);

fn population(srtt: &str, trace: &str) -> String {
    format!(
        r#"
name = "tiny"
seed = 3
duration = "3s"
[draw]
bitrate = {{ dist = "lognormal", mean = "984.5kbps", cv = 0.5, min = "200kbps" }}
srtt = {srtt}
loss = {{ dist = "uniform", min = 0.02, max = 0.08 }}
[[loss_model]]
kind = "bernoulli"
weight = 1
[[loss_model]]
kind = "trace"
weight = 1
traces = ["{trace}"]
[[policy]]
name = "arq"
[[policy]]
name = "too"
"#
    )
}

const SRTT: &str = r#"{ dist = "uniform", min = "40ms", max = "120ms" }"#;

fn recoup(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_recoup"))
        .args(args)
        .output()
        .expect("run recoup")
}

fn run(file: &Path, streams: &str, out: &Path) -> Output {
    recoup(&[
        "population".as_ref(),
        file.as_os_str(),
        "--streams".as_ref(),
        streams.as_ref(),
        "--out".as_ref(),
        out.as_os_str(),
        "--jobs".as_ref(),
        "2".as_ref(),
    ])
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_owned)
        .collect()
}

#[test]
fn a_fleet_writes_its_tables_and_each_stream_is_independent_of_the_fleet_size() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("tiny.toml");
    let trace = format!("{TRACES}/TMobile-LTE-short.down");
    std::fs::write(&file, population(SRTT, &trace)).expect("write");
    let (four, two) = (dir.path().join("four"), dir.path().join("two"));
    for (out, n) in [(&four, "4"), (&two, "2")] {
        let res = run(&file, n, out);
        let stderr = String::from_utf8_lossy(&res.stderr);
        assert!(res.status.success(), "stderr:\n{stderr}");
        assert!(String::from_utf8_lossy(&res.stdout).contains("streams; mean over streams"));
    }
    let runs = lines(&four.join("runs.csv"));
    assert_eq!(runs.len(), 1 + 4 * 2, "{runs:?}");
    assert!(runs[0].starts_with("scenario,policy,seed,"));
    // TOO's columns (the FEC and gaming merges put other columns between them).
    let header: Vec<&str> = runs[0].split(',').collect();
    for column in ["irt_ms", "irt_p95_ms", "retran_ratio", "retran_ratio_added"] {
        assert!(header.contains(&column), "no {column} in {header:?}");
    }
    assert!(runs[1].starts_with("tiny[stream=0],arq,3,"), "{}", runs[1]);
    assert_eq!(lines(&four.join("streams.csv")).len(), 1 + 4);
    let fleet = lines(&four.join("fleet.csv"));
    assert!(fleet[0].starts_with("policy,metric,streams,mean,p5,"));
    assert!(fleet.iter().any(|l| l.starts_with("too,irt_ms,")));
    // Every metric of every policy has its 101 CDF points, or none.
    assert!(lines(&four.join("cdf.csv")).len() > 101);
    // A stream's runs are a pure function of the file and its index.
    let runs_two = lines(&two.join("runs.csv"));
    for row in &runs_two[1..] {
        assert!(runs.contains(row), "{row} differs in the fleet of four");
    }
}

#[test]
fn unsampleable_distributions_and_missing_traces_are_refused_naming_the_key() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("bad.toml");
    let trace = format!("{TRACES}/TMobile-LTE-short.down");
    let cases = [
        (
            population(r#"{ dist = "const", value = "-20ms" }"#, &trace),
            "draw.srtt.value",
        ),
        (
            population(SRTT, &trace).replace("max = 0.08", "max = 1.5"),
            "draw.loss.max",
        ),
        (population(SRTT, "missing.down"), "loss_model[1].traces[0]"),
    ];
    for (text, key) in cases {
        std::fs::write(&file, text).expect("write");
        let out = dir.path().join("out");
        let res = run(&file, "2", &out);
        let stderr = String::from_utf8_lossy(&res.stderr);
        assert_eq!(res.status.code(), Some(1), "stderr: {stderr}");
        assert!(stderr.contains(key), "`{key}` not named in: {stderr}");
        assert!(!out.exists(), "{key}: results written for a bad file");
    }
}
