//! The lean HTTP/1.1 client ([`tailguard_http::h1`]) against hyper's, on the same responses,
//! valid and malformed, over real sockets on 127.0.0.1: the same status, body length, error
//! kind and connection reuse, or the test fails naming the bytes.
//!
//! Each response is served twice per client: once followed by the server's close (every
//! reading ends), once held open (a complete response must be complete without the close, and
//! the connection then carries a second request exactly when hyper's does).

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::client::conn::http1;
use proptest::prelude::*;
use std::net::SocketAddr;
use std::time::Duration;
use tailguard_http::client::Writes;
use tailguard_http::error::ErrorKind;
use tailguard_http::h1::{self, Progress, Reader};
use tailguard_http::{tcp, Nagle};
use tailguard_testsupport::h1_responses::{over_the_limits, response, split, CASES};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What a client made of a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seen {
    Response {
        status: u16,
        body: u64,
    },
    Failed(ErrorKind),
    /// No complete response within the wait (only asked of hyper, for a response the lean
    /// reader cannot finish without the close).
    Waiting,
}

/// hyper words a broken chunked body as an I/O error (`other`), the lean client as what it
/// is (`protocol`): counted as one here.
fn same_blame(kind: ErrorKind) -> ErrorKind {
    match kind {
        ErrorKind::Other => ErrorKind::Protocol,
        k => k,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Then {
    Close,
    Hold,
}

const SECOND: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 6\r\n\r\nsecond";
/// Long enough for any answer a client owes on loopback, however busy the machine.
const PATIENCE: Duration = Duration::from_secs(10);
/// How long hyper is watched for a response the lean reader says is unfinished.
const WATCH: Duration = Duration::from_millis(300);

/// Reads one request head from `s`; false at EOF or on a stall.
async fn read_head(s: &mut TcpStream) -> bool {
    let mut seen = Vec::new();
    let mut byte = [0u8; 512];
    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
        match tokio::time::timeout(PATIENCE, s.read(&mut byte)).await {
            Ok(Ok(n)) if n > 0 => seen.extend_from_slice(&byte[..n]),
            _ => return false,
        }
    }
    true
}

/// Serves one connection: `pieces` after the first request head, then the close, or (held)
/// [`SECOND`] to a second request and the close when the client leaves.
async fn serve_one(listener: TcpListener, pieces: Vec<Vec<u8>>, then: Then) {
    let Ok((mut s, _)) = listener.accept().await else {
        return;
    };
    s.set_nodelay(true).expect("nodelay");
    if !read_head(&mut s).await {
        return;
    }
    for piece in pieces {
        if s.write_all(&piece).await.is_err() {
            return;
        }
    }
    if then == Then::Hold && read_head(&mut s).await {
        let _ = s.write_all(SECOND).await;
        let mut rest = [0u8; 64];
        let _ = tokio::time::timeout(PATIENCE, s.read(&mut rest)).await;
    }
}

async fn server(pieces: Vec<Vec<u8>>, then: Then) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(serve_one(listener, pieces, then));
    addr
}

fn request(head: bool) -> Vec<u8> {
    let method = if head { "HEAD" } else { "GET" };
    format!("{method} / HTTP/1.1\r\nhost: differential\r\n\r\n").into_bytes()
}

/// The lean client: the first response and whether a second request went through.
async fn lean(addr: SocketAddr, head: bool, wait: Duration) -> (Seen, bool) {
    let socket = tcp::connect(addr, Nagle::Off).await.expect("connect");
    let mut conn = h1::Connection::new(socket);
    let first = match tokio::time::timeout(wait, conn.exchange(&request(head), head)).await {
        Err(_) => return (Seen::Waiting, false),
        Ok(Ok(r)) => Seen::Response {
            status: r.status,
            body: r.body_bytes,
        },
        Ok(Err(e)) => return (Seen::Failed(same_blame(e.kind())), false),
    };
    if !conn.is_open() {
        return (first, false);
    }
    let second = tokio::time::timeout(PATIENCE, conn.exchange(&request(false), false)).await;
    let reused = matches!(second, Ok(Ok(r)) if r.status == 200 && r.body_bytes == 6);
    (first, reused)
}

