//! Per-request overrides are hostile input: a size or delay past the limits is a 400 naming
//! the limit, answered at once, with nothing allocated or awaited.

use crate::common;

use common::{addr, serve_with};
use tailguard_testsupport::client::get;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_overrides_are_400_and_the_backend_carries_on() {
    let on = serve_with("backends: [{latency: 0s}]", |o| o.overrides = true).await;
    let a = addr(&on, 0);
    for (query, want) in [
        (
            "/?size=18446744073709551615",
            "a size must be at most 16777216 bytes",
        ),
        ("/?size=2000000000", "a size must be at most 16777216 bytes"),
        ("/?size=16777217", "a size must be at most 16777216 bytes"),
        ("/?delay=5000000h", "a delay must be at most 1h"),
        ("/?delay=10ms:50,2h:10", "a delay must be at most 1h"),
        ("/?status=101", "status=101"),
        ("/?status=100:50", "not a final HTTP status"),
        ("/?status=199", "use 200 to 599"),
        ("/?status=600", "use 200 to 599"),
    ] {
        let (status, body, _) = get(a, query).await;
        assert_eq!(status, 400, "{query}: {body}");
        assert!(body.contains(want), "{query}: {body}");
    }
    let (status, body, _) = get(a, "/?size=16777216").await;
    assert_eq!((status, body.len()), (200, 16 << 20));
    assert!(body.bytes().all(|b| b == b'x'));
    let (status, body, _) = get(a, "/?size=3").await;
    assert_eq!((status, body.as_str()), (200, "xxx"));
}
