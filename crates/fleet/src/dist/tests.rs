use super::*;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn samples(dist: &LatencyDist, n: usize, seed: u64) -> Vec<f64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..n)
        .map(|_| dist.sample(&mut rng).as_secs_f64() * 1e3)
        .collect()
}

fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

#[test]
fn parses_every_shape() {
    let parse = |s: &str| s.parse::<LatencyDist>().unwrap();
    assert_eq!(parse("20ms"), LatencyDist::Fixed(ms(20)));
    assert_eq!(parse("0"), LatencyDist::Fixed(Duration::ZERO));
    assert_eq!(parse("{fixed: 1s}"), LatencyDist::Fixed(ms(1000)));
    assert_eq!(
        parse("{uniform: {min: 1ms, max: 3ms}}"),
        LatencyDist::Uniform {
            min: ms(1),
            max: ms(3)
        }
    );
    assert_eq!(
        parse("normal: {mean: 167ms, sd: 5ms, max: 200ms}"),
        LatencyDist::Normal {
            mean: ms(167),
            sd: ms(5),
            min: Duration::ZERO,
            max: Some(ms(200))
        }
    );
    assert!(matches!(
        parse("{lognormal: {median: 20ms, sigma: 0.5}}"),
        LatencyDist::LogNormal { .. }
    ));
    assert!(matches!(
        parse("{percentiles: {p50: 1ms, p99.9: 9ms}}"),
        LatencyDist::Percentiles(_)
    ));
    assert!(matches!(
        parse("{replay: {values: [1ms, 2ms]}}"),
        LatencyDist::Replay(_)
    ));
}

#[test]
fn rejects_bad_parameters_with_the_reason() {
    let err = |s: &str| s.parse::<LatencyDist>().unwrap_err().to_string();
    assert!(err("{uniform: {min: 3ms, max: 1ms}}").contains("min is larger than max"));
    assert!(err("{normal: {mean: 1ms}}").contains("missing field `sd`"));
    assert!(err("{normal: {mean: 1ms, sd: 1ms, min: 5ms, max: 2ms}}").contains("max is smaller"));
    assert!(err("{lognormal: {median: 1ms, sigma: -1}}").contains("sigma"));
    assert!(err("{percentiles: {p50: 5ms, p90: 1ms}}").contains("must not decrease"));
    assert!(err("{percentiles: {median: 5ms}}").contains("not a percentile"));
    assert!(err("{gamma: {k: 1}}").contains("unknown variant `gamma`"));
    assert!(err("{fixed: 1ms, uniform: {min: 1ms, max: 2ms}}").contains("two shapes"));
    assert!(err("{replay: {values: []}}").contains("no latency values"));
    assert!(err("150").contains("has no unit"));
}

#[test]
fn display_is_the_file_form() {
    for text in [
        "20ms",
        "{uniform: {min: 1ms, max: 3ms}}",
        "{normal: {mean: 167ms, sd: 5ms, min: 0s, max: 200ms}}",
        "{lognormal: {median: 20ms, sigma: 0.5}}",
        "{percentiles: {p50: 1ms, p99.9: 9ms}}",
    ] {
        let dist: LatencyDist = text.parse().unwrap();
        assert_eq!(dist.to_string(), text);
        assert_eq!(dist.to_string().parse::<LatencyDist>().unwrap(), dist);
    }
}

#[test]
fn normal_matches_mean_and_sd() {
    let dist: LatencyDist = "{normal: {mean: 100ms, sd: 10ms}}".parse().unwrap();
    let (mean, sd) = mean_sd(&samples(&dist, 20_000, 3));
    assert!((mean - 100.0).abs() < 0.5, "mean {mean}");
    assert!((sd - 10.0).abs() < 0.3, "sd {sd}");
}

#[test]
fn lognormal_matches_its_median() {
    let dist: LatencyDist = "{lognormal: {median: 20ms, sigma: 0.5}}".parse().unwrap();
    let med = median(&mut samples(&dist, 20_000, 4));
    assert!((med - 20.0).abs() < 0.5, "median {med}");
}

