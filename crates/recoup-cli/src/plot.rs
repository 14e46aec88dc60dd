//! Result plots: `compare.png`-style bar charts (one panel per metric, policies side by side)
//! and sweep line plots (one panel per metric, a line per policy over a sweep axis), both with
//! 95 % confidence intervals as whiskers.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use recoup_net::link_log::LogEvent;
use recoup_sim::metrics::SummaryRow;

use crate::cmd::simulate::PointResult;

/// Where Debian's fonts-dejavu-core puts the font the plot is labelled with.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// The headline panels: title, y-axis label, metric, scale to display units.
pub const PANELS: [(&str, &str, &str, f64); 4] = [
    (
        "Recovery latency, first retransmission lost",
        "ms (mean over seeds)",
        "recovery_latency_multi_ms",
        1.0,
    ),
    (
        "Recovery deterioration rate",
        "% of lost ranges",
        "deterioration_rate",
        100.0,
    ),
    (
        "Redundancy cost",
        "% copies / new packets",
        "redundancy_cost",
        100.0,
    ),
    ("Freezes", "freezes per 100 s", "freezes_per_100s", 1.0),
];

/// The headline panels of `PANELS` whose metric has a value in `summary`; a live stream's
/// freezes give way to an RTC call's deadline misses (AutoRec §VII measures RTC by frames that
/// miss their playback deadline), so no panel is drawn empty.
#[must_use]
pub fn headline_panels(summary: &[SummaryRow]) -> Vec<Panel> {
    let measured = |metric: &str| {
        summary
            .iter()
            .any(|s| s.metric == metric && s.mean.is_some())
    };
    PANELS
        .iter()
        .map(|p| p.2)
        .map(|m| {
            if m == "freezes_per_100s" && !measured(m) && measured("deadline_miss_rate") {
                "deadline_miss_rate"
            } else {
                m
            }
        })
        .filter(|m| measured(m))
        .map(Panel::of)
        .collect()
}

/// Loads the font once per process; the plotting library keeps a `'static` reference.
fn register() -> Result<(), String> {
    static FONT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    FONT.get_or_init(|| {
        let bytes = std::fs::read(FONT_PATH).map_err(|e| {
            format!("font {FONT_PATH} not readable ({e}); install fonts-dejavu-core")
        })?;
        register_font(
            "sans-serif",
            FontStyle::Normal,
            Box::leak(bytes.into_boxed_slice()),
        )
        .map_err(|_| format!("font {FONT_PATH} is not a valid TrueType font"))
    })
    .clone()
}

/// One panel: which metric, and how it is labelled and scaled for display.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub title: String,
    pub ylabel: String,
    pub metric: String,
    pub scale: f64,
}

impl Panel {
    /// The headline panel of `metric` when it is one, else a panel titled by the metric with
    /// fractions shown as percent.
    #[must_use]
    pub fn of(metric: &str) -> Self {
        if let Some(&(title, ylabel, metric, scale)) = PANELS.iter().find(|p| p.2 == metric) {
            return Self {
                title: title.into(),
                ylabel: ylabel.into(),
                metric: metric.into(),
                scale,
            };
        }
        let fraction = ["_rate", "_cost", "_reduction", "_fraction"]
            .iter()
            .any(|s| metric.ends_with(s));
        let (ylabel, scale) = if fraction {
            ("%", 100.0)
        } else if metric.ends_with("_ms") {
            ("ms", 1.0)
        } else if metric.ends_with("_mbps") {
            ("Mbit/s", 1.0)
        } else {
            ("", 1.0)
        };
        Self {
            title: metric.into(),
            ylabel: ylabel.into(),
            metric: metric.into(),
            scale,
        }
    }
}

/// One line of a sweep plot: a label and, per x value, the summary rows of that point.
#[derive(Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, Vec<SummaryRow>)>,
}

/// The x axis of a sweep plot: its label, and tick labels when the values are categories drawn
/// at 0, 1, 2 ...
#[derive(Debug)]
pub struct XAxis {
    pub label: String,
    pub categories: Option<Vec<String>>,
}

