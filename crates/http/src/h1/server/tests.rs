use super::encode::*;
use super::head::*;
use super::response::*;
use super::*;
use http::{Method, Version};
use http_body_util::BodyExt;
use http_body_util::Full;
use hyper::body::SizeHint;
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const MAX: usize = 4096;

fn parsed(raw: &[u8]) -> (Parsed, BytesMut) {
    let mut buf = BytesMut::from(raw);
    let p = parse(&mut buf, MAX, &mut crate::names::Names::default());
    (p, buf)
}

#[test]
fn the_common_shapes_are_served_lean() {
    for raw in [
        &b"GET /a?b=c HTTP/1.1\r\nhost: x\r\n\r\n"[..],
        b"POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc",
        b"DELETE /d HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        b"GET / HTTP/1.1\r\nhost: x\r\nConnection: Keep-Alive\r\n\r\n",
    ] {
        let (p, buf) = parsed(raw);
        let Parsed::Lean(head) = p else {
            panic!("{:?} not lean", String::from_utf8_lossy(raw));
        };
        // The head is taken off, the body left.
        assert_eq!(buf.len() as u64, head.length, "{raw:?}");
        assert_eq!(head.request.version(), Version::HTTP_11);
    }
    let (Parsed::Lean(head), _) = parsed(b"GET /x%20y HTTP/1.1\r\nA: 1\r\na: 2\r\n\r\n") else {
        panic!("not lean");
    };
    assert_eq!(head.request.uri(), "/x%20y");
    let all: Vec<_> = head.request.headers().get_all("a").iter().collect();
    assert_eq!(all, ["1", "2"]);
    assert!(head.keep_alive);
    let (Parsed::Lean(head), _) = parsed(b"GET / HTTP/1.1\r\nconnection: close\r\n\r\n") else {
        panic!("not lean");
    };
    assert!(!head.keep_alive);
}

#[test]
fn anything_else_goes_to_hyper_with_every_byte() {
    let big = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(MAX));
    for raw in [
        &b"GET / HTTP/1.0\r\n\r\n"[..],
        b"POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\ncontent-length: 1\r\ncontent-length: 1\r\n\r\na",
        b"POST / HTTP/1.1\r\ncontent-length: +1\r\n\r\na",
        b"POST / HTTP/1.1\r\ncontent-length: 1, 1\r\n\r\na",
        b"POST / HTTP/1.1\r\ncontent-length: \r\n\r\n",
        b"POST / HTTP/1.1\r\ncontent-length: 99999999999999999999\r\n\r\n",
        b"POST / HTTP/1.1\r\nexpect: 100-continue\r\ncontent-length: 1\r\n\r\n",
        b"GET / HTTP/1.1\r\nupgrade: h2c\r\nconnection: upgrade\r\n\r\n",
        b"GET / HTTP/1.1\r\nte: trailers\r\n\r\n",
        b"GET / HTTP/1.1\r\nconnection: keep-alive, close\r\n\r\n",
        b"CONNECT x:443 HTTP/1.1\r\n\r\n",
        b"GET / HTTP/1.1\r\nbad header\r\n\r\n",
        b"GET / HTTP/1.1\r\nx: a\r\n b\r\n\r\n",
        b"GET  / HTTP/1.1\r\n\r\n",
        b"\x00GET / HTTP/1.1\r\n\r\n",
        big.as_bytes(),
    ] {
        let (p, buf) = parsed(raw);
        assert!(
            matches!(p, Parsed::Other),
            "{:?} served lean",
            String::from_utf8_lossy(raw)
        );
        assert_eq!(&buf[..], raw, "bytes lost");
    }
}

#[test]
fn a_head_not_yet_whole_waits_for_more_until_the_limit() {
    let (p, buf) = parsed(b"GET / HTTP/1.1\r\nhost: x\r\n");
    assert!(matches!(p, Parsed::Partial));
    assert_eq!(buf.len(), 25);
    let long = format!("GET / HTTP/1.1\r\nx: {}", "a".repeat(MAX));
    let (p, _) = parsed(long.as_bytes());
    assert!(matches!(p, Parsed::Other));
}

