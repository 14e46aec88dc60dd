//! `recoup plot`: a PNG from a results directory of `run`, `sweep` or `compare`.

use std::path::{Path, PathBuf};

use recoup_sim::metrics::SummaryRow;

use super::simulate::Error;
use crate::plot::{Panel, Series, XAxis};

/// Plot a results directory (DIR/summary.csv of `recoup run`, `sweep` or `compare`), or the
/// per-packet log of `recoup link --log` (throughput and delay over time, as mm-graph draws).
///
/// One scenario point: bar charts, one bar per policy, as `recoup compare` draws them. A sweep:
/// the mean of each metric over the sweep axis, one line per policy, with the 95 % confidence
/// interval as whiskers; with several axes, --x picks one and the others label the lines.
/// Default metrics: recovery latency (first retransmission lost), deterioration rate, redundancy
/// cost and freezes per 100 s.
#[derive(clap::Args, Debug)]
#[command(after_help = "Examples:
  recoup plot recoup-compare
  recoup plot results/alpha --metric recovery_latency_multi_ms --metric redundancy_cost
  recoup plot results/grid --x path.rtt --out rtt.png
  recoup plot down.log --out down.png")]
pub struct Args {
    /// Results directory holding summary.csv, or a `recoup link --log` file.
    pub dir: PathBuf,
    /// Metric to plot (a `metric` of summary.csv; repeat for more panels).
    #[arg(long, value_name = "NAME")]
    pub metric: Vec<String>,
    /// Sweep axis on the x axis (as in the plan's `[sweep]` table, e.g. path.rtt).
    #[arg(long, value_name = "AXIS")]
    pub x: Option<String>,
    /// Output PNG (default: DIR/plot.png).
    #[arg(long, value_name = "FILE.png")]
    pub out: Option<PathBuf>,
}

/// A summary row with its scenario point.
pub(super) type Named = (String, SummaryRow);

pub fn run(args: Args) -> Result<(), Error> {
    if args.dir.is_file() {
        return link_graph(&args.dir, args.out);
    }
    let rows = read_summary(&args.dir)?;
    let panels = panels(&rows, &args.metric)?;
    let out = args.out.unwrap_or_else(|| args.dir.join("plot.png"));
    let mut points: Vec<&str> = Vec::new();
    for (s, _) in &rows {
        if !points.contains(&s.as_str()) {
            points.push(s);
        }
    }
    let dir_name = args.dir.display().to_string();
    if points.len() == 1 && args.x.is_none() {
        let summary: Vec<SummaryRow> = rows.iter().map(|(_, r)| r.clone()).collect();
        let mut policies: Vec<&str> = Vec::new();
        for r in &summary {
            if !policies.contains(&r.policy.as_str()) {
                policies.push(&r.policy);
            }
        }
        crate::plot::bars_png(&out, points[0], &policies, &summary, &panels)
            .map_err(|e| Error::Usage(format!("no plot: {e}")))?;
    } else {
        let (x, series) = lines(&dir_name, &rows, &points, args.x.as_deref())?;
        let base = points[0].split('[').next().unwrap_or(points[0]);
        crate::plot::lines_png(&out, &format!("recoup sweep: {base}"), &x, &series, &panels)
            .map_err(|e| Error::Usage(format!("no plot: {e}")))?;
    }
    println!("wrote {}", out.display());
    Ok(())
}

/// The graph of a `recoup link --log` (or `mm-link --downlink-log`) file, into FILE.png beside
/// it by default.
fn link_graph(log: &Path, out: Option<PathBuf>) -> Result<(), Error> {
    let text = std::fs::read_to_string(log).map_err(|source| Error::Io {
        path: log.to_owned(),
        source,
    })?;
    let (_, events) = recoup_net::link_log::parse(&text)
        .map_err(|e| Error::Usage(format!("{}: {e}", log.display())))?;
    let out = out.unwrap_or_else(|| log.with_extension("png"));
    let title = format!("recoup link: {}", log.display());
    crate::plot::link_log_png(&out, &title, &events)
        .map_err(|e| Error::Usage(format!("no plot: {e}")))?;
    println!("wrote {}", out.display());
    Ok(())
}

