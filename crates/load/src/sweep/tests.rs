use super::*;
use proptest::prelude::*;

/// Runs the search against a service that meets the objective up to `capacity` req/s.
fn against(capacity: f64, from: f64, to: f64, steps: usize) -> (Knee, Vec<f64>) {
    let mut s = Search::new(from, to, steps);
    let mut tried = Vec::new();
    while let Some(rate) = s.next() {
        assert!(tried.len() < 100, "the search ends");
        tried.push(rate);
        s.record(rate, rate <= capacity);
    }
    (s.knee(), tried)
}

#[test]
fn climbs_the_grid_stops_at_the_first_miss_then_narrows() {
    let (knee, tried) = against(800.0, 400.0, 1200.0, 9);
    // 400..=800 met, 900 missed: the climb stops there (1000..1200 never run), then bisects.
    assert_eq!(&tried[..6], &[400.0, 500.0, 600.0, 700.0, 800.0, 900.0]);
    assert_eq!(&tried[6..], &[850.0, 825.0, 812.5]);
    assert_eq!(
        knee,
        Knee::Between {
            met: 800.0,
            missed: 812.5
        }
    );
}

#[test]
fn a_service_below_or_above_the_range_says_so() {
    let (knee, tried) = against(100.0, 400.0, 1200.0, 9);
    assert_eq!(tried, [400.0]);
    assert_eq!(knee, Knee::BelowRange { lowest: 400.0 });
    let (knee, tried) = against(5_000.0, 400.0, 1200.0, 3);
    assert_eq!(tried, [400.0, 800.0, 1200.0]);
    assert_eq!(knee, Knee::AboveRange { highest: 1200.0 });
}

proptest! {
    /// For any capacity inside the range, the knee brackets it, within the precision unless
    /// the four refinements ran out, and the search never runs past the first miss's grid
    /// point plus the refinements.
    #[test]
    fn the_knee_brackets_the_capacity(
        from in 1.0f64..1_000.0,
        span in 1.5f64..20.0,
        steps in 2usize..20,
        at in 0.0f64..1.0,
    ) {
        let to = from * span;
        let capacity = from + (to - from) * at;
        let (knee, tried) = against(capacity, from, to, steps);
        prop_assert!(tried.len() <= steps + MAX_REFINEMENTS as usize);
        match knee {
            Knee::Between { met, missed } => {
                prop_assert!(met <= capacity && capacity < missed);
                let gap = (missed - met) / met;
                let grid_gap = (to - from) / (steps - 1) as f64 / met;
                prop_assert!(gap <= PRECISION || gap <= grid_gap / 16.0 + 1e-9);
            }
            Knee::AboveRange { highest } => prop_assert!(highest <= capacity),
            Knee::BelowRange { lowest } => prop_assert!(capacity < lowest),
        }
    }
}
