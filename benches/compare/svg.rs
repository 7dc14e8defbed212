//! A small log-log line chart, so the report can show how each
//! implementation's cost grows with the population.

use std::fmt::Write;

const COLORS: [&str; 8] = [
    "#d62728", "#1f77b4", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#7f7f7f", "#e377c2",
];

/// `series`: (name, [(population, ns per op)]). Returns an SVG document.
pub fn chart(title: &str, series: &[(String, Vec<(f64, f64)>)]) -> String {
    let (w, h, left, right, top, bottom) = (760.0, 440.0, 70.0, 230.0, 40.0, 50.0);
    let points = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in points {
        x0 = x0.min(x.log10());
        x1 = x1.max(x.log10());
        y0 = y0.min(y.max(0.1).log10());
        y1 = y1.max(y.max(0.1).log10());
    }
    let (y0, y1) = (y0.floor(), y1.ceil());
    let x1 = if x1 > x0 { x1 } else { x0 + 1.0 };
    let px = |x: f64| left + (x.log10() - x0) / (x1 - x0) * (w - left - right);
    let py =
        |y: f64| h - bottom - (y.max(0.1).log10() - y0) / (y1 - y0).max(1.0) * (h - top - bottom);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{left}" y="24" font-size="15">{title}</text>"#
    );
    for decade in y0 as i32..=y1 as i32 {
        let y = py(10f64.powi(decade));
        let _ = writeln!(
            s,
            r##"<line x1="{left}" x2="{}" y1="{y:.1}" y2="{y:.1}" stroke="#ddd"/>"##,
            w - right
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{:.1}" text-anchor="end">{} ns</text>"#,
            left - 6.0,
            y + 4.0,
            10f64.powi(decade)
        );
    }
    for (_, pts) in series.iter().take(1) {
        for &(x, _) in pts {
            let _ = writeln!(
                s,
                r#"<text x="{:.1}" y="{}" text-anchor="middle">{x:.0e}</text>"#,
                px(x),
                h - bottom + 18.0
            );
        }
    }
    let _ = writeln!(
        s,
        r#"<text x="{:.1}" y="{}" text-anchor="middle">pending timers</text>"#,
        (left + w - right) / 2.0,
        h - 10.0
    );
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let path: Vec<String> = pts
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            path.join(" ")
        );
        for &(x, y) in pts {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{color}"/>"#,
                px(x),
                py(y)
            );
        }
        let ly = top + 20.0 + i as f64 * 20.0;
        let _ = writeln!(
            s,
            r#"<rect x="{}" y="{}" width="14" height="4" fill="{color}"/>"#,
            w - right + 15.0,
            ly - 4.0
        );
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{ly}">{name}</text>"#,
            w - right + 35.0
        );
    }
    s.push_str("</svg>\n");
    s
}
