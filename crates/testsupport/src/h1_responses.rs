//! HTTP/1.1 responses, valid and malformed, for the differential tests that hold a lean
//! HTTP/1.1 client to hyper's: `load`'s (`crates/http/tests/h1_differential.rs`) and the proxy's
//! upstream client (`crates/proxy/tests/it/h1_upstream_differential.rs`).

use proptest::prelude::*;

/// Responses chosen by hand: every framing rule, and the malformed shapes each rule refuses.
pub const CASES: &[&[u8]] = &[
    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 5, 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello!",
    b"HTTP/1.1 200 OK\r\ncontent-length: +5\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\ncontent-length: 5x\r\n\r\nhello",
    b"HTTP/1.1 200 OK\r\ncontent-length:\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 99999999999999999999999\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 18446744073709551615\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhiEXTRA",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;a=b;c\r\nhello\r\n0;x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5 \t;a\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n005\r\nhello\r\n000\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nA\r\n0123456789\r\n0\r\nx-t: 1\r\ny-t: 2\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;a\nb\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n 5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5 5\r\nhello\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffffff\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\nbad trailer\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhel",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ncontent-length: 3\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip\r\n\r\nuntil the close",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: CHUNKED\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\ntransfer-encoding: gzip\r\n\r\nraw",
    b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
    b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nhi",
    b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nhi",
    b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\nhi",
    b"HTTP/1.1 200 OK\r\nconnection: keep-alive, Close\r\ncontent-length: 2\r\n\r\nhi",
    b"HTTP/1.1 200 OK\r\nconnection: close\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nhi",
    b"HTTP/1.1 200 OK\r\n\r\nuntil the close",
    b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n",
    b"HTTP/1.1 304 Not Modified\r\ntransfer-encoding: chunked\r\n\r\n",
    b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nhi",
    b"HTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\n\r\n",
    b"HTTP/1.1 999 Whatever\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 099 Low\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 20 Short\r\n\r\n",
    b"HTTP/1.1 200\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.2 200 OK\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/2.0 200 OK\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\ncontent-length: 2\n\nhi",
    b"HTTP/1.1 200 OK\r\nbad header\r\n\r\n",
    b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nx: y\r\n continued\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nx-high: \x80\xff\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\nx-ctl: a\x01b\r\ncontent-length: 0\r\n\r\n",
    b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n",
    b"HTTP/1.1 200",
    b"",
    b"garbage that is not http\r\n\r\n",
    b"\r\nHTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
];

// long: the list of parts a response is drawn from, each with its wrong variants.
/// A response built from parts that are each sometimes wrong, sometimes cut or damaged.
pub fn response() -> impl Strategy<Value = Vec<u8>> {
    let version = prop::sample::select(vec!["HTTP/1.1", "HTTP/1.0", "HTTP/1.2", "HTTP/1.1 "]);
    let status = prop::sample::select(vec![
        "200 OK", "204 No", "304 NM", "404 NF", "100 C", "099 x", "2000 x",
    ]);
    let header = prop::sample::select(vec![
        "content-length: {len}",
        "content-length: {len}",
        "content-length: {len}, {len}",
        "content-length: 1",
        "content-length: -1",
        "transfer-encoding: chunked",
        "transfer-encoding: chunked",
        "transfer-encoding: gzip",
        "transfer-encoding: gzip, chunked",
        "connection: close",
        "connection: keep-alive",
        "x-junk: \u{0080}",
        "bad header",
        " lead: x",
    ]);
    let body = prop::collection::vec(prop::sample::select(b"ab\r\n;0 ".to_vec()), 0..24);
    let chunk_cuts = prop::collection::vec(0usize..24, 0..3);
    let ext = prop::sample::select(vec!["", ";e", ";e=1", " ", ";\n"]);
    let trailer = prop::sample::select(vec!["", "t: 1\r\n", "bad\r\n"]);
    let damage = prop::option::weighted(
        0.3,
        (
            any::<prop::sample::Index>(),
            prop::sample::select(b"\r\n 0;Gx".to_vec()),
        ),
    );
    let cut = prop::option::weighted(0.15, any::<prop::sample::Index>());
    (
        version,
        status,
        prop::collection::vec(header, 0..4),
        body,
        chunk_cuts,
        ext,
        trailer,
        damage,
        cut,
    )
        .prop_map(
            |(version, status, headers, body, chunk_cuts, ext, trailer, damage, cut)| {
                let chunked = headers.iter().any(|h| h.ends_with("chunked"));
                let mut out = format!("{version} {status}\r\n").into_bytes();
                for h in &headers {
                    out.extend_from_slice(h.replace("{len}", &body.len().to_string()).as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
                if chunked {
                    let mut at: Vec<usize> = chunk_cuts
                        .iter()
                        .map(|c| c % (body.len() + 1))
                        .chain([0, body.len()])
                        .collect();
                    at.sort_unstable();
                    at.dedup();
                    for w in at.windows(2) {
                        out.extend_from_slice(format!("{:x}{ext}\r\n", w[1] - w[0]).as_bytes());
                        out.extend_from_slice(&body[w[0]..w[1]]);
                        out.extend_from_slice(b"\r\n");
                    }
                    out.extend_from_slice(format!("0\r\n{trailer}\r\n").as_bytes());
                } else {
                    out.extend_from_slice(&body);
                }
                if let Some((at, byte)) = damage {
                    let i = at.index(out.len());
                    out[i] = byte;
                }
                if let Some(at) = cut {
                    out.truncate(at.index(out.len() + 1));
                }
                out
            },
        )
}

/// `bytes` cut at the given offsets (each taken modulo the length), to be served piece by piece.
pub fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut at: Vec<usize> = cuts
        .iter()
        .map(|c| c % bytes.len().max(1))
        .chain([0, bytes.len()])
        .collect();
    at.sort_unstable();
    at.dedup();
    at.windows(2)
        .map(|w| bytes[w[0]..w[1]].to_vec())
        .filter(|p| !p.is_empty())
        .collect()
}

/// Responses at the limits: 101 headers (one over), a head three times `max_head` long (hyper
/// checks its limit only between reads, so a head up to one read past it may pass; three times
/// is past any reader's), and a body of 1,000,000 bytes.
pub fn over_the_limits(max_head: usize) -> Vec<Vec<u8>> {
    let mut many = b"HTTP/1.1 200 OK\r\n".to_vec();
    for i in 0..101 {
        many.extend_from_slice(format!("x-{i}: v\r\n").as_bytes());
    }
    many.extend_from_slice(b"content-length: 0\r\n\r\n");
    let mut long = b"HTTP/1.1 200 OK\r\nx-long: ".to_vec();
    long.resize(max_head * 3, b'a');
    long.extend_from_slice(b"\r\ncontent-length: 0\r\n\r\n");
    let mut big_body = b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n".to_vec();
    big_body.resize(big_body.len() + 1_000_000, b'b');
    vec![many, long, big_body]
}
