//! `compare.png`: one bar chart per headline metric, policies side by side, with 95 %
//! confidence intervals as whiskers.

use std::path::Path;

use plotters::prelude::*;
use plotters::style::{register_font, FontStyle};
use recoup_sim::metrics::SummaryRow;

use crate::cmd::simulate::PointResult;

/// Where Debian's fonts-dejavu-core puts the font the plot is labelled with.
pub const FONT_PATH: &str = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf";

/// Panels: title, y-axis label, metric, scale to display units.
const PANELS: [(&str, &str, &str, f64); 4] = [
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

/// Draws the first sweep point's policies into a PNG at `path`.
pub fn compare_png(path: &Path, results: &[PointResult]) -> Result<(), String> {
    register()?;
    let point = results.first().ok_or("no results to plot")?;
    draw(path, point).map_err(|e| format!("{}: {e}", path.display()))
}

fn draw(path: &Path, point: &PointResult) -> Result<(), Box<dyn std::error::Error>> {
    let mut policies: Vec<&str> = Vec::new();
    for r in &point.runs {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let root = BitMapBackend::new(path, (1400, 1000)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("recoup compare: {}", point.scenario),
        ("sans-serif", 28),
    )?;
    for (area, (title, ylabel, metric, scale)) in root.split_evenly((2, 2)).iter().zip(PANELS) {
        panel(
            area,
            &policies,
            &point.summary,
            title,
            ylabel,
            metric,
            scale,
        )?;
    }
    root.present()?;
    Ok(())
}

fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    policies: &[&str],
    summary: &[SummaryRow],
    title: &str,
    ylabel: &str,
    metric: &str,
    scale: f64,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    // (mean, ci low, ci high) per policy, in display units.
    let bars: Vec<Option<(f64, f64, f64)>> = policies
        .iter()
        .map(|p| {
            let s = summary
                .iter()
                .find(|s| s.policy == *p && s.metric == metric)?;
            let m = s.mean? * scale;
            let lo = s.ci95_low.map_or(m, |v| v * scale);
            let hi = s.ci95_high.map_or(m, |v| v * scale);
            Some((m, lo, hi))
        })
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
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d((0..last).into_segmented(), 0.0..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .y_desc(ylabel)
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
