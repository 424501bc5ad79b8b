//! HTTP/1.1 requests, valid and malformed, for the differential test that holds the proxy's
//! lean HTTP/1.1 server to hyper's (`crates/proxy/tests/it/h1_server_differential.rs`): what a
//! client may write to a proxy, from the plain request to the smuggling attempt. Every request
//! names a host `x` and one of the scripted backend's paths (`/len`, `/chunked`, `/echo`,
//! `/empty`, ...), so the same bytes exercise the response side too.

use proptest::prelude::*;

/// How the client ends its side once a request's bytes are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// The connection stays open (a second request may follow on it).
    Open,
    /// The client shuts its write side down (a half-close): the server reads the stream's end.
    /// Only after an incomplete request: hyper's server, which does not serve half-closed
    /// connections, drops a complete request in flight when it reads the end, and whether it
    /// reads it before it answers is a race.
    HalfClose,
}

/// One hand-picked request: its name, the bytes a client writes, and how it ends its side.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    /// A short name for failure messages.
    pub name: &'static str,
    /// The bytes written, as they are.
    pub bytes: &'static [u8],
    /// What the client does after writing them.
    pub end: End,
}

const fn open(name: &'static str, bytes: &'static [u8]) -> Case {
    Case {
        name,
        bytes,
        end: End::Open,
    }
}

const fn shut(name: &'static str, bytes: &'static [u8]) -> Case {
    Case {
        name,
        bytes,
        end: End::HalfClose,
    }
}

