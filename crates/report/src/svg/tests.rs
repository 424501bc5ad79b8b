use super::*;

/// Every coordinate pair of every series path.
fn series_points(svg: &str) -> Vec<(f64, f64)> {
    let mut points = Vec::new();
    for path in svg.split("<path class=\"series\"").skip(1) {
        let d = path
            .split(" d=\"")
            .nth(1)
            .unwrap()
            .split('"')
            .next()
            .unwrap();
        for op in d.split(' ').filter(|op| op.starts_with(['M', 'L'])) {
            let (x, y) = op[1..].split_once(',').unwrap();
            points.push((x.parse().unwrap(), y.parse().unwrap()));
        }
    }
    points
}

fn assert_inside(chart: &Chart, w: f64, h: f64) {
    let points = series_points(&chart.svg());
    assert!(!points.is_empty());
    for (x, y) in points {
        assert!((LEFT..=w - RIGHT).contains(&x), "x {x} outside the plot");
        assert!((TOP..=h - BOTTOM).contains(&y), "y {y} outside the plot");
    }
}

#[test]
fn ticks_are_round_and_cover_the_data() {
    assert_eq!(
        nice_ticks(0.0, 97.0, 5),
        [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    );
    assert_eq!(nice_ticks(0.5, 29.5, 5), [0.0, 10.0, 20.0, 30.0]);
    assert_eq!(
        nice_ticks(0.0, 100.0, 5),
        [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
    );
    assert_eq!(
        nice_ticks(0.0, 12_000.0, 5),
        [0.0, 2_500.0, 5_000.0, 7_500.0, 10_000.0, 12_500.0]
    );
    let labels: Vec<String> = nice_ticks(0.0, 1.0, 5).into_iter().map(number).collect();
    assert_eq!(labels, ["0", "0.2", "0.4", "0.6", "0.8", "1"]);
    for (lo, hi) in [
        (3.0, 3.0),
        (0.0, 0.0),
        (-7.0, 2.0),
        (1e-4, 3e-4),
        (123.0, 98_765.0),
    ] {
        let ticks = nice_ticks(lo, hi, 5);
        assert!(
            ticks[0] <= lo && ticks[ticks.len() - 1] >= hi,
            "{lo}..{hi}: {ticks:?}"
        );
        assert!((3..=12).contains(&ticks.len()), "{lo}..{hi}: {ticks:?}");
    }
}

#[test]
fn numbers_drop_trailing_zeros_and_use_k_and_m() {
    let cases = [
        (0.0, "0"),
        (0.25, "0.25"),
        (0.1 + 0.2, "0.3"),
        (40.0, "40"),
        (2_500.0, "2.5k"),
        (1_000_000.0, "1M"),
        (-1_500.0, "-1.5k"),
    ];
    for (v, want) in cases {
        assert_eq!(number(v), want, "{v}");
    }
}

#[test]
fn escapes_markup_and_quotes() {
    assert_eq!(
        escape("<a href=\"x\">&'</a>"),
        "&lt;a href=&quot;x&quot;&gt;&amp;&#39;&lt;/a&gt;"
    );
    let svg = Chart::new("a<b")
        .series(Series::new("\"p2c\" & <co>", vec![(0.0, 1.0)]))
        .svg();
    assert!(svg.contains("data-series=\"&quot;p2c&quot; &amp; &lt;co&gt;\""));
    assert!(svg.contains("<title>a&lt;b</title>"));
    assert!(!svg.contains("a<b"));
}

#[test]
fn nines_space_the_tail_evenly() {
    assert_eq!(nines(0.0), 0.0);
    assert!((nines(90.0) - 1.0).abs() < 1e-9);
    assert!((nines(99.9) - 3.0).abs() < 1e-9);
    assert_eq!(nines(100.0), f64::INFINITY);
    let labels: Vec<String> = (1..=5).map(nines_label).collect();
    assert_eq!(labels, ["90%", "99%", "99.9%", "99.99%", "99.999%"]);
    let scale = nines_scale(nines(99.99));
    assert_eq!(scale.hi, 4.0);
    let names: Vec<&str> = scale.ticks.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(names, ["0%", "50%", "90%", "99%", "99.9%", "99.99%"]);
}

#[test]
fn one_path_per_series_in_its_colour() {
    let svg = Chart::new("t")
        .series(Series::new("a", vec![(0.0, 1.0), (1.0, 2.0)]))
        .series(Series::new("b", vec![(0.0, 2.0), (1.0, 3.0)]).dashed())
        .series(Series::new("a p50", vec![(0.0, 0.5)]).color(0).dashed())
        .svg();
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert!(svg.contains("viewBox=\"0 0 640 360\""));
    assert!(svg.trim_end().ends_with("</svg>"));
    assert_eq!(svg.matches("class=\"series\"").count(), 3);
    for name in ["a", "b", "a p50"] {
        assert_eq!(svg.matches(&format!("data-series=\"{name}\"")).count(), 1);
    }
    assert_eq!(
        svg.matches(&format!("stroke=\"{}\"", PALETTE[0])).count(),
        4
    );
    assert_eq!(
        svg.matches(&format!("stroke=\"{}\"", PALETTE[1])).count(),
        2
    );
    // Two dashed series, each with a dashed legend sample.
    assert_eq!(svg.matches("stroke-dasharray=\"6,4\"").count(), 4);
    // The lone point is drawn as a dot.
    assert!(svg.contains("h0\"/>"));
}

#[test]
fn points_map_inside_the_plot_area() {
    let linear = Chart::new("t")
        .series(Series::new(
            "a",
            vec![(0.5, 3.0), (9.5, 1_234.0), (3.0, 0.0)],
        ))
        .series(Series::new("b", vec![(-2.0, -5.0), (4.0, 7.0)]));
    assert_inside(&linear, 640.0, 360.0);
    let fixed = Chart::new("t")
        .size(800.0, 400.0)
        .y_range(0.0, 100.0)
        .series(Series::new(
            "a",
            vec![(0.0, 100.0), (1.0, 250.0), (2.0, -3.0)],
        ));
    assert_inside(&fixed, 800.0, 400.0);
    let curve = vec![
        (0.0, 200.0),
        (50.0, 300.0),
        (99.0, 900.0),
        (99.9, 4e3),
        (100.0, 9e3),
    ];
    let nines = Chart::new("t")
        .nines()
        .y_log(true)
        .series(Series::new("a", curve));
    assert_inside(&nines, 640.0, 360.0);
    // The max (100%) sits on the right edge.
    let last = series_points(&nines.svg()).pop().unwrap();
    assert_eq!(last.0, 640.0 - RIGHT);
}

#[test]
fn the_extremes_land_on_the_axis_ends() {
    let svg = Chart::new("t")
        .series(Series::new("a", vec![(0.0, 0.0), (10.0, 100.0)]))
        .svg();
    let points = series_points(&svg);
    assert_eq!(points, [(LEFT, 360.0 - BOTTOM), (640.0 - RIGHT, TOP)]);
}

#[test]
fn gaps_break_the_line() {
    let chart = Chart::new("t").series(Series::new(
        "a",
        vec![
            (0.0, 1.0),
            (1.0, 2.0),
            (2.0, f64::NAN),
            (3.0, 2.0),
            (4.0, 1.0),
        ],
    ));
    let svg = chart.svg();
    let d = svg.split("class=\"series\"").nth(1).unwrap();
    let d = d.split(" d=\"").nth(1).unwrap().split('"').next().unwrap();
    assert_eq!(d.matches('M').count(), 2);
    assert_eq!(d.matches('L').count(), 2);
}

#[test]
fn log_axis_ticks_at_decades_and_skips_non_positive_values() {
    let chart = Chart::new("t").y_log(true).series(Series::new(
        "a",
        vec![(0.0, 0.0), (1.0, 150.0), (2.0, 80_000.0)],
    ));
    let frame = chart.frame();
    let labels: Vec<&str> = frame.y.ticks.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(labels, ["100", "1k", "10k", "100k"]);
    assert_eq!(series_points(&chart.svg()).len(), 2);
    let narrow = log_scale(Some((0.2, 1.5)), number);
    let labels: Vec<&str> = narrow.ticks.iter().map(|t| t.1.as_str()).collect();
    assert_eq!(labels, ["1", "2", "5", "10", "20", "50", "100"]);
}

#[test]
fn rules_show_only_inside_the_data_range() {
    let chart = || Chart::new("t").series(Series::new("a", vec![(0.0, 10.0), (1.0, 90.0)]));
    assert!(chart()
        .rule(50.0, "deadline")
        .svg()
        .contains(">deadline</text>"));
    assert!(!chart().rule(5_000.0, "deadline").svg().contains("deadline"));
}

#[test]
fn empty_charts_say_so_and_still_render() {
    assert!(Chart::new("t").is_empty());
    assert!(Chart::new("t").series(Series::new("a", vec![])).is_empty());
    let log = Chart::new("t")
        .y_log(true)
        .series(Series::new("a", vec![(1.0, 0.0)]));
    assert!(log.is_empty());
    assert!(log.svg().contains("data-series=\"a\""));
    assert!(!Chart::new("t")
        .series(Series::new("a", vec![(1.0, 0.0)]))
        .is_empty());
}

#[test]
fn same_chart_same_bytes() {
    let chart = || {
        Chart::new("t")
            .nines()
            .series(Series::new("a", vec![(50.0, 1.0), (99.0, 3.0)]))
    };
    assert_eq!(chart().svg(), chart().svg());
}

#[test]
fn twelve_arms_each_have_their_own_colour_and_pattern() {
    let mut chart = Chart::new("arms");
    for i in 0..12 {
        let f = f64::from(i);
        let s = Series::new(format!("arm{i}"), vec![(0.0, f), (1.0, f + 1.0)]);
        chart = chart.series(if i % 2 == 1 { s.dashed() } else { s });
    }
    let svg = chart.svg();
    let mut styles: Vec<(String, String)> = svg
        .split("<path class=\"series\"")
        .skip(1)
        .map(|p| {
            let attr = |name: &str| {
                p.split(&format!(" {name}=\""))
                    .nth(1)
                    .map_or(String::new(), |v| {
                        v.split('"').next().unwrap_or_default().to_string()
                    })
            };
            (attr("stroke"), attr("stroke-dasharray"))
        })
        .collect();
    assert_eq!(styles.len(), 12);
    styles.sort();
    styles.dedup();
    assert_eq!(styles.len(), 12, "two arms look alike: {styles:?}");
}
