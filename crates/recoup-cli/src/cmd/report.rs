//! `recoup report`: one self-contained HTML page of a results directory, in the spirit of
//! Pantheon's reports: the plot (embedded as a data URI), a table per scenario point, the
//! scenario file and the commit.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use recoup_sim::metrics::SummaryRow;

use super::plot::{self, Named};
use super::simulate::Error;
use crate::plot::{headline_panels, Panel};

/// Write one self-contained HTML page for a results directory of `run`, `sweep` or `compare`:
/// the plot of `recoup plot` (embedded), per scenario point a table of the headline metrics
/// (mean ± 95 % CI half-width per policy), the scenario (DIR/scenario.toml) and the commit.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup report recoup-compare
  recoup report results/alpha --out alpha.html")]
pub struct Args {
    /// Results directory holding summary.csv.
    pub dir: PathBuf,
    /// Output HTML file (default: DIR/report.html).
    #[arg(long, value_name = "FILE.html")]
    pub out: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<(), Error> {
    let rows = plot::read_summary(&args.dir)?;
    let png = args.dir.join("plot.png");
    plot::run(plot::Args {
        dir: args.dir.clone(),
        metric: Vec::new(),
        x: None,
        out: Some(png.clone()),
    })?;
    let image = std::fs::read(&png).map_err(|source| Error::Io {
        path: png.clone(),
        source,
    })?;
    let scenario = std::fs::read_to_string(args.dir.join("scenario.toml")).ok();
    let html = page(&args.dir, &rows, &image, scenario.as_deref(), &commit());
    let out = args.out.unwrap_or_else(|| args.dir.join("report.html"));
    std::fs::write(&out, html).map_err(|source| Error::Io {
        path: out.clone(),
        source,
    })?;
    println!("wrote {}", out.display());
    Ok(())
}

/// The checkout's commit, when the report is made inside one.
fn commit() -> String {
    Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown (not run inside a git checkout)".into())
}

fn page(dir: &Path, rows: &[Named], png: &[u8], scenario: Option<&str>, commit: &str) -> String {
    let mut points: Vec<&str> = Vec::new();
    for (s, _) in rows {
        if !points.contains(&s.as_str()) {
            points.push(s);
        }
    }
    let mut h = String::new();
    let title = format!("recoup report: {}", dir.display());
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{t}</title>\n\
         <style>body{{font-family:sans-serif;margin:2em;max-width:1400px}}\
         table{{border-collapse:collapse;margin:0.5em 0 1.5em}}\
         td,th{{border:1px solid #bbb;padding:4px 10px;text-align:right}}\
         th:first-child,td:first-child{{text-align:left}}img{{max-width:100%}}\
         pre{{background:#f4f4f4;padding:1em}}</style></head><body>\n<h1>{t}</h1>\n\
         <p>recoup commit: <code>{c}</code>; {n} scenario point(s). Means over seeds, \
         &plusmn; the half-width of the 95 % confidence interval; rates and costs in percent.</p>\n\
         <img alt=\"plot of the headline metrics\" src=\"data:image/png;base64,{img}\">\n",
        t = escape(&title),
        c = escape(commit),
        n = points.len(),
        img = base64(png),
    );
    for point in &points {
        let summary: Vec<SummaryRow> = rows
            .iter()
            .filter(|(s, _)| s == point)
            .map(|(_, r)| r.clone())
            .collect();
        let _ = write!(h, "<h2>{}</h2>\n{}", escape(point), table(&summary));
    }
    if let Some(text) = scenario {
        let _ = write!(h, "<h2>Scenario</h2>\n<pre>{}</pre>\n", escape(text));
    }
    h.push_str("</body></html>\n");
    h
}

/// Policies down, headline metrics across.
fn table(summary: &[SummaryRow]) -> String {
    let panels: Vec<Panel> = headline_panels(summary);
    let mut policies: Vec<&str> = Vec::new();
    for r in summary {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let mut t = String::from("<table><tr><th>policy</th>");
    for p in &panels {
        let _ = write!(t, "<th>{} ({})</th>", escape(&p.title), escape(&p.ylabel));
    }
    t.push_str("</tr>\n");
    for policy in policies {
        let _ = write!(t, "<tr><td>{}</td>", escape(policy));
        for p in &panels {
            let row = summary
                .iter()
                .find(|r| r.policy == policy && r.metric == p.metric);
            let cell = match row.and_then(|r| r.mean.map(|m| (m, r.ci95_high))) {
                Some((m, Some(hi))) => {
                    format!("{:.2} &plusmn; {:.2}", m * p.scale, (hi - m) * p.scale)
                }
                Some((m, None)) => format!("{:.2}", m * p.scale),
                None => "-".into(),
            };
            let _ = write!(t, "<td>{cell}</td>");
        }
        t.push_str("</tr>\n");
    }
    t.push_str("</table>\n");
    t
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Standard base64 (RFC 4648 §4) with padding, for the data URI.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_test_vectors() {
        // RFC 4648 §10.
        for (plain, encoded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(escape("a<b>&\"c\""), "a&lt;b&gt;&amp;&quot;c&quot;");
    }
}
