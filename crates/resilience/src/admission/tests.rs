use super::*;
use proptest::prelude::*;
use Criticality::{Critical, Default as Normal, Sheddable};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn admission(max_size: u32) -> Admission {
    Admission::new(QueueConfig {
        max_size,
        max_wait: ms(100),
    })
}

fn queued(a: &mut Admission, class: Criticality) -> Ticket {
    match a.arrive(Duration::ZERO, class, None, 1, None) {
        (Arrival::Queued(t), None) => t,
        other => panic!("{other:?}"),
    }
}

#[test]
fn headers_name_the_classes() {
    assert_eq!(Criticality::parse(b"critical"), Some(Critical));
    assert_eq!(Criticality::parse(b"SHEDDABLE"), Some(Sheddable));
    assert_eq!(Criticality::parse(b"default"), Some(Normal));
    assert_eq!(Criticality::parse(b"urgent"), None);
}

#[test]
fn critical_goes_first_and_each_class_in_order() {
    let mut a = admission(10);
    assert_eq!(
        a.arrive(Duration::ZERO, Normal, None, 1, None).0,
        Arrival::Admitted
    );
    let s1 = queued(&mut a, Sheddable);
    let d1 = queued(&mut a, Normal);
    let c1 = queued(&mut a, Critical);
    let d2 = queued(&mut a, Normal);
    let c2 = queued(&mut a, Critical);
    let mut order = Vec::new();
    for _ in 0..5 {
        a.release(1, &mut order);
    }
    assert_eq!(order, [c1, c2, d1, d2, s1]);
    assert_eq!(a.in_flight(), 1);
}

#[test]
fn a_full_queue_refuses_the_lowest_class_first() {
    let mut a = admission(2);
    a.arrive(Duration::ZERO, Normal, None, 1, None);
    let s = queued(&mut a, Sheddable);
    let d = queued(&mut a, Normal);
    // Full: a sheddable one is refused; a critical one takes the sheddable one's place.
    let full = a.arrive(Duration::ZERO, Sheddable, None, 1, None);
    assert_eq!(full, (Arrival::Refused(Refusal::QueueFull), None));
    let (arrival, displaced) = a.arrive(Duration::ZERO, Critical, None, 1, None);
    assert!(matches!(arrival, Arrival::Queued(_)));
    assert_eq!(displaced, Some(s));
    // Then the default one goes for the next critical one; then nothing is lower.
    let (_, displaced) = a.arrive(Duration::ZERO, Critical, None, 1, None);
    assert_eq!(displaced, Some(d));
    let (arrival, _) = a.arrive(Duration::ZERO, Critical, None, 1, None);
    assert_eq!(arrival, Arrival::Refused(Refusal::QueueFull));
}

#[test]
fn waits_end_at_max_wait_or_when_the_deadline_cannot_be_met() {
    let mut a = admission(10);
    let e = Estimate {
        rtt: ms(10),
        p50: ms(10),
    };
    a.arrive(Duration::ZERO, Normal, None, 2, Some(e));
    a.arrive(Duration::ZERO, Normal, None, 2, Some(e));
    // Third in line under a limit of 2: 1/2 x 10 ms + 10 ms = 15 ms expected.
    let refused = a.arrive(Duration::ZERO, Normal, Some(ms(14)), 2, Some(e));
    assert_eq!(refused.0, Arrival::Refused(Refusal::Deadline));
    let (Arrival::Queued(tight), _) = a.arrive(Duration::ZERO, Normal, Some(ms(16)), 2, Some(e))
    else {
        panic!()
    };
    let (Arrival::Queued(none), _) = a.arrive(Duration::ZERO, Normal, None, 2, Some(e)) else {
        panic!()
    };
    let mut out = Vec::new();
    a.expire(ms(1), 2, Some(e), &mut out);
    assert!(
        out.is_empty(),
        "16 ms left of 15 ms expected at 0: still fine at 1 ms"
    );
    a.expire(ms(2), 2, Some(e), &mut out);
    assert_eq!(out, [(tight, Refusal::Deadline)]);
    // No deadline: only max_wait ends its wait.
    out.clear();
    a.expire(ms(99), 2, Some(e), &mut out);
    assert!(out.is_empty());
    assert_eq!(a.next_expiry(), Some(ms(100)));
    a.expire(ms(100), 2, Some(e), &mut out);
    assert_eq!(out, [(none, Refusal::Waited)]);
    assert_eq!(a.waiting(), 0);
}

#[test]
fn retries_and_backups_never_wait_or_jump_the_queue() {
    let mut a = admission(10);
    assert!(a.try_extra(2));
    assert!(a.try_extra(2));
    assert!(!a.try_extra(2), "no room");
    let mut go = Vec::new();
    a.release(2, &mut go);
    queued(&mut a, Normal);
    // Room under a limit of 3, but a first attempt waits: it goes first.
    assert!(!a.try_extra(3));
    a.admit_waiting(3, &mut go);
    assert_eq!(go.len(), 1);
}

proptest! {
    /// Whatever arrives, ends, expires or is cancelled: in flight never passes the limit (the
    /// admitted ones), the queue never passes its size, and every ticket ends exactly once.
    #[test]
    fn bounds_hold_and_every_ticket_ends_once(
        ops in proptest::collection::vec((0u8..4, 0usize..3, 0u64..30), 1..300),
        max_size in 0u32..8,
        limit in 1u32..6,
    ) {
        let mut a = admission(max_size);
        let mut now = Duration::ZERO;
        let mut open: std::collections::BTreeSet<Ticket> = Default::default();
        let mut ended: std::collections::BTreeSet<Ticket> = Default::default();
        let mut go = Vec::new();
        let mut refused = Vec::new();
        let mut in_flight = 0u32;
        for (op, class, step) in ops {
            now += ms(step);
            go.clear();
            refused.clear();
            match op {
                0 => match a.arrive(now, Criticality::ALL[class], Some(now + ms(50)), limit, None) {
                    (Arrival::Admitted, _) => in_flight += 1,
                    (Arrival::Queued(t), displaced) => {
                        open.insert(t);
                        if let Some(d) = displaced {
                            prop_assert!(open.remove(&d) && ended.insert(d));
                        }
                    }
                    (Arrival::Refused(_), d) => prop_assert!(d.is_none()),
                },
                1 if in_flight > 0 => {
                    in_flight -= 1;
                    a.release(limit, &mut go);
                }
                2 => a.expire(now, limit, None, &mut refused),
                _ => {
                    if let Some(&t) = open.iter().next() {
                        a.cancel(t);
                        open.remove(&t);
                        ended.insert(t);
                    }
                }
            }
            for t in go.iter().chain(refused.iter().map(|(t, _)| t)) {
                prop_assert!(open.remove(t), "{t:?} ended twice or never waited");
                ended.insert(*t);
            }
            in_flight += go.len() as u32;
            prop_assert_eq!(a.in_flight(), in_flight);
            prop_assert!(a.in_flight() <= limit);
            prop_assert!(a.waiting() <= max_size as usize);
            prop_assert_eq!(a.waiting(), open.len());
        }
    }
}