fn head_of(
    status: u16,
    headers: &[(&str, &str)],
    method: Method,
    length: Option<Option<u64>>,
    close: bool,
) -> (String, Framing, bool) {
    let mut resp = Response::builder().status(status);
    for (n, v) in headers {
        resp = resp.header(*n, *v);
    }
    let (mut parts, ()) = resp.body(()).unwrap().into_parts();
    let mut out = Vec::new();
    let (framing, last) = encode_head(&mut out, &mut parts, &method, length, close)
        .unwrap_or_else(|_| panic!("unwritable"));
    let text = String::from_utf8(out).unwrap();
    let date = text.find("date: ").expect("a date header");
    (format!("{}date: *\r\n\r\n", &text[..date]), framing, last)
}

#[test]
fn heads_are_written_as_hypers_server_writes_them() {
    let get = Method::GET;
    assert_eq!(
        head_of(200, &[("x", "1")], get.clone(), Some(Some(5)), false),
        (
            "HTTP/1.1 200 OK\r\nx: 1\r\ncontent-length: 5\r\ndate: *\r\n\r\n".into(),
            Framing::Length(5),
            false
        )
    );
    assert_eq!(
        head_of(
            200,
            &[("content-length", "5"), ("x", "1")],
            get.clone(),
            Some(Some(5)),
            false
        )
        .0,
        "HTTP/1.1 200 OK\r\ncontent-length: 5\r\nx: 1\r\ndate: *\r\n\r\n"
    );
    assert_eq!(
        head_of(404, &[], get.clone(), Some(None), true),
        (
            "HTTP/1.1 404 Not Found\r\nconnection: close\r\ntransfer-encoding: chunked\r\ndate: *\r\n\r\n"
                .into(),
            Framing::Chunked,
            true
        )
    );
    // An ended body: an implicit zero length, except where none may be sent.
    assert_eq!(
        head_of(200, &[("content-length", "0")], get.clone(), None, false).0,
        "HTTP/1.1 200 OK\r\ncontent-length: 0\r\ndate: *\r\n\r\n"
    );
    assert_eq!(
        head_of(204, &[], get.clone(), None, false).0,
        "HTTP/1.1 204 No Content\r\ndate: *\r\n\r\n"
    );
    // HEAD keeps the length it was given and sends no body.
    assert_eq!(
        head_of(200, &[("content-length", "9")], Method::HEAD, None, false),
        (
            "HTTP/1.1 200 OK\r\ncontent-length: 9\r\ndate: *\r\n\r\n".into(),
            Framing::Length(0),
            false
        )
    );
    assert_eq!(
        head_of(304, &[], get.clone(), Some(Some(3)), false),
        (
            "HTTP/1.1 304 Not Modified\r\ndate: *\r\n\r\n".into(),
            Framing::Length(0),
            false
        )
    );
    // Values of one name joined on one line; a response's own close ends the connection.
    assert_eq!(
        head_of(
            200,
            &[("connection", "a"), ("connection", "close")],
            get,
            None,
            false
        ),
        (
            "HTTP/1.1 200 OK\r\nconnection: a, close\r\ncontent-length: 0\r\ndate: *\r\n\r\n"
                .into(),
            Framing::Length(0),
            true
        )
    );
}

#[test]
fn a_reason_phrase_and_version_are_kept() {
    let mut parts = Response::builder()
        .status(200)
        .version(Version::HTTP_10)
        .body(())
        .unwrap()
        .into_parts()
        .0;
    parts
        .extensions
        .insert(hyper::ext::ReasonPhrase::from_static(b"Fine"));
    let mut out = Vec::new();
    let _ = encode_head(&mut out, &mut parts, &Method::GET, None, false);
    assert!(out.starts_with(b"HTTP/1.0 200 Fine\r\n"), "{out:?}");
}

