//! A small self-contained SVG line chart: one x axis, two series, each on
//! a y axis of its own (left and right), with a title, axis labels and a
//! legend. Written by hand so the benchmark needs no plotting crate.

use std::fmt::Write;

/// Chart width, in SVG user units (pixels).
const WIDTH: f64 = 760.0;
/// Chart height.
const HEIGHT: f64 = 440.0;
/// Margins around the plot area: left, right, top, bottom.
const MARGIN: (f64, f64, f64, f64) = (90.0, 90.0, 50.0, 60.0);

/// One line of the chart: its name (the legend's and its axis's label),
/// colour and points `(x, y)`.
pub struct Series<'a> {
    /// Legend and axis label.
    pub name: &'a str,
    /// An SVG colour (`#1f77b4`, `darkred`).
    pub color: &'a str,
    /// The points, in x order.
    pub points: Vec<(f64, f64)>,
}

/// The chart of `left` (scaled on the left axis) and `right` (on the right
/// axis) over a common x axis labelled `x_label`; both axes start at zero.
pub fn line_chart(title: &str, x_label: &str, left: &Series, right: &Series) -> String {
    let (ml, mr, mt, mb) = MARGIN;
    let (x0, x1, y0, y1) = (ml, WIDTH - mr, HEIGHT - mb, mt);
    let max =
        |s: &Series, pick: fn(&(f64, f64)) -> f64| s.points.iter().map(pick).fold(0.0f64, f64::max);
    let x_axis = Axis::new(max(left, |p| p.0).max(max(right, |p| p.0)));
    let left_axis = Axis::new(max(left, |p| p.1));
    let right_axis = Axis::new(max(right, |p| p.1));
    let sx = |x: f64| x0 + (x1 - x0) * x / x_axis.top;
    let sy = |axis: &Axis, y: f64| y0 - (y0 - y1) * y / axis.top;

    let mut s = String::new();
    // Writing to a String cannot fail.
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        s,
        r#"<rect x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="28" text-anchor="middle" font-size="15" font-weight="bold">{}</text>"#,
        WIDTH / 2.0,
        escape(title)
    );
    // Grid and x ticks.
    for i in 0..=x_axis.ticks {
        let v = x_axis.step * f64::from(i);
        let x = sx(v);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{y0}" x2="{x:.1}" y2="{y1}" stroke="#e4e4e4"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="{x:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            y0 + 18.0,
            short(v)
        );
    }
    // Left and right y ticks (the grid follows the left axis).
    for i in 0..=left_axis.ticks {
        let v = left_axis.step * f64::from(i);
        let y = sy(&left_axis, v);
        let _ = writeln!(
            s,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#e4e4e4"/>"##
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="{}">{}</text>"#,
            x0 - 6.0,
            y + 4.0,
            left.color,
            short(v)
        );
    }
    for i in 0..=right_axis.ticks {
        let v = right_axis.step * f64::from(i);
        let y = sy(&right_axis, v);
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="start" fill="{}">{}</text>"#,
            x1 + 6.0,
            y + 4.0,
            right.color,
            short(v)
        );
    }
    // Frame, then axis labels.
    let _ = writeln!(
        s,
        r#"<rect x="{x0}" y="{y1}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        x1 - x0,
        y0 - y1
    );
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        HEIGHT - 15.0,
        escape(x_label)
    );
    let mid = (y0 + y1) / 2.0;
    let _ = writeln!(
        s,
        r#"<text x="25" y="{mid:.1}" text-anchor="middle" fill="{}" transform="rotate(-90 25 {mid:.1})">{}</text>"#,
        left.color,
        escape(left.name)
    );
    let right_x = WIDTH - 20.0;
    let _ = writeln!(
        s,
        r#"<text x="{right_x}" y="{mid:.1}" text-anchor="middle" fill="{}" transform="rotate(90 {right_x} {mid:.1})">{}</text>"#,
        right.color,
        escape(right.name)
    );
    // The lines, with a dot at each point.
    for (series, axis) in [(left, &left_axis), (right, &right_axis)] {
        let points: Vec<String> = series
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(axis, y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"/>"#,
            points.join(" "),
            series.color
        );
        for &(x, y) in &series.points {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                sx(x),
                sy(axis, y),
                series.color
            );
        }
    }
    // Legend, in the plot's top right corner (text about 7 units a
    // character).
    let longest = left.name.chars().count().max(right.name.chars().count()) + 8;
    let legend_width = 46.0 + 7.0 * longest as f64;
    let lx = x1 - legend_width - 10.0;
    let _ = writeln!(
        s,
        r#"<rect x="{lx:.1}" y="{}" width="{legend_width:.1}" height="44" fill="white" fill-opacity="0.85" stroke="gray"/>"#,
        y1 + 8.0
    );
    for (i, (series, side)) in [(left, "left"), (right, "right")].into_iter().enumerate() {
        let y = y1 + 24.0 + 18.0 * i as f64;
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{y:.1}" x2="{:.1}" y2="{y:.1}" stroke="{}" stroke-width="2"/>"#,
            lx + 8.0,
            lx + 30.0,
            series.color
        );
        let _ = writeln!(
            s,
            r#"<text x="{:.1}" y="{:.1}">{} ({side})</text>"#,
            lx + 36.0,
            y + 4.0,
            escape(series.name)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// An axis from zero: `ticks` steps of `step` up to `top`, a round number
/// at or above the largest value.
struct Axis {
    step: f64,
    ticks: u32,
    top: f64,
}

impl Axis {
    /// About five steps of 1, 2 or 5 times a power of ten.
    fn new(max: f64) -> Self {
        let max = if max.is_finite() && max > 0.0 {
            max
        } else {
            1.0
        };
        let raw = max / 5.0;
        let magnitude = 10f64.powf(raw.log10().floor());
        let step = [1.0, 2.0, 5.0, 10.0]
            .into_iter()
            .map(|m| m * magnitude)
            .find(|&s| s >= raw)
            .unwrap_or(10.0 * magnitude);
        let ticks = (max / step - 1e-9).ceil().max(1.0) as u32;
        Self {
            step,
            ticks,
            top: step * f64::from(ticks),
        }
    }
}

/// A tick label: `1.5M`, `200k`, `40`.
fn short(v: f64) -> String {
    let (scaled, suffix) = if v >= 1e9 {
        (v / 1e9, "G")
    } else if v >= 1e6 {
        (v / 1e6, "M")
    } else if v >= 1e3 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

/// `text` with XML's special characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_end_on_round_numbers_above_the_largest_value() {
        let a = Axis::new(87_000.0);
        assert_eq!((a.step, a.ticks, a.top), (20_000.0, 5, 100_000.0));
        let a = Axis::new(2_000_000.0);
        assert_eq!((a.step, a.ticks, a.top), (500_000.0, 4, 2_000_000.0));
        let a = Axis::new(0.0);
        assert!(a.top > 0.0);
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(short(1_500_000.0), "1.5M");
        assert_eq!(short(200_000.0), "200k");
        assert_eq!(short(40.0), "40");
        assert_eq!(short(0.0), "0");
    }

    #[test]
    fn a_chart_is_one_svg_element_with_both_series() {
        let left = Series {
            name: "a & b",
            color: "red",
            points: vec![(1.0, 2.0), (2.0, 3.0)],
        };
        let right = Series {
            name: "c",
            color: "blue",
            points: vec![(1.0, 5.0), (2.0, 1.0)],
        };
        let svg = line_chart("t <1>", "x", &left, &right);
        assert!(svg.starts_with("<svg ") && svg.ends_with("</svg>\n"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains("a &amp; b") && svg.contains("t &lt;1&gt;"));
    }
}