/// Reads DIR/summary.csv: the columns `scenario`, `policy`, `metric`, `n`, `mean`, `ci95_low`
/// and `ci95_high` are required, the other statistics read when present.
pub(super) fn read_summary(dir: &Path) -> Result<Vec<Named>, Error> {
    if !dir.is_dir() {
        return Err(Error::Usage(format!(
            "{}: no such results directory (write one with recoup run, sweep or compare)",
            dir.display()
        )));
    }
    let path = dir.join("summary.csv");
    let bad = |detail: String| Error::Usage(format!("{}: {detail}", path.display()));
    let mut reader = csv::Reader::from_path(&path).map_err(|e| {
        bad(format!(
            "{e} (a results directory of recoup run, sweep or compare has one)"
        ))
    })?;
    let header = reader.headers().map_err(|e| bad(e.to_string()))?.clone();
    let col = |name: &str| header.iter().position(|h| h == name);
    let need = |name: &str| {
        col(name).ok_or_else(|| {
            bad(format!(
                "no column {name}; is this the summary.csv of recoup run, sweep or compare?"
            ))
        })
    };
    let [scenario, policy, metric, n, mean, lo, hi] = [
        need("scenario")?,
        need("policy")?,
        need("metric")?,
        need("n")?,
        need("mean")?,
        need("ci95_low")?,
        need("ci95_high")?,
    ];
    let [std, p50, p95, p99] = [col("std"), col("p50"), col("p95"), col("p99")];
    let mut rows = Vec::new();
    for (i, record) in reader.records().enumerate() {
        let line = i + 2;
        let record = record.map_err(|e| bad(e.to_string()))?;
        let text = |c: usize| record.get(c).unwrap_or("");
        let num = |c: Option<usize>| -> Result<Option<f64>, Error> {
            let Some(c) = c else { return Ok(None) };
            match text(c) {
                "" => Ok(None),
                v => v.parse().map(Some).map_err(|_| {
                    bad(format!(
                        "line {line}: column {}: not a number: {v:?}",
                        &header[c]
                    ))
                }),
            }
        };
        let count = text(n)
            .parse()
            .map_err(|_| bad(format!("line {line}: column n: not a count: {:?}", text(n))))?;
        rows.push((
            text(scenario).to_owned(),
            SummaryRow {
                policy: text(policy).to_owned(),
                metric: text(metric).to_owned(),
                n: count,
                mean: num(Some(mean))?,
                std: num(std)?,
                p50: num(p50)?,
                p95: num(p95)?,
                p99: num(p99)?,
                ci95_low: num(Some(lo))?,
                ci95_high: num(Some(hi))?,
            },
        ));
    }
    if rows.is_empty() {
        return Err(bad("no rows".into()));
    }
    Ok(rows)
}

/// The panels asked for, or the headline metrics the directory has values of.
fn panels(rows: &[Named], asked: &[String]) -> Result<Vec<Panel>, Error> {
    let mut valid: Vec<&str> = Vec::new();
    for (_, r) in rows {
        if !valid.contains(&r.metric.as_str()) {
            valid.push(&r.metric);
        }
    }
    if asked.is_empty() {
        let summary: Vec<SummaryRow> = rows.iter().map(|(_, r)| r.clone()).collect();
        let headline = crate::plot::headline_panels(&summary);
        if headline.is_empty() {
            return Err(Error::Usage(format!(
                "none of the default metrics has a value in the results; choose with --metric: {}",
                valid.join(", ")
            )));
        }
        return Ok(headline);
    }
    asked
        .iter()
        .map(|m| {
            if valid.contains(&m.as_str()) {
                Ok(Panel::of(m))
            } else {
                Err(Error::Usage(format!(
                    "unknown metric {m:?}; the results have: {}",
                    valid.join(", ")
                )))
            }
        })
        .collect()
}

