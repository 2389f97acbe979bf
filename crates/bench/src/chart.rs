//! The picture of a run: server CPU per call, one horizontal bar per
//! scenario and server (the median over repetitions, a line from the
//! fastest to the slowest repetition), as SVG.

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::report::{Results, spread};
use crate::servers::Kind;

/// Each server's colour (colour-blind-safe Okabe–Ito palette).
fn colour(kind: Kind) -> RGBColor {
    match kind {
        Kind::Floor => RGBColor(153, 153, 153),
        Kind::HandRolled => RGBColor(230, 159, 0),
        Kind::Tern => RGBColor(0, 114, 178),
        Kind::TernDefault => RGBColor(0, 158, 115),
        Kind::TernAxum => RGBColor(86, 180, 233),
        Kind::Rmcp => RGBColor(213, 94, 0),
        Kind::Gateway => RGBColor(204, 121, 167),
        Kind::GatewayStdio => RGBColor(240, 228, 66),
    }
}

/// One bar: its label, server, median and spread.
struct Bar {
    label: String,
    kind: Kind,
    median: f64,
    min: f64,
    max: f64,
}

fn bars(results: &Results) -> Vec<Bar> {
    let mut bars = Vec::new();
    for ((scenario, kind), samples) in &results.load {
        let cpu: Vec<f64> = samples.iter().map(|s| s.cpu_us).collect();
        let Some(s) = spread(&cpu) else {
            continue;
        };
        bars.push(Bar {
            label: format!("{} · {}", results.scenarios[*scenario], kind.name()),
            kind: *kind,
            median: s.median,
            min: s.min,
            max: s.max,
        });
    }
    bars
}

/// The chart of `results`' load figures as an SVG document (`None` if
/// nothing was measured).
pub(crate) fn svg(results: &Results, subtitle: &str) -> Result<Option<String>, String> {
    // Drawn bottom up: reversed, the first scenario's floor is on top.
    let mut bars = bars(results);
    bars.reverse();
    if bars.is_empty() {
        return Ok(None);
    }
    let widest = bars.iter().map(|b| b.max).fold(1.0, f64::max) * 1.15;
    let rows = bars.len();
    let height = u32::try_from(rows).unwrap_or(64).saturating_mul(26) + 110;
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (900, height)).into_drawing_area();
        let e = |e: DrawingAreaErrorKind<_>| e.to_string();
        root.fill(&WHITE).map_err(e)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                format!("Server CPU per call, µs (lower is better) — {subtitle}"),
                ("sans-serif", 16),
            )
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(190)
            .build_cartesian_2d(0.0..widest, (0..rows).into_segmented())
            .map_err(e)?;
        let labels: Vec<&str> = bars.iter().map(|b| b.label.as_str()).collect();
        chart
            .configure_mesh()
            .disable_y_mesh()
            .y_labels(rows)
            .y_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) => {
                    labels.get(*i).map_or(String::new(), |l| (*l).to_owned())
                }
                _ => String::new(),
            })
            .x_desc("server CPU µs per logical call (median; line: min–max over repetitions)")
            .draw()
            .map_err(e)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let mut r = Rectangle::new(
                    [
                        (0.0, SegmentValue::Exact(i)),
                        (b.median, SegmentValue::Exact(i + 1)),
                    ],
                    colour(b.kind).filled(),
                );
                r.set_margin(3, 3, 0, 0);
                r
            }))
            .map_err(e)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                PathElement::new(
                    vec![
                        (b.min, SegmentValue::CenterOf(i)),
                        (b.max, SegmentValue::CenterOf(i)),
                    ],
                    BLACK.stroke_width(1),
                )
            }))
            .map_err(e)?;
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                Text::new(
                    format!("{:.1}", b.median),
                    (b.max + widest * 0.01, SegmentValue::CenterOf(i)),
                    ("sans-serif", 12),
                )
            }))
            .map_err(e)?;
        root.present().map_err(e)?;
    }
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_measured_line_is_a_labelled_bar_and_nothing_measured_draws_nothing() {
        let results = crate::report::tests::two_reps();
        let svg = super::svg(&results, "test machine").unwrap().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..svg.len().min(200)]);
        for label in [
            "echo · tern",
            "echo · hand-rolled",
            "mrtr · tern",
            "test machine",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
        // The medians are printed beside their bars.
        for median in ["11.0", "27.5"] {
            assert!(svg.contains(median), "{median} missing");
        }
        let empty = crate::report::Results::default();
        assert!(super::svg(&empty, "x").unwrap().is_none());
    }
}