#[test]
fn percentile_table_reproduces_its_points() {
    let dist: LatencyDist = "{percentiles: {p0: 0ms, p50: 10ms, p90: 20ms, p100: 100ms}}"
        .parse()
        .unwrap();
    let mut xs = samples(&dist, 50_000, 5);
    xs.sort_by(f64::total_cmp);
    let at = |q: f64| xs[(q * xs.len() as f64) as usize];
    assert!((at(0.5) - 10.0).abs() < 0.3, "p50 {}", at(0.5));
    assert!((at(0.9) - 20.0).abs() < 1.0, "p90 {}", at(0.9));
    assert!((at(0.25) - 5.0).abs() < 0.3, "p25 {}", at(0.25));
}

#[test]
fn replay_draws_only_recorded_values() {
    let replay = Replay::from_text("# trace\n1\n2ms\n\n3000us\n", "ms", "t.txt").unwrap();
    assert_eq!(replay.values(), [ms(1), ms(2), ms(3)]);
    let dist = LatencyDist::Replay(replay);
    let xs = samples(&dist, 3_000, 6);
    for v in [1.0, 2.0, 3.0] {
        let count = xs.iter().filter(|x| **x == v).count();
        assert!((900..1100).contains(&count), "{v}: {count}");
    }
    let err = Replay::from_text("1\nfast\n", "ms", "t.txt").unwrap_err();
    assert!(err.to_string().starts_with("t.txt:2: `fast`"), "{err}");
}

#[test]
fn scaling_multiplies_every_shape() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let table: LatencyDist = "{percentiles: {p0: 1ms, p100: 2ms}}".parse().unwrap();
    let d = table.scaled(10.0).sample(&mut rng);
    assert!(d >= ms(10) && d <= ms(20));
    assert_eq!(
        LatencyDist::Fixed(ms(167)).scaled(10.0),
        LatencyDist::Fixed(ms(1670))
    );
}

proptest! {
    #[test]
    fn normal_stays_inside_its_clamp(mean in 0u64..500, sd in 0u64..200, min in 0u64..100, extra in 0u64..300, seed: u64) {
        let dist = LatencyDist::Normal { mean: ms(mean), sd: ms(sd), min: ms(min), max: Some(ms(min + extra)) };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        for _ in 0..50 {
            let d = dist.sample(&mut rng);
            prop_assert!(d >= ms(min) && d <= ms(min + extra));
        }
    }

    #[test]
    fn uniform_stays_inside_its_range(min in 0u64..1000, width in 0u64..1000, seed: u64) {
        let dist = LatencyDist::Uniform { min: ms(min), max: ms(min + width) };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        for _ in 0..50 {
            let d = dist.sample(&mut rng);
            prop_assert!(d >= ms(min) && d <= ms(min + width));
        }
    }

    #[test]
    fn table_quantile_is_monotone_and_bounded(
        mut points in proptest::collection::vec((0.0f64..=100.0, 0u64..10_000), 1..8),
        a in 0.0f64..=1.0,
        b in 0.0f64..=1.0,
    ) {
        points.sort_by(|x, y| x.0.total_cmp(&y.0));
        let mut lat: Vec<u64> = points.iter().map(|p| p.1).collect();
        lat.sort_unstable();
        let table = PercentileTable::new(points.iter().zip(&lat).map(|(p, l)| (p.0, ms(*l)))).unwrap();
        let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
        prop_assert!(table.quantile(lo) <= table.quantile(hi));
        prop_assert!(table.quantile(lo) >= ms(lat[0]) && table.quantile(hi) <= ms(*lat.last().unwrap()));
    }

    #[test]
    fn lognormal_is_never_negative_and_respects_max(median in 1u64..1000, sigma in 0.0f64..3.0, seed: u64) {
        let dist = LatencyDist::LogNormal { median: ms(median), sigma, max: Some(ms(median * 4)) };
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        for _ in 0..50 {
            prop_assert!(dist.sample(&mut rng) <= ms(median * 4));
        }
    }
}