/// Requests chosen by hand: every method and framing a client may use, and the malformed and
/// ambiguous shapes (request smuggling among them) a server must refuse or read one way.
pub const CASES: &[Case] = &[
    open("get", b"GET /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get root", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get query", b"GET /len?a=1&b=%20c HTTP/1.1\r\nHost: x\r\nAccept: */*\r\n\r\n"),
    open("get chunked answer", b"GET /chunked HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get 204", b"GET /empty HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get 304", b"GET /notmod HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"a\"\r\n\r\n"),
    open("get big", b"GET /big HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get http/1.0 answer", b"GET /http10 HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get reason", b"GET /reason HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get trailers", b"GET /trailers HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get trailers te", b"GET /trailers HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n"),
    open("get te trailers", b"GET /len HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n"),
    open("get close answer", b"GET /close HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get unframed answer", b"GET /unframed HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get http/1.0 unframed answer", b"GET /unframed10 HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("get with body", b"GET /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody"),
    open("get chunked body", b"GET /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"),
    open("head len", b"HEAD /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("head chunked", b"HEAD /chunked HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("head big", b"HEAD /big HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("head unframed", b"HEAD /unframed HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("head with length", b"HEAD /len HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"),
    open("post", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"),
    open("post length 0", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"),
    open("post no length", b"POST /echo HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("post form", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n\r\na=1&b=2"),
    open("put", b"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"),
    open("put empty", b"PUT /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n"),
    open("patch", b"PATCH /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"),
    open("delete", b"DELETE /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("delete with body", b"DELETE /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nid"),
    open("options", b"OPTIONS /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("options asterisk", b"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("trace", b"TRACE /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("connect", b"CONNECT x:443 HTTP/1.1\r\nHost: x:443\r\n\r\n"),
    open("get authority form", b"GET x:80 HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("absolute form", b"GET http://x/len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("absolute form other host", b"GET http://y/len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("absolute form no host", b"GET http://x/len HTTP/1.1\r\n\r\n"),
    open("absolute form https", b"GET https://x:8443/len?q HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("lowercase method", b"get /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("unknown method", b"FOO /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("method with bad char", b"GE(T /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("post 100-continue", b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello"),
    open("100-continue waiting", b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"),
    open("100-continue length 0", b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n"),
    open("unknown expect", b"POST /echo HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\nContent-Length: 2\r\n\r\nhi"),
    open("chunked", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
    open("chunked extensions", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b;c\r\nhello\r\n0;x=\"y\"\r\n\r\n"),
    open("chunked trailers", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTrailer: x-t\r\n\r\n5\r\nhello\r\n0\r\nx-t: 1\r\ny-t: 2\r\n\r\n"),
    open("chunked uppercase hex", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nA\r\n0123456789\r\n00B\r\nabcdefghijk\r\n0\r\n\r\n"),
    open("chunked last only", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    open("chunked bad size", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
    open("chunked size overflow", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nhello\r\n0\r\n\r\n"),
    open("chunked no crlf after data", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhelloX0\r\n\r\n"),
    open("chunked bare lf", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\n0\n\n"),
    open("chunked size space", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5 \r\nhello\r\n0\r\n\r\n"),
    open("chunked bad trailer", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\nbad trailer\r\n\r\n"),
    open("chunked unfinished", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"),
    open("pipelined two", b"GET /len HTTP/1.1\r\nHost: x\r\n\r\nGET /chunked HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("pipelined three", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcHEAD /len HTTP/1.1\r\nHost: x\r\n\r\nGET /trailers HTTP/1.1\r\nHost: x\r\nTE: trailers\r\n\r\n"),
    open("pipelined then garbage", b"GET /len HTTP/1.1\r\nHost: x\r\n\r\nNOT HTTP AT ALL\r\n\r\n"),
    open("pipelined after close", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /chunked HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("pipelined after close answer", b"GET /close HTTP/1.1\r\nHost: x\r\n\r\nGET /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("connection close", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
    open("connection close post", b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 2\r\n\r\nhi"),
    open("connection keep-alive close", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n"),
    open("connection CLOSE", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: CLOSE\r\n\r\n"),
    open("two connection headers", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"),
    open("connection names a header", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: x-hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n\r\n"),
    open("http/1.0", b"GET /len HTTP/1.0\r\n\r\n"),
    open("http/1.0 keep-alive", b"GET /len HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
    open("http/1.0 chunked answer", b"GET /chunked HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"),
    open("http/1.0 unframed answer", b"GET /unframed HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"),
    open("http/1.0 post", b"POST /echo HTTP/1.0\r\nContent-Length: 2\r\n\r\nhi"),
    open("http/1.0 transfer-encoding", b"POST /echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n"),
    open("http/2.0 line", b"GET /len HTTP/2.0\r\nHost: x\r\n\r\n"),
    open("http/1.2 line", b"GET /len HTTP/1.2\r\nHost: x\r\n\r\n"),
    open("http/0.9 line", b"GET /len\r\n\r\n"),
    open("lowercase version", b"GET /len http/1.1\r\nHost: x\r\n\r\n"),
    open("cl and te", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nX"),
    open("te and cl", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n1\r\nA\r\n0\r\n\r\n"),
    open("duplicate cl equal", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello"),
    open("duplicate cl different", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!"),
    open("cl list", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello"),
    open("cl list different", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello!"),
    open("cl plus", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\nhello"),
    open("cl leading space", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:  5\r\n\r\nhello"),
    open("cl tab", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:\t5\t\r\n\r\nhello"),
    open("cl hex", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 0x5\r\n\r\nhello"),
    open("cl trailing junk", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5x\r\n\r\nhello"),
    open("cl empty", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n\r\n"),
    open("cl huge", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999\r\n\r\nhello"),
    open("cl negative", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\nhello"),
    open("te chunked chunked", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("te gzip chunked", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("te chunked gzip", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("te identity", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nContent-Length: 2\r\n\r\nhi"),
    open("te xchunked", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("te uppercase", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: CHUNKED\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("te trailing space", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked \r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("te obs-fold", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding:\r\n chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("two te gzip chunked", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("two te chunked gzip", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("te space before colon", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n1\r\na\r\n0\r\n\r\n"),
    open("obs-fold", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\n\r\n"),
    open("fold at first header", b"GET /len HTTP/1.1\r\n X-A: 1\r\nHost: x\r\n\r\n"),
    open("bare lf", b"GET /len HTTP/1.1\nHost: x\n\n"),
    open("mixed line ends", b"GET /len HTTP/1.1\r\nHost: x\nX-A: 1\r\n\n"),
    open("bare cr", b"GET /len HTTP/1.1\rHost: x\r\n\r\n"),
    open("space before colon", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A : 1\r\n\r\n"),
    open("header without colon", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A\r\n\r\n"),
    open("empty header name", b"GET /len HTTP/1.1\r\nHost: x\r\n: 1\r\n\r\n"),
    open("header name with space", b"GET /len HTTP/1.1\r\nHost: x\r\nX A: 1\r\n\r\n"),
    open("header name with paren", b"GET /len HTTP/1.1\r\nHost: x\r\nX(A): 1\r\n\r\n"),
    open("nul in value", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A: a\x00b\r\n\r\n"),
    open("control in value", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\n\r\n"),
    open("del in value", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A: a\x7fb\r\n\r\n"),
    open("cr in value", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A: a\rb\r\n\r\n"),
    open("tab and high bytes in value", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A: a\tb \x80\xff\r\n\r\n"),
    open("empty value", b"GET /len HTTP/1.1\r\nHost: x\r\nX-A:\r\nX-B: \r\n\r\n"),
    open("two spaces in request line", b"GET  /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("trailing space in request line", b"GET /len HTTP/1.1 \r\nHost: x\r\n\r\n"),
    open("tab in request line", b"GET\t/len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("space in target", b"GET /len?q=a b HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("high byte in target", b"GET /l\xffn HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("fragment in target", b"GET /len#frag HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("dot segments", b"GET /a/../len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("encoded slash", b"GET /a%2Flen HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("target without slash", b"GET len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("empty line first", b"\r\nGET /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("two empty lines first", b"\r\n\r\nGET /len HTTP/1.1\r\nHost: x\r\n\r\n"),
    open("garbage", b"hello world\r\n\r\n"),
    open("no host", b"GET /len HTTP/1.1\r\n\r\n"),
    open("two hosts", b"GET /len HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"),
    open("empty host", b"GET /len HTTP/1.1\r\nHost:\r\n\r\n"),
    open("host with port", b"GET /len HTTP/1.1\r\nHost: x:8080\r\n\r\n"),
    open("host with userinfo", b"GET /len HTTP/1.1\r\nHost: u@x\r\n\r\n"),
    open("upgrade h2c", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\n\r\n"),
    open("upgrade h2c with body", b"POST /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nContent-Length: 2\r\n\r\nhi"),
    open("upgrade websocket", b"GET /len HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"),
    open("h2 preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
    open("body to early answer", b"POST /empty HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"),
    open("short body", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello"),
    open("head only", b"GET /len HTTP/1.1\r\nHost: x\r\n"),
    open("request line only", b"GET /len HTTP/1.1\r\n"),
    shut("short body then close", b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nhello"),
    shut("chunked cut then close", b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhel"),
    shut("head cut then close", b"GET /len HTTP/1.1\r\nHost: x\r\n"),
    shut("nothing then close", b""),
];

/// Requests at the limits of a server whose request head may be `max_head` bytes: heads of
/// three quarters, one and a half and six times that, a target six times that, 100 and 101
/// header lines (hyper's limit is 100), and bodies of 300 KiB (by length and chunked). (Not
/// a large body to a backend that answers before reading it: how much of it the proxy has
/// forwarded when the answer ends is a race.)
pub fn large(max_head: usize) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    for (name, size) in [
        ("head under the limit", max_head * 3 / 4),
        ("head over the limit", max_head * 3 / 2),
        ("head far over the limit", max_head * 6),
    ] {
        let mut head = b"GET /len HTTP/1.1\r\nHost: x\r\nX-Long: ".to_vec();
        head.resize(size, b'a');
        head.extend_from_slice(b"\r\n\r\n");
        out.push((name.to_owned(), head));
    }
    let mut target = b"GET /len?".to_vec();
    target.resize(max_head * 6, b'q');
    target.extend_from_slice(b" HTTP/1.1\r\nHost: x\r\n\r\n");
    out.push(("target far over the limit".to_owned(), target));
    for count in [100, 101] {
        let mut many = b"GET /len HTTP/1.1\r\nHost: x\r\n".to_vec();
        for i in 1..count {
            many.extend_from_slice(format!("X-{i}: v\r\n").as_bytes());
        }
        many.extend_from_slice(b"\r\n");
        out.push((format!("{count} header lines"), many));
    }
    let body: Vec<u8> = (0..300 * 1024).map(|i| b'a' + (i % 26) as u8).collect();
    let mut req = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(&body);
    out.push(("300 KiB body".to_owned(), req));
    let mut chunked =
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for chunk in body.chunks(16 * 1024 + 7) {
        chunked.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        chunked.extend_from_slice(chunk);
        chunked.extend_from_slice(b"\r\n");
    }
    chunked.extend_from_slice(b"0\r\n\r\n");
    out.push(("300 KiB chunked body".to_owned(), chunked));
    out
}

/// A valid request: a method, a path of unreserved characters and percent-encoded bytes (never
/// an encoded slash or backslash), `Host: x`, up to 8 headers with token names and visible
/// ASCII values, and sometimes a body by `content-length`.
pub fn request() -> impl Strategy<Value = Vec<u8>> {
    let method = prop::sample::select(vec!["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS"]);
    let segment = prop::collection::vec(
        prop::sample::select(vec![
            "a", "b", "Z", "0", "-", ".", "_", "~", "%41", "%20", "%7e",
        ]),
        0..6,
    )
    .prop_map(|parts| parts.concat());
    let path = prop::collection::vec(segment, 1..4).prop_map(|s| format!("/{}", s.join("/")));
    let query = prop::option::of("[a-z0-9=&]{0,12}");
    let name = "x-[a-z0-9!#$%&'*+.^_`|~-]{1,12}";
    let value = "[!-~]([ -~]{0,30}[!-~])?";
    let headers = prop::collection::vec((name, value), 0..9);
    let body = prop::option::of(prop::collection::vec(any::<u8>(), 0..64));
    (method, path, query, headers, body).prop_map(|(method, path, query, headers, body)| {
        let query = query.map(|q| format!("?{q}")).unwrap_or_default();
        let mut out = format!("{method} {path}{query} HTTP/1.1\r\nHost: x\r\n").into_bytes();
        for (n, v) in headers {
            out.extend_from_slice(format!("{n}: {v}\r\n").as_bytes());
        }
        if let Some(body) = &body {
            out.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(body.as_deref().unwrap_or_default());
        out
    })
}
