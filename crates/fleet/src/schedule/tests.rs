use super::*;
use crate::Ratio;
use proptest::prelude::*;

fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

fn parse(lines: &[&str]) -> Schedule {
    Schedule::parse(lines).unwrap()
}

#[test]
fn parses_the_issue_examples() {
    let f = |t: &str| t.parse::<Fault>().unwrap();
    assert_eq!(
        f("from 15s to 45s latency x10"),
        Fault {
            window: Window::Span {
                from: s(15),
                to: Some(s(45))
            },
            effect: Effect::LatencyScale(10.0)
        }
    );
    assert_eq!(
        f("from 20s to 25s fail 100%"),
        Fault {
            window: Window::Span {
                from: s(20),
                to: Some(s(25))
            },
            effect: Effect::Fail {
                rate: Ratio::ONE,
                status: None
            }
        }
    );
    assert_eq!(
        f("every 10s pause 5s"),
        Fault {
            window: Window::Every {
                period: s(10),
                length: s(5),
                first: s(5),
                to: None
            },
            effect: Effect::Pause
        }
    );
    assert_eq!(
        f("at 30s pause 2s").window,
        Window::Span {
            from: s(30),
            to: Some(s(32))
        }
    );
    assert_eq!(
        f("every 10s for 2s from 1s to 60s latency +50ms").window,
        Window::Every {
            period: s(10),
            length: s(2),
            first: s(1),
            to: Some(s(60))
        }
    );
    let pair = parse(&["at 30s down", "at 40s up"]);
    assert_eq!(
        pair.faults()[0].window,
        Window::Span {
            from: s(30),
            to: Some(s(40))
        }
    );
}

#[test]
fn display_round_trips() {
    for text in [
        "from 15s to 45s latency x10",
        "from 1s latency +5ms",
        "from 1s to 2s latency 300ms",
        "from 20s to 25s fail 100% status 503",
        "from 0s close 5%",
        "from 0s reset 2.5%",
        "every 10s for 5s from 5s pause",
        "every 10s for 1s from 0s to 30s down",
    ] {
        let fault: Fault = text.parse().unwrap();
        assert_eq!(fault.to_string(), text);
    }
}

#[test]
fn rejects_with_a_reason() {
    let err = |t: &str| t.parse::<Fault>().unwrap_err().reason;
    assert!(err("latency x10").contains("no time"));
    assert!(err("from 15s").contains("no effect"));
    assert!(err("from 15s to 10s pause").contains("after `from`"));
    assert!(err("from 1s fail 40").contains("percentage"));
    assert!(err("from 1s explode").contains("unknown effect"));
    assert!(err("every 10s latency x2").contains("needs a length"));
    assert!(err("every 10s pause 10s").contains("below its period"));
    assert!(err("from 1s from 2s down").contains("twice"));
    assert!(err("at 4s up").contains("only ends"));
    let unpaired = Schedule::parse(&["at 40s up"]).unwrap_err();
    assert!(
        unpaired.reason.contains("no open-ended `at T down`"),
        "{unpaired}"
    );
}

#[test]
fn pause_chains_across_touching_windows() {
    let sched = parse(&[
        "from 10s to 20s pause",
        "from 20s to 25s pause",
        "from 24s to 30s pause",
    ]);
    assert_eq!(sched.paused_until(s(12)), Some(s(30)));
    assert_eq!(sched.paused_until(s(30)), None);
    assert_eq!(sched.paused_until(s(9)), None);
    let forever = parse(&["every 10s pause 5s from 0s", "every 10s pause 5s from 5s"]);
    assert_eq!(forever.paused_until(s(3)), Some(Duration::MAX));
    let open = parse(&["at 3s pause"]);
    assert_eq!(open.paused_until(s(4)), Some(Duration::MAX));
}

#[test]
fn next_change_walks_every_boundary() {
    let sched = parse(&[
        "from 15s to 45s latency x10",
        "every 10s pause 5s",
        "at 30s down",
        "at 40s up",
    ]);
    let mut t = Duration::ZERO;
    let mut seen = Vec::new();
    while let Some(next) = sched.next_change(t) {
        if next > s(60) {
            break;
        }
        seen.push(next.as_secs());
        t = next;
    }
    assert_eq!(seen, [5, 10, 15, 20, 25, 30, 35, 40, 45, 50, 55, 60]);
}

#[test]
fn end_all_stops_scheduled_pauses() {
    let mut sched = parse(&["every 10s pause 5s"]);
    sched.end_all(Effect::Pause, s(7));
    assert_eq!(sched.paused_until(s(6)), Some(s(7)));
    assert_eq!(sched.paused_until(s(16)), None);
}

proptest! {
    #[test]
    fn paused_until_lands_on_an_unpaused_time(
        period in 2u64..20, len in 1u64..20, first in 0u64..20, t in 0u64..200_000,
    ) {
        prop_assume!(len < period);
        let sched = Schedule::parse(&[format!("every {period}s pause {len}s from {first}s")]).unwrap();
        let t = Duration::from_millis(t);
        match sched.paused_until(t) {
            Some(end) => {
                prop_assert!(end > t && sched.paused_until(end).is_none());
                let mid = t + (end - t) / 2;
                prop_assert!(sched.paused_until(mid).is_some());
            }
            None => prop_assert!(!sched.faults()[0].window.contains(t)),
        }
    }

    #[test]
    fn next_change_is_strictly_later(period in 2u64..20, len in 1u64..20, t in 0u64..100_000) {
        prop_assume!(len < period);
        let sched = Schedule::parse(&[format!("every {period}s for {len}s latency x2")]).unwrap();
        let t = Duration::from_millis(t);
        let next = sched.next_change(t).unwrap();
        prop_assert!(next > t);
        // Nothing changes strictly between t and next.
        let w = sched.faults()[0].window;
        prop_assert_eq!(w.contains(t), w.contains(next - Duration::from_nanos(1)));
    }
}