/// Splits a sweep point's name, `base[axis=value,...]`, into its axes. A comma starts a new
/// axis only before `key=`, so values with commas (arrays) stay whole.
fn axes(name: &str) -> Vec<(String, String)> {
    let Some(inner) = name
        .strip_suffix(']')
        .and_then(|s| s.find('[').map(|i| &s[i + 1..]))
    else {
        return Vec::new();
    };
    let is_key = |k: &str| {
        !k.is_empty()
            && k.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-\"".contains(c))
    };
    let mut out: Vec<(String, String)> = Vec::new();
    for piece in inner.split(',') {
        match piece.split_once('=') {
            Some((k, v)) if is_key(k) => out.push((k.to_owned(), v.to_owned())),
            _ => match out.last_mut() {
                Some((_, v)) => {
                    v.push(',');
                    v.push_str(piece);
                }
                None => return Vec::new(),
            },
        }
    }
    out
}

/// Replaces each number in `s` by `#`, returning the template and the numbers.
fn numbers(s: &str) -> (String, Vec<f64>) {
    let mut template = String::new();
    let mut found = Vec::new();
    let mut digits = String::new();
    let flush = |digits: &mut String, template: &mut String, found: &mut Vec<f64>| {
        if !digits.is_empty() {
            match digits.parse() {
                Ok(v) => {
                    found.push(v);
                    template.push('#');
                }
                Err(_) => template.push_str(digits),
            }
            digits.clear();
        }
    };
    for c in s.chars() {
        if c.is_ascii_digit() || (c == '.' && !digits.is_empty() && !digits.contains('.')) {
            digits.push(c);
        } else {
            flush(&mut digits, &mut template, &mut found);
            template.push(c);
        }
    }
    flush(&mut digits, &mut template, &mut found);
    (template, found)
}

/// Positions on the x axis for an axis's values, and the axis label: numbers, durations in ms,
/// the varying number when every value is the same text around one (`bernoulli 5%`), else
/// categories in sweep order.
fn positions(axis: &str, values: &[&str]) -> (Vec<f64>, XAxis) {
    if let Ok(v) = values.iter().map(|v| v.parse::<f64>()).collect() {
        let x = XAxis {
            label: axis.to_owned(),
            categories: None,
        };
        return (v, x);
    }
    if let Ok(d) = values
        .iter()
        .map(|v| recoup_elements::parse_duration(v))
        .collect::<Result<Vec<_>, _>>()
    {
        let x = d.iter().map(|d| d.as_secs_f64() * 1e3).collect();
        let label = format!("{axis} (ms)");
        return (
            x,
            XAxis {
                label,
                categories: None,
            },
        );
    }
    let parsed: Vec<(String, Vec<f64>)> = values.iter().map(|v| numbers(v)).collect();
    let (template, first) = &parsed[0];
    let same = parsed
        .iter()
        .all(|(t, n)| t == template && n.len() == first.len());
    if same {
        let varying: Vec<usize> = (0..first.len())
            .filter(|&i| parsed.iter().any(|(_, n)| n[i] != first[i]))
            .collect();
        if let [i] = varying[..] {
            let label = format!("{axis}: {}", template.replace('#', "N"));
            let x = parsed.iter().map(|(_, n)| n[i]).collect();
            return (
                x,
                XAxis {
                    label,
                    categories: None,
                },
            );
        }
    }
    let x = (0..values.len()).map(|i| i as f64).collect();
    let categories = Some(values.iter().map(|v| (*v).to_owned()).collect());
    (
        x,
        XAxis {
            label: axis.to_owned(),
            categories,
        },
    )
}