/// A server on 127.0.0.1 answering each request with its method, path and body; what
/// [`serve`] ended with comes back on the channel.
async fn echo_server() -> (std::net::SocketAddr, tokio::sync::mpsc::Receiver<Ended>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let closing = Closing::default();
        let ended = serve(
            stream,
            Bytes::new(),
            Settings { max_head: MAX },
            &closing,
            |req: Request<RequestBody>| async move {
                let (parts, body) = req.into_parts();
                let body = body.collect().await.map(|b| b.to_bytes());
                let text = match body {
                    Ok(b) => format!(
                        "{} {} {}",
                        parts.method,
                        parts.uri,
                        String::from_utf8_lossy(&b)
                    ),
                    Err(e) => format!("error {e}"),
                };
                Response::new(Full::new(Bytes::from(text)))
            },
        )
        .await;
        let _ = tx.send(ended).await;
    });
    (addr, rx)
}

async fn read_until(s: &mut TcpStream, ends: usize) -> String {
    let mut seen = Vec::new();
    let mut chunk = [0u8; 4096];
    while String::from_utf8_lossy(&seen).matches("\r\n\r\n").count() < ends {
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut chunk))
            .await
            .expect("an answer in time")
            .unwrap();
        if n == 0 {
            break;
        }
        seen.extend_from_slice(&chunk[..n]);
    }
    // Each response here ends with its body, which has no blank line: wait for the bodies.
    tokio::time::sleep(Duration::ZERO).await;
    String::from_utf8_lossy(&seen).into_owned()
}

#[tokio::test]
async fn pipelined_requests_with_bodies_are_answered_in_order() {
    let (addr, _ended) = echo_server().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"POST /one HTTP/1.1\r\ncontent-length: 5\r\n\r\nhelloGET /two HTTP/1.1\r\n\r\nPUT /three HTTP/1.1\r\ncontent-length: 1\r\n\r\nx",
    )
    .await
    .unwrap();
    let mut all = String::new();
    while all.matches("HTTP/1.1 200 OK").count() < 3 || !all.ends_with("PUT /three x") {
        all.push_str(&read_until(&mut s, 1).await);
    }
    let bodies: Vec<_> = all
        .split("HTTP/1.1 200 OK\r\n")
        .skip(1)
        .map(|r| r.split("\r\n\r\n").nth(1).unwrap().to_owned())
        .collect();
    assert_eq!(bodies, ["POST /one hello", "GET /two ", "PUT /three x"]);
}

#[tokio::test]
async fn a_body_cut_short_fails_and_the_connection_ends() {
    let (addr, mut ended) = echo_server().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST / HTTP/1.1\r\ncontent-length: 10\r\n\r\nabc")
        .await
        .unwrap();
    s.shutdown().await.unwrap();
    let answer = read_until(&mut s, 1).await;
    assert!(answer.contains("error"), "{answer}");
    let ended = tokio::time::timeout(Duration::from_secs(10), ended.recv())
        .await
        .unwrap();
    assert!(matches!(ended, Some(Ended::Closed)));
}

#[tokio::test]
async fn an_unusual_request_is_handed_over_with_every_byte_after_the_last_answer() {
    let (addr, mut ended) = echo_server().await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let rest = &b"POST /c HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"[..];
    let mut both = b"GET /a HTTP/1.1\r\n\r\n".to_vec();
    both.extend_from_slice(rest);
    s.write_all(&both).await.unwrap();
    let answer = read_until(&mut s, 1).await;
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    let ended = tokio::time::timeout(Duration::from_secs(10), ended.recv())
        .await
        .unwrap();
    let Some(Ended::Handover(io)) = ended else {
        panic!("no handover: {ended:?}");
    };
    let (prefix, _) = io.into_parts();
    assert_eq!(&prefix[..], rest);
}

#[tokio::test]
async fn a_streamed_response_is_chunked_and_an_idle_connection_closes_when_asked() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let closing = std::sync::Arc::new(Closing::default());
    let server = {
        let closing = std::sync::Arc::clone(&closing);
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            serve(
                stream,
                Bytes::new(),
                Settings { max_head: MAX },
                &closing,
                |_req| async { Response::new(Frames(vec!["cde", "", "ab"])) },
            )
            .await
        })
    };
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET / HTTP/1.1\r\n\r\n").await.unwrap();
    let mut seen = String::new();
    while !seen.ends_with("0\r\n\r\n") {
        seen.push_str(&read_until(&mut s, 1).await);
    }
    let body = seen.split_once("\r\n\r\n").unwrap().1;
    assert!(seen.contains("transfer-encoding: chunked\r\n"), "{seen}");
    assert_eq!(body, "2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n");
    closing.ask();
    let ended = tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(ended, Ended::Closed));
}