/// hyper's client, the same way.
async fn hyper(addr: SocketAddr, head: bool, wait: Duration) -> (Seen, bool) {
    let socket = tcp::connect(addr, Nagle::Off).await.expect("connect");
    let io = hyper_util::rt::TokioIo::new(socket);
    let (mut send, interim): (http1::SendRequest<Empty<Bytes>>, _) =
        tailguard_http::client::h1(io, Writes::Flat, addr)
            .await
            .expect("handshake");
    let method = if head { "HEAD" } else { "GET" };
    let req = |method: &str| {
        let mut req = http::Request::builder()
            .method(method)
            .uri("/")
            .header("host", "differential")
            .body(Empty::new())
            .expect("request");
        interim.watch(&mut req);
        req
    };
    let exchange = async {
        let response = send.send_request(req(method)).await?;
        let status = response.status().as_u16();
        let mut body = response.into_body();
        let mut bytes = 0u64;
        while let Some(frame) = body.frame().await {
            if let Some(data) = frame?.data_ref() {
                bytes += data.len() as u64;
            }
        }
        Ok::<_, hyper::Error>((status, bytes))
    };
    let first = match tokio::time::timeout(wait, exchange).await {
        Err(_) => return (Seen::Waiting, false),
        // The flood and the final head in one read: hyper hands the head on (the callers
        // refuse it, as the lean reader does).
        Ok(_) if interim.flooded() => return (Seen::Failed(ErrorKind::InterimFlood), false),
        Ok(Ok((status, body))) => Seen::Response { status, body },
        Ok(Err(e)) => {
            return (
                Seen::Failed(same_blame(tailguard_http::error::kind(&e))),
                false,
            )
        }
    };
    let Ok(Ok(())) = tokio::time::timeout(PATIENCE, send.ready()).await else {
        return (first, false);
    };
    let second = async {
        let response = send.send_request(req("GET")).await?;
        let status = response.status().as_u16();
        let body = response.into_body().collect().await?.to_bytes();
        Ok::<_, hyper::Error>(status == 200 && body.as_ref() == b"second")
    };
    let reused = matches!(tokio::time::timeout(PATIENCE, second).await, Ok(Ok(true)));
    (first, reused)
}

/// Whether the lean reader finishes `bytes` without the peer's close.
fn complete_without_close(bytes: &[u8], head: bool) -> bool {
    let mut reader = Reader::new(head);
    matches!(reader.read(bytes), Ok((_, Progress::Done(_))) | Err(_))
}

/// Serves `bytes` in `pieces` to both clients, closed and held, and compares.
fn compare(bytes: &[u8], cuts: &[usize], head: bool) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let pieces = split(bytes, cuts);
    runtime.block_on(async {
        let show = || format!("{:?} (head: {head})", String::from_utf8_lossy(bytes));
        let closed_lean = lean(server(pieces.clone(), Then::Close).await, head, PATIENCE).await;
        let closed_hyper = hyper(server(pieces.clone(), Then::Close).await, head, PATIENCE).await;
        if closed_lean.0 != closed_hyper.0 {
            return Err(format!(
                "then closed: lean {:?}, hyper {:?} for {}",
                closed_lean.0,
                closed_hyper.0,
                show()
            ));
        }
        if complete_without_close(bytes, head) {
            let held_lean = lean(server(pieces.clone(), Then::Hold).await, head, PATIENCE).await;
            let held_hyper = hyper(server(pieces, Then::Hold).await, head, PATIENCE).await;
            if held_lean != held_hyper {
                return Err(format!(
                    "held open: lean {held_lean:?}, hyper {held_hyper:?} (response, reused) for {}",
                    show()
                ));
            }
        } else {
            let held_hyper = hyper(server(pieces, Then::Hold).await, head, WATCH).await;
            if held_hyper.0 != Seen::Waiting {
                return Err(format!(
                    "held open: lean waits for more, hyper {:?} for {}",
                    held_hyper.0,
                    show()
                ));
            }
        }
        Ok(())
    })
}

#[test]
fn hand_picked_responses_read_as_hyper_reads_them() {
    let mut failures = Vec::new();
    for bytes in CASES {
        for (cuts, head) in [
            (&[][..], false),
            (&[1, 7, 20, 40][..], false),
            (&[][..], true),
        ] {
            if let Err(e) = compare(bytes, cuts, head) {
                failures.push(e);
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// 16 interim heads are read by both; the 17th, or 16 KiB of them, fails both alike.
#[test]
fn interim_floods_are_refused_by_both() {
    let cont: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
    let hint = [
        b"HTTP/1.1 103 Early Hints\r\nlink: ".as_slice(),
        &[b'a'; 6000],
        b"\r\n\r\n",
    ]
    .concat();
    let last: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
    for (head, n) in [
        (cont, 16),
        (cont, 17),
        (cont, 5000),
        (&hint[..], 2),
        (&hint[..], 3),
    ] {
        let bytes = [head.repeat(n), last.to_vec()].concat();
        compare(&bytes, &[], false).unwrap();
        compare(&bytes, &[100, 4000], false).unwrap();
    }
}

#[test]
fn too_many_headers_and_a_head_past_the_limit_are_refused_by_both() {
    for bytes in over_the_limits(h1::parse::MAX_HEAD_BYTES) {
        compare(&bytes, &[], false).unwrap();
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_responses_read_as_hyper_reads_them(
        bytes in response(),
        cuts in prop::collection::vec(any::<usize>(), 0..3),
        head in prop::bool::weighted(0.1),
    ) {
        compare(&bytes, &cuts, head).map_err(TestCaseError::fail)?;
    }
}
