//! `--plot FILE.svg`: the figures as an SVG that any browser shows. Timeline: GPUs allocated
//! over time, and the CDF of waits per queue. Inflation: allocation and fragmentation over
//! arrival, as the paper's figures. With `--compare`, both configs on the same axes.

use crate::inflation::Inflation;
use crate::metrics::Metrics;
use crate::run::Run;
use plotters::prelude::*;
use std::collections::BTreeMap;

/// What one replay contributes to a plot.
#[derive(Debug, Clone, Copy)]
pub struct View<'a> {
    /// Its figures (the config's name labels its lines).
    pub metrics: &'a Metrics,
    /// Timeline mode's record.
    pub run: Option<&'a Run>,
    /// Inflation mode's record.
    pub inflation: Option<&'a Inflation>,
}

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

type Series = (String, Vec<(f64, f64)>);

/// Allocated GPUs (percent) over hours since the first arrival, at most ~2000 points.
fn allocation_series(run: &Run) -> Vec<(f64, f64)> {
    let Some(&(start, _)) = run.allocation.first() else {
        return Vec::new();
    };
    let first = run
        .jobs
        .iter()
        .filter(|j| j.refused.is_none())
        .map(|j| j.submit_ms)
        .min()
        .unwrap_or(start);
    let end = run.last_ms.max(first + 1);
    let step = ((end - first) / 2000).max(1);
    let total = run.total_gpu_milli.max(1) as f64;
    let mut out = Vec::new();
    let mut last = 0u64;
    let mut it = run.allocation.iter().peekable();
    let mut t = first;
    while t <= end {
        while let Some(&&(at, v)) = it.peek() {
            if at > t {
                break;
            }
            last = v;
            it.next();
        }
        out.push((
            (t - first) as f64 / 3_600_000.0,
            last as f64 / total * 100.0,
        ));
        t += step;
    }
    out
}

/// The CDF of waits (seconds) of the jobs of each queue.
fn wait_cdfs(run: &Run) -> BTreeMap<String, Vec<(f64, f64)>> {
    let mut waits: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for j in &run.jobs {
        if let Some(w) = j.wait_ms() {
            waits
                .entry(j.queue.clone())
                .or_default()
                .push(w as f64 / 1000.0);
        }
    }
    waits
        .into_iter()
        .map(|(q, mut v)| {
            v.sort_by(f64::total_cmp);
            let n = v.len() as f64;
            let pts = v
                .iter()
                .enumerate()
                .map(|(i, w)| (*w, (i + 1) as f64 / n))
                .collect();
            (q, pts)
        })
        .collect()
}

fn percent_series(run: &Inflation, frag: bool) -> Vec<(f64, f64)> {
    let map = if frag {
        run.fragmentation_ratio_at()
    } else {
        run.allocation_ratio_at()
    };
    map.into_iter().map(|(k, v)| (f64::from(k), v)).collect()
}

fn err<E: std::fmt::Display>(e: E) -> crate::Error {
    crate::Error::Invalid(format!("drawing the plot: {e}"))
}

fn panel(
    area: &DrawingArea<SVGBackend<'_>, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    y_max: f64,
    series: &[Series],
) -> crate::Result<()> {
    let x_max = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1e-3);
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(55)
        .build_cartesian_2d(0f64..x_max * 1.02, 0f64..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .draw()
        .map_err(err)?;
    for (i, (label, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), color.stroke_width(2)))
            .map_err(err)?
            .label(label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

/// The SVG of one replay, or of two side by side (`b`).
pub fn svg(a: &View<'_>, b: Option<&View<'_>>) -> crate::Result<String> {
    let views: Vec<&View<'_>> = std::iter::once(a).chain(b).collect();
    let mut top: Vec<Series> = Vec::new();
    let mut bottom: Vec<Series> = Vec::new();
    let inflation = a.inflation.is_some();
    for v in &views {
        let name = &v.metrics.config;
        if let Some(run) = v.run {
            top.push((name.clone(), allocation_series(run)));
            for (q, pts) in wait_cdfs(run) {
                bottom.push((format!("{name}: queue {q}"), pts));
            }
        }
        if let Some(run) = v.inflation {
            top.push((name.clone(), percent_series(run, false)));
            bottom.push((name.clone(), percent_series(run, true)));
        }
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (1000, 900)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (upper, lower) = root.split_vertically(450);
        if inflation {
            panel(
                &upper,
                "GPU allocation as workload arrives (inflation)",
                "arrived GPU requests, % of the cluster's GPUs",
                "GPUs allocated, %",
                100.0,
                &top,
            )?;
            panel(
                &lower,
                "GPU fragmentation (Beware of Fragmentation's definition)",
                "arrived GPU requests, % of the cluster's GPUs",
                "fragmented / idle GPUs, %",
                100.0,
                &bottom,
            )?;
        } else {
            panel(
                &upper,
                "GPU allocation over time",
                "hours since the first arrival",
                "GPUs allocated, %",
                100.0,
                &top,
            )?;
            panel(
                &lower,
                "Wait (arrival to gang start), CDF per queue",
                "wait, seconds",
                "fraction of jobs",
                1.0,
                &bottom,
            )?;
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}