/// A body of these chunks (last first), none of them announced in advance.
struct Frames(Vec<&'static str>);

impl Body for Frames {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.0.pop().map(|s| Ok(Frame::data(Bytes::from(s)))))
    }
}

#[test]
fn an_http_10_response_of_unknown_length_goes_until_the_close() {
    let mut parts = Response::builder()
        .status(200)
        .version(Version::HTTP_10)
        .header("transfer-encoding", "chunked")
        .header("trailer", "x-t")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let mut out = Vec::new();
    let (framing, _) = encode_head(&mut out, &mut parts, &Method::GET, Some(None), false)
        .unwrap_or_else(|_| panic!("unwritable"));
    let text = String::from_utf8(out).unwrap();
    assert_eq!(framing, Framing::UntilClose);
    assert!(text.starts_with("HTTP/1.0 200 OK\r\ndate: "), "{text}");
}

/// Serves one connection on 127.0.0.1 with `handler`; what [`serve`] ended with comes back on
/// the channel.
async fn server_with<H, F, B>(
    handler: H,
) -> (std::net::SocketAddr, tokio::sync::oneshot::Receiver<Ended>)
where
    H: FnMut(Request<RequestBody>) -> F + Send + 'static,
    F: Future<Output = Response<B>> + Send,
    B: Body<Data = Bytes> + Unpin + Send,
    B::Error: Into<BoxError> + Send,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (stream, _) = listener.accept().await.unwrap();
        let closing = Closing::default();
        let ended = serve(
            stream,
            Bytes::new(),
            Settings { max_head: MAX },
            &closing,
            handler,
        )
        .await;
        let _ = tx.send(ended);
    });
    (addr, rx)
}

#[tokio::test]
async fn a_client_that_closes_cancels_its_request_even_after_sending_a_body() {
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel::<()>();
    let mut dropped_tx = Some(dropped_tx);
    let (addr, ended) = server_with(move |req: Request<RequestBody>| {
        // Dropped with the request's future: the request was cancelled.
        struct Signal(Option<tokio::sync::oneshot::Sender<()>>);
        impl Drop for Signal {
            fn drop(&mut self) {
                if let Some(tx) = self.0.take() {
                    let _ = tx.send(());
                }
            }
        }
        let signal = Signal(dropped_tx.take());
        async move {
            let _signal = signal;
            let _ = req.into_body().collect().await;
            // An upstream that never answers.
            std::future::pending::<()>().await;
            Response::new(Full::new(Bytes::new()))
        }
    })
    .await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST / HTTP/1.1\r\ncontent-length: 5\r\n\r\nhello")
        .await
        .unwrap();
    s.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), dropped_rx)
        .await
        .expect("the request is cancelled")
        .unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(10), ended)
        .await
        .unwrap()
        .unwrap();
    assert!(matches!(ended, Ended::Closed));
}

/// A body that announces `len` bytes and yields `data`.
struct Lying {
    len: u64,
    data: Option<&'static str>,
}

impl Body for Lying {
    type Data = Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, std::io::Error>>> {
        Poll::Ready(self.data.take().map(|s| Ok(Frame::data(Bytes::from(s)))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

#[tokio::test]
async fn a_body_longer_than_its_length_is_cut_to_it_and_the_connection_kept() {
    let (addr, _ended) = server_with(|_req: Request<RequestBody>| async {
        Response::new(Lying {
            len: 3,
            data: Some("abcdef"),
        })
    })
    .await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /1 HTTP/1.1\r\n\r\nGET /2 HTTP/1.1\r\n\r\n")
        .await
        .unwrap();
    let mut all = String::new();
    while all.matches("abc").count() < 2 {
        all.push_str(&read_until(&mut s, 1).await);
    }
    assert_eq!(all.matches("content-length: 3\r\n").count(), 2, "{all}");
    assert!(!all.contains("def"), "{all}");
}