/// The lines of a sweep plot: per policy (and values of the other axes), the points over `x`.
fn lines(
    dir: &str,
    rows: &[Named],
    points: &[&str],
    x: Option<&str>,
) -> Result<(XAxis, Vec<Series>), Error> {
    let parsed: Vec<Vec<(String, String)>> = points.iter().map(|p| axes(p)).collect();
    let names: Vec<&str> = parsed[0].iter().map(|(k, _)| k.as_str()).collect();
    let consistent = parsed
        .iter()
        .all(|a| a.iter().map(|(k, _)| k.as_str()).eq(names.iter().copied()));
    if names.is_empty() || !consistent {
        return Err(Error::Usage(match x {
            Some(x) => format!(
                "--x {x}: {dir} holds no sweep (its points: {})",
                points.join(", ")
            ),
            None => format!(
                "{dir} holds {} scenario points that are not one sweep ({}); plot one \
                 results directory per scenario",
                points.len(),
                points.join(", ")
            ),
        }));
    }
    let axis = match x {
        Some(x) if names.contains(&x) => x,
        Some(x) => {
            return Err(Error::Usage(format!(
                "--x {x}: not an axis of the sweep in {dir}; its axes: {}",
                names.join(", ")
            )))
        }
        None if names.len() == 1 => names[0],
        None => {
            return Err(Error::Usage(format!(
                "{dir} holds a sweep over {}: choose the x axis with --x",
                names.join(", ")
            )))
        }
    };
    let at = names.iter().position(|n| *n == axis).unwrap_or(0);
    let mut values: Vec<&str> = Vec::new();
    for a in &parsed {
        if !values.contains(&a[at].1.as_str()) {
            values.push(&a[at].1);
        }
    }
    let (xs, x_axis) = positions(axis, &values);
    let mut series: Vec<Series> = Vec::new();
    for (point, a) in points.iter().zip(&parsed) {
        let xv = xs[values.iter().position(|v| *v == a[at].1).unwrap_or(0)];
        let others: Vec<String> = a
            .iter()
            .filter(|(k, _)| k != axis)
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        for (scenario, row) in rows {
            if scenario != point {
                continue;
            }
            let label = if others.is_empty() {
                row.policy.clone()
            } else {
                format!("{} ({})", row.policy, others.join(", "))
            };
            let i = match series.iter().position(|s| s.label == label) {
                Some(i) => i,
                None => {
                    series.push(Series {
                        label,
                        points: Vec::new(),
                    });
                    series.len() - 1
                }
            };
            let s = &mut series[i];
            match s.points.iter_mut().find(|(x, _)| *x == xv) {
                Some((_, summary)) => summary.push(row.clone()),
                None => s.points.push((xv, vec![row.clone()])),
            }
        }
    }
    for s in &mut series {
        s.points.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    Ok((x_axis, series))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_names_split_into_axes() {
        assert_eq!(
            axes("grid[path.rtt=20ms,\"policy.autorec.alpha\"=10ms]"),
            vec![
                ("path.rtt".to_owned(), "20ms".to_owned()),
                ("\"policy.autorec.alpha\"".to_owned(), "10ms".to_owned())
            ]
        );
        assert_eq!(
            axes("g[app.sizes=[1, 2],seed=3]"),
            vec![
                ("app.sizes".to_owned(), "[1, 2]".to_owned()),
                ("seed".to_owned(), "3".to_owned())
            ]
        );
        assert!(axes("default").is_empty());
    }

    #[test]
    fn axis_values_become_positions() {
        let (x, a) = positions("path.loss", &["bernoulli 1%", "bernoulli 5%"]);
        assert_eq!(x, vec![1.0, 5.0]);
        assert_eq!(a.label, "path.loss: bernoulli N%");
        let (x, a) = positions("duration", &["500ms", "2s"]);
        assert_eq!(x, vec![500.0, 2000.0]);
        assert_eq!(a.label, "duration (ms)");
        let (x, a) = positions("path.rate", &["2Mbps", "12Mbps"]);
        assert_eq!(x, vec![2.0, 12.0]);
        assert_eq!(a.label, "path.rate: NMbps");
        let (x, a) = positions("transport.cc", &["bbr", "cubic"]);
        assert_eq!(x, vec![0.0, 1.0]);
        assert_eq!(
            a.categories,
            Some(vec!["bbr".to_owned(), "cubic".to_owned()])
        );
        let (x, _) = positions("app.fps", &["25", "30.5"]);
        assert_eq!(x, vec![25.0, 30.5]);
    }
}