/// Draws the first sweep point's policies into a PNG at `path`.
pub fn compare_png(path: &Path, results: &[PointResult]) -> Result<(), String> {
    let point = results.first().ok_or("no results to plot")?;
    let mut policies: Vec<&str> = Vec::new();
    for r in &point.runs {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let panels = headline_panels(&point.summary);
    bars_png(
        path,
        &format!("recoup compare: {}", point.scenario),
        &policies,
        &point.summary,
        &panels,
    )
}

/// Bar charts of `panels`, one bar per policy, into a PNG at `path`.
pub fn bars_png(
    path: &Path,
    title: &str,
    policies: &[&str],
    summary: &[SummaryRow],
    panels: &[Panel],
) -> Result<(), String> {
    register()?;
    draw_bars(path, title, policies, summary, panels)
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// Line plots of `panels` over `x`, one line per series, into a PNG at `path`.
pub fn lines_png(
    path: &Path,
    title: &str,
    x: &XAxis,
    series: &[Series],
    panels: &[Panel],
) -> Result<(), String> {
    register()?;
    draw_lines(path, title, x, series, panels).map_err(|e| format!("{}: {e}", path.display()))
}

/// Legend entries per row under a sweep plot.
const LEGEND_COLUMNS: usize = 3;

/// Width of a throughput bin in a link graph.
const LINK_BIN_MS: u64 = 100;

/// An mm-graph-style picture of a link log into a PNG at `path`: offered (arrivals) and
/// delivered (departures) throughput in 100 ms bins, and each datagram's delay through the link
/// at its departure.
pub fn link_log_png(path: &Path, title: &str, events: &[LogEvent]) -> Result<(), String> {
    register()?;
    draw_link_log(path, title, events).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw_link_log(
    path: &Path,
    title: &str,
    events: &[LogEvent],
) -> Result<(), Box<dyn std::error::Error>> {
    let end_ms = events
        .iter()
        .map(|e| match *e {
            LogEvent::Arrival { ms, .. }
            | LogEvent::Departure { ms, .. }
            | LogEvent::Opportunity { ms, .. } => ms,
        })
        .max()
        .ok_or("the log has no events")?;
    let bins = (end_ms / LINK_BIN_MS + 1) as usize;
    let mut offered = vec![0u64; bins];
    let mut delivered = vec![0u64; bins];
    let mut delays: Vec<(f64, f64)> = Vec::new();
    for e in events {
        match *e {
            LogEvent::Arrival { ms, bytes } => offered[(ms / LINK_BIN_MS) as usize] += bytes,
            LogEvent::Departure {
                ms,
                bytes,
                delay_ms,
            } => {
                delivered[(ms / LINK_BIN_MS) as usize] += bytes;
                delays.push((ms as f64 / 1e3, delay_ms as f64));
            }
            LogEvent::Opportunity { .. } => {}
        }
    }
    let mbps = |bytes: u64| bytes as f64 * 8.0 / (LINK_BIN_MS as f64 * 1e3);
    let series = |v: &[u64]| -> Vec<(f64, f64)> {
        v.iter()
            .enumerate()
            .map(|(i, &b)| ((i as u64 * LINK_BIN_MS) as f64 / 1e3, mbps(b)))
            .collect()
    };
    let (offered, delivered) = (series(&offered), series(&delivered));
    let x_hi = (end_ms as f64 / 1e3).max(0.1);
    let rate_hi = offered
        .iter()
        .chain(&delivered)
        .map(|p| p.1)
        .fold(0.0_f64, f64::max)
        .max(0.1)
        * 1.15;
    let delay_hi = delays.iter().map(|p| p.1).fold(0.0_f64, f64::max).max(1.0) * 1.15;
    let root = BitMapBackend::new(path, (1200, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 28))?;
    let (top, bottom) = root.split_vertically(430);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("Throughput ({LINK_BIN_MS} ms bins)"),
            ("sans-serif", 22),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_hi, 0.0..rate_hi)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("Mbit/s")
        .label_style(("sans-serif", 16))
        .draw()?;
    for (i, (label, points)) in [("offered (arrivals)", &offered), ("delivered", &delivered)]
        .into_iter()
        .enumerate()
    {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(
                points.iter().copied(),
                color.stroke_width(2),
            ))?
            .label(label)
            .legend(move |(lx, ly)| {
                PathElement::new(vec![(lx, ly), (lx + 20, ly)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .label_font(("sans-serif", 14))
        .draw()?;
    let mut chart = ChartBuilder::on(&bottom)
        .caption("Per-packet delay through the link", ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_hi, 0.0..delay_hi)?;
    chart
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("delay (ms)")
        .label_style(("sans-serif", 16))
        .draw()?;
    let color = Palette99::pick(2).to_rgba();
    chart.draw_series(
        delays
            .iter()
            .map(|&(t, d)| Circle::new((t, d), 2, color.filled())),
    )?;
    root.present()?;
    Ok(())
}

/// Rows and columns of panels: two columns from two panels on.
fn grid(panels: usize) -> (usize, usize) {
    let cols = if panels > 1 { 2 } else { 1 };
    (panels.div_ceil(cols).max(1), cols)
}

fn draw_bars(
    path: &Path,
    title: &str,
    policies: &[&str],
    summary: &[SummaryRow],
    panels: &[Panel],
) -> Result<(), Box<dyn std::error::Error>> {
    let (rows, cols) = grid(panels.len());
    let root = BitMapBackend::new(path, (700 * cols as u32, 500 * rows as u32)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 28))?;
    for (area, p) in root.split_evenly((rows, cols)).iter().zip(panels) {
        panel(area, policies, summary, p)?;
    }
    root.present()?;
    Ok(())
}

/// Mean, 95 % CI low and high.
type Stat = (f64, f64, f64);

/// (mean, ci low, ci high) of `metric` in `summary` for `policy` (the first row of the metric
/// when `None`), in display units.
fn stat(summary: &[SummaryRow], policy: Option<&str>, metric: &str, scale: f64) -> Option<Stat> {
    let s = summary
        .iter()
        .find(|s| policy.is_none_or(|p| s.policy == p) && s.metric == metric)?;
    let m = s.mean? * scale;
    let lo = s.ci95_low.map_or(m, |v| v * scale);
    let hi = s.ci95_high.map_or(m, |v| v * scale);
    Some((m, lo, hi))
}

fn draw_lines(
    path: &Path,
    title: &str,
    x: &XAxis,
    series: &[Series],
    panels: &[Panel],
) -> Result<(), Box<dyn std::error::Error>> {
    let (x_lo, x_hi) = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.0))
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if !x_lo.is_finite() {
        return Err("no points to plot".into());
    }
    let pad = if x_hi > x_lo {
        (x_hi - x_lo) * 0.05
    } else {
        0.5
    };
    let (rows, cols) = grid(panels.len());
    // One legend for the figure, in a strip below the panels, so it never covers a line.
    let per_row = LEGEND_COLUMNS.min(series.len()).max(1);
    let legend_h = 32 * series.len().div_ceil(per_row) as u32 + 12;
    let width = 700 * cols as u32;
    let root = BitMapBackend::new(path, (width, 500 * rows as u32 + legend_h)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 28))?;
    let plots_h = root.dim_in_pixel().1.saturating_sub(legend_h);
    let (plots, legend) = root.split_vertically(plots_h);
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        let x = 20 + (i % per_row) as i32 * (width / per_row as u32) as i32;
        let y = 6 + (i / per_row) as i32 * 32;
        legend.draw(&PathElement::new(
            vec![(x, y + 9), (x + 30, y + 9)],
            color.stroke_width(3),
        ))?;
        legend.draw(&Text::new(s.label.clone(), (x + 38, y), ("sans-serif", 16)))?;
    }
    for (area, p) in plots.split_evenly((rows, cols)).iter().zip(panels) {
        let lines: Vec<Vec<(f64, Stat)>> = series
            .iter()
            .map(|s| {
                s.points
                    .iter()
                    .filter_map(|(xv, summary)| {
                        stat(summary, None, &p.metric, p.scale).map(|v| (*xv, v))
                    })
                    .collect()
            })
            .collect();
        let values = || lines.iter().flatten().map(|&(_, v)| v);
        let top = values().map(|(m, _, hi)| m.max(hi)).fold(0.0_f64, f64::max);
        let bottom = values().map(|(m, lo, _)| m.min(lo)).fold(0.0_f64, f64::min);
        let top = if top > bottom {
            top + (top - bottom) * 0.15
        } else {
            bottom + 1.0
        };
        let mut chart = ChartBuilder::on(area)
            .caption(&p.title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d((x_lo - pad)..(x_hi + pad), bottom..top)?;
        let tick = |v: &f64| match &x.categories {
            Some(c) => {
                let i = v.round();
                if (v - i).abs() < 1e-6 && i >= 0.0 {
                    c.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            }
            None => format!("{v}"),
        };
        let mut mesh = chart.configure_mesh();
        mesh.y_desc(p.ylabel.as_str())
            .x_desc(x.label.as_str())
            .x_label_formatter(&tick)
            .label_style(("sans-serif", 16))
            .axis_desc_style(("sans-serif", 16));
        if let Some(c) = &x.categories {
            // One tick per category: the range spans len - 1 plus padding.
            mesh.x_labels(c.len());
        }
        mesh.draw()?;
        for (i, line) in lines.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart.draw_series(LineSeries::new(
                line.iter().map(|&(xv, (m, _, _))| (xv, m)),
                color.stroke_width(2),
            ))?;
            chart.draw_series(
                line.iter()
                    .map(|&(xv, (m, _, _))| Circle::new((xv, m), 4, color.filled())),
            )?;
            chart.draw_series(line.iter().filter(|(_, (_, lo, hi))| hi > lo).map(
                |&(xv, (_, lo, hi))| {
                    PathElement::new(vec![(xv, lo), (xv, hi)], color.stroke_width(2))
                },
            ))?;
        }
    }
    root.present()?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    policies: &[&str],
    summary: &[SummaryRow],
    panel: &Panel,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let bars: Vec<Option<(f64, f64, f64)>> = policies
        .iter()
        .map(|p| stat(summary, Some(p), &panel.metric, panel.scale))
        .collect();
    let top = bars
        .iter()
        .flatten()
        .map(|&(m, _, hi)| m.max(hi))
        .fold(0.0_f64, f64::max);
    let top = if top > 0.0 { top * 1.15 } else { 1.0 };
    // A segmented 0..k has k + 1 segments; the last policy sits in the end segment.
    let last = policies.len().saturating_sub(1).max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0..last).into_segmented(), 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(panel.ylabel.as_str())
        .x_desc("policy")
        .x_label_formatter(&|v| match v {
            SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => {
                policies.get(*i).map_or(String::new(), |p| (*p).to_owned())
            }
            SegmentValue::Last => String::new(),
        })
        .label_style(("sans-serif", 16))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    for (i, bar) in bars.iter().enumerate() {
        let Some((m, lo, hi)) = *bar else { continue };
        let color = Palette99::pick(i).filled();
        let mut rect = Rectangle::new(
            [
                (SegmentValue::Exact(i), 0.0),
                (SegmentValue::Exact(i + 1), m),
            ],
            color,
        );
        rect.set_margin(0, 0, 18, 18);
        chart.draw_series(std::iter::once(rect))?;
        if hi > lo {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![
                    (SegmentValue::CenterOf(i), lo),
                    (SegmentValue::CenterOf(i), hi),
                ],
                BLACK.stroke_width(2),
            )))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(metric: &str, mean: Option<f64>) -> SummaryRow {
        SummaryRow {
            policy: "arq".into(),
            metric: metric.into(),
            n: u64::from(mean.is_some()),
            mean,
            std: None,
            p50: mean,
            p95: mean,
            p99: mean,
            ci95_low: None,
            ci95_high: None,
        }
    }

    fn metrics(summary: &[SummaryRow]) -> Vec<String> {
        headline_panels(summary)
            .into_iter()
            .map(|p| p.metric)
            .collect()
    }

    #[test]
    fn panels_without_values_are_left_out_and_rtc_shows_deadline_misses() {
        let live = [
            row("recovery_latency_multi_ms", Some(80.0)),
            row("deterioration_rate", Some(0.03)),
            row("redundancy_cost", Some(0.0)),
            row("freezes_per_100s", Some(0.2)),
            row("deadline_miss_rate", None),
        ];
        assert_eq!(
            metrics(&live),
            [
                "recovery_latency_multi_ms",
                "deterioration_rate",
                "redundancy_cost",
                "freezes_per_100s"
            ]
        );
        // An RTC call (ge-burst) has no freezes: its deadline misses take the panel.
        let rtc = [
            row("recovery_latency_multi_ms", None),
            row("deterioration_rate", Some(0.03)),
            row("redundancy_cost", Some(0.1)),
            row("freezes_per_100s", None),
            row("deadline_miss_rate", Some(0.01)),
        ];
        assert_eq!(
            metrics(&rtc),
            [
                "deterioration_rate",
                "redundancy_cost",
                "deadline_miss_rate"
            ]
        );
    }
}
