//! Reading one HTTP/1.1 response from bytes as they arrive, with no I/O: the head by
//! `httparse`, the body's framing by the rules hyper's client follows (RFC 9112 section 6.3),
//! so that the lean client and hyper agree on every response (`tests/h1_differential.rs`).
//!
//! The body is counted, not kept: a load generator needs its length, not its content.

use crate::names::{spells, Names};
use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Version};
use smallvec::SmallVec;
use std::mem::MaybeUninit;
use std::ops::Range;
use tailguard_record::ErrorKind;

/// Most header lines a response head (or its trailers) may carry: hyper's default.
pub const MAX_HEADERS: usize = 100;
/// Longest response head: hyper's default read buffer limit (8 KiB + 100 x 4 KiB).
pub const MAX_HEAD_BYTES: usize = 8192 + 4096 * 100;
/// Longest run of chunk extensions over a whole body (hyper's limit).
const MAX_EXTENSION_BYTES: u64 = 16 * 1024;
/// Longest trailer section (hyper's limit).
const MAX_TRAILER_BYTES: usize = 16 * 1024;
/// Most interim (1xx) responses taken before the final one. A server sends one or two
/// (`100 Continue`, `103 Early Hints`); one that streams them without end held a request past
/// its timeout and a core busy parsing. HAProxy passes the first 100 on; 16 is far above any
/// real use.
pub const MAX_INTERIM: u32 = 16;
/// Most bytes of interim heads taken before the final one.
pub const MAX_INTERIM_BYTES: usize = 16 * 1024;

/// A complete response, as far as a load generator cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Response {
    /// The final status (informational 1xx responses are skipped).
    pub status: u16,
    /// Body bytes, after chunked framing is taken off.
    pub body_bytes: u64,
    /// The connection can carry another request.
    pub keep_alive: bool,
}

/// Why a response could not be read. Everything but [`Error::Closed`] is the peer sending
/// something that is not HTTP/1.1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The head did not parse.
    #[error("invalid response head: {0}")]
    Head(httparse::Error),
    /// The status code is below 100.
    #[error("invalid status code")]
    Status,
    /// The head, its header count or a declared length is over its limit.
    #[error("response head or length over the limit")]
    TooLarge,
    /// `Content-Length` values that do not parse or disagree.
    #[error("invalid content-length")]
    ContentLength,
    /// `Transfer-Encoding` on an HTTP/1.0 response.
    #[error("transfer-encoding on an HTTP/1.0 response")]
    TransferEncoding,
    /// Chunked framing broken: the step that failed.
    #[error("invalid chunked body: {0}")]
    Chunk(&'static str),
    /// The peer closed the connection before the response was complete.
    #[error("connection closed before the response was complete")]
    Closed,
    /// A header name `http` refuses.
    #[error("invalid header name")]
    HeaderName,
    /// A header value `http` refuses.
    #[error("invalid header value")]
    HeaderValue,
    /// More than [`MAX_INTERIM`] interim (1xx) responses, or [`MAX_INTERIM_BYTES`] of them,
    /// before the final one.
    #[error(
        "more than {MAX_INTERIM} interim (1xx) responses or {MAX_INTERIM_BYTES} bytes of them"
    )]
    InterimFlood,
}

impl Error {
    /// The error kind `load` counts a request that met this under.
    pub fn kind(self) -> ErrorKind {
        match self {
            Error::Closed => ErrorKind::Closed,
            Error::InterimFlood => ErrorKind::InterimFlood,
            _ => ErrorKind::Protocol,
        }
    }
}

/// How far [`Reader::read`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Progress {
    /// More bytes are needed (the unconsumed ones must be offered again, with more after them).
    More,
    /// The response is complete; bytes after it belong to no request.
    Done(Response),
}

/// The state of one response being read.
#[derive(Debug)]
pub struct Reader {
    head_request: bool,
    state: State,
    status: u16,
    keep_alive: bool,
    body_bytes: u64,
    /// Interim responses read so far, and their bytes.
    interim: u32,
    interim_bytes: usize,
}

#[derive(Debug)]
enum State {
    Head,
    /// A body of known length: bytes still due.
    Length(u64),
    Chunked(Chunked),
    /// A body that ends when the connection does.
    UntilClose,
    Done,
}

impl Reader {
    /// A reader for the response to a request; `head_request` for `HEAD` (no body follows).
    pub fn new(head_request: bool) -> Reader {
        Reader {
            head_request,
            state: State::Head,
            status: 0,
            keep_alive: false,
            body_bytes: 0,
            interim: 0,
            interim_bytes: 0,
        }
    }

    /// Reads what it can from `buf`: returns how many bytes it consumed and whether the
    /// response is complete. Unconsumed bytes of an incomplete head must be offered again.
    ///
    /// # Errors
    /// The response is not valid HTTP/1.1 (the reader is then done with).
    pub fn read(&mut self, buf: &[u8]) -> Result<(usize, Progress), Error> {
        let mut at = 0;
        loop {
            let rest = &buf[at..];
            match &mut self.state {
                State::Head => match self.head(rest)? {
                    0 => return Ok((at, Progress::More)),
                    n => at += n,
                },
                State::Length(left) => {
                    let n = (rest.len() as u64).min(*left);
                    *left -= n;
                    self.body_bytes += n;
                    at += n as usize;
                    if *left > 0 {
                        return Ok((at, Progress::More));
                    }
                    self.state = State::Done;
                }
                State::Chunked(chunked) => {
                    let (n, body, end) = chunked.read(rest)?;
                    at += n;
                    self.body_bytes += body;
                    if !end {
                        return Ok((at, Progress::More));
                    }
                    self.state = State::Done;
                }
                State::UntilClose => {
                    self.body_bytes += rest.len() as u64;
                    return Ok((buf.len(), Progress::More));
                }
                State::Done => return Ok((at, Progress::Done(self.response()))),
            }
        }
    }

    /// The peer closed the connection: the response ends here if its body runs until the
    /// close, else it is incomplete.
    ///
    /// # Errors
    /// [`Error::Closed`] unless the body was close-delimited.
    pub fn eof(&mut self) -> Result<Response, Error> {
        match self.state {
            State::UntilClose | State::Done => {
                self.state = State::Done;
                Ok(self.response())
            }
            _ => Err(Error::Closed),
        }
    }

    fn response(&self) -> Response {
        Response {
            status: self.status,
            body_bytes: self.body_bytes,
            keep_alive: self.keep_alive,
        }
    }

    /// Parses a head at the start of `buf`: the bytes it took (0: incomplete). A 1xx head is
    /// consumed and the reader waits for the next one.
    fn head(&mut self, buf: &[u8]) -> Result<usize, Error> {
        self.head_seen(buf, |_| {})
    }

    /// Reads the final response head (1xx heads are skipped) from the front of `buf`, taking
    /// its bytes out: `None` while it is incomplete. Header values are slices of those bytes,
    /// not copies. The body follows with [`Reader::read_data`].
    ///
    /// # Errors
    /// As [`Reader::read`]; besides, a header name or value `http` refuses.
    pub fn read_head(
        &mut self,
        buf: &mut BytesMut,
        names: &mut Names,
    ) -> Result<Option<Head>, Error> {
        while matches!(self.state, State::Head) {
            let mut seen = None;
            let n = self.head_seen(buf, |res| seen = Some(Seen::of(buf, res)))?;
            if n == 0 {
                return Ok(None);
            }
            let bytes = buf.split_to(n).freeze();
            if let Some(seen) = &seen {
                return seen
                    .head(&bytes, self.status, self.keep_alive, names)
                    .map(Some);
            }
        }
        Err(Error::Status)
    }

    /// Reads body bytes from `buf` up to and including the first run of data: the bytes
    /// consumed, where that run lies in `buf`, and whether the body has ended (then with its
    /// trailers, if it had any). Call it after [`Reader::read_head`] until it says the end.
    ///
    /// # Errors
    /// As [`Reader::read`].
    pub fn read_data(&mut self, buf: &[u8]) -> Result<Data, Error> {
        let data = match &mut self.state {
            State::Head => Data::more(0, None),
            State::Length(left) => {
                let n = (buf.len() as u64).min(*left) as usize;
                *left -= n as u64;
                self.body_bytes += n as u64;
                if *left == 0 {
                    self.state = State::Done;
                }
                Data::more(n, Some(0..n))
            }
            State::Chunked(chunked) => {
                let (n, run, end) = chunked.read_run(buf)?;
                self.body_bytes += run.as_ref().map_or(0, |r| r.len() as u64);
                if end {
                    let trailers = chunked.trailer_map()?;
                    self.state = State::Done;
                    Data {
                        used: n,
                        run,
                        end: true,
                        trailers,
                    }
                } else {
                    Data::more(n, run)
                }
            }
            State::UntilClose => {
                self.body_bytes += buf.len() as u64;
                Data::more(buf.len(), Some(0..buf.len()))
            }
            State::Done => Data::more(0, None),
        };
        Ok(Data {
            end: data.end || matches!(self.state, State::Done),
            ..data
        })
    }

    /// True when the body has ended (or there is none): the connection is free for the next
    /// request if [`Head::keep_alive`] allows and no byte came after the response.
    pub fn is_done(&self) -> bool {
        matches!(self.state, State::Done)
    }

    /// The body's length when it is known from the head (and so far unread), for a size hint.
    pub fn remaining(&self) -> Option<u64> {
        match self.state {
            State::Length(left) => Some(left),
            State::Done => Some(0),
            _ => None,
        }
    }

    /// The body ends with the connection's close ([`Reader::eof`] then completes it).
    pub fn until_close(&self) -> bool {
        matches!(self.state, State::UntilClose)
    }

    /// Parses a head as [`Reader::head`] does, showing the final one to `seen`.
    fn head_seen(
        &mut self,
        buf: &[u8],
        seen: impl FnOnce(&httparse::Response<'_, '_>),
    ) -> Result<usize, Error> {
        // Left uninitialised: httparse writes the fields it finds (empty ones written per
        // response cost L1 data misses on every exchange: see `h1::server::head::parse`).
        let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut res = httparse::Response::new(&mut []);
        let config = httparse::ParserConfig::default();
        let len = match config.parse_response_with_uninit_headers(&mut res, buf, &mut headers) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => {
                return Err(Error::TooLarge)
            }
            Ok(httparse::Status::Partial) => return Ok(0),
            Err(httparse::Error::TooManyHeaders) => return Err(Error::TooLarge),
            Err(e) => return Err(Error::Head(e)),
        };
        let status = res.code.expect("a complete head has a status");
        if status < 100 {
            return Err(Error::Status);
        }
        let http11 = res.version == Some(1);
        let framing = Framing::of(res.headers, http11);
        self.status = status;
        self.keep_alive = framing.keep_alive;
        self.state = match status {
            101 => {
                // The connection now speaks another protocol: it carries no more requests.
                self.keep_alive = false;
                State::Done
            }
            100..=199 => State::Head,
            204 | 304 => State::Done,
            _ if self.head_request => State::Done,
            _ => framing.body()?,
        };
        if matches!(self.state, State::UntilClose) {
            self.keep_alive = false;
        }
        if matches!(self.state, State::Head) {
            self.interim += 1;
            self.interim_bytes += len;
            if self.interim > MAX_INTERIM || self.interim_bytes > MAX_INTERIM_BYTES {
                return Err(Error::InterimFlood);
            }
        } else {
            seen(&res);
        }
        Ok(len)
    }
}

/// A final response head, its header values sharing the bytes it was read from.
#[derive(Debug)]
pub struct Head {
    /// The status.
    pub status: StatusCode,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The reason phrase, when it is not the status's canonical one.
    pub reason: Option<Bytes>,
    /// The headers, in order, names lower-cased.
    pub headers: HeaderMap,
    /// The connection can carry another request once the body has ended.
    pub keep_alive: bool,
}

/// What [`Reader::read_data`] found.
#[derive(Debug, PartialEq, Eq)]
pub struct Data {
    /// Bytes of the buffer consumed (framing and data).
    pub used: usize,
    /// Where the run of body data lies in the buffer, if one was found.
    pub run: Option<Range<usize>>,
    /// The body has ended.
    pub end: bool,
    /// The trailers of a chunked body that had some (with `end`).
    pub trailers: Option<HeaderMap>,
}

impl Data {
    fn more(used: usize, run: Option<Range<usize>>) -> Data {
        Data {
            used,
            run,
            end: false,
            trailers: None,
        }
    }
}

/// Where a head's parts lie in the buffer it was parsed from, kept while the buffer is
/// still borrowed by the parse.
struct Seen {
    version: Version,
    reason: Option<Range<u32>>,
    /// Each field's name and value: inline for a usual head (nginx sends five), where a `Vec`
    /// was an allocation per response.
    headers: SmallVec<[(Range<u32>, Range<u32>); SEEN_INLINE]>,
}

/// Fields a [`Seen`] holds without allocating.
const SEEN_INLINE: usize = 12;

impl Seen {
    fn of(buf: &[u8], res: &httparse::Response<'_, '_>) -> Seen {
        let base = buf.as_ptr() as usize;
        // httparse hands an empty reason or value as a slice of its own, not of `buf`.
        // A head is at most `MAX_HEAD_BYTES`, far below 4 GiB.
        let at = |s: &[u8]| match (s.as_ptr() as usize).checked_sub(base) {
            Some(start) if !s.is_empty() && start + s.len() <= buf.len() => {
                start as u32..(start + s.len()) as u32
            }
            _ => 0..0,
        };
        Seen {
            version: if res.version == Some(1) {
                Version::HTTP_11
            } else {
                Version::HTTP_10
            },
            reason: res.reason.map(|r| at(r.as_bytes())),
            headers: res
                .headers
                .iter()
                .map(|h| (at(h.name.as_bytes()), at(h.value)))
                .collect(),
        }
    }

    fn head(
        &self,
        bytes: &Bytes,
        status: u16,
        keep_alive: bool,
        names: &mut Names,
    ) -> Result<Head, Error> {
        let span = |r: &Range<u32>| r.start as usize..r.end as usize;
        let status = StatusCode::from_u16(status).map_err(|_| Error::Status)?;
        let reason = self
            .reason
            .as_ref()
            .map(|r| bytes.slice(span(r)))
            .filter(|r| status.canonical_reason().map(str::as_bytes) != Some(&r[..]));
        // Room for what a proxy adds on the way back (`via`, a header of its own): a map
        // sized to the response alone grows, and allocates, on the first of them.
        let mut headers = crate::spare::map(self.headers.len() + 2);
        names.fit(self.headers.len());
        for (i, (name, value)) in self.headers.iter().enumerate() {
            let name = names
                .get(i, &bytes[span(name)])
                .map_err(|_| Error::HeaderName)?;
            let value = HeaderValue::from_maybe_shared(bytes.slice(span(value)))
                .map_err(|_| Error::HeaderValue)?;
            headers.append(name, value);
        }
        Ok(Head {
            status,
            version: self.version,
            reason,
            headers,
            keep_alive,
        })
    }
}

/// What a head's headers say about its body and its connection.
struct Framing {
    keep_alive: bool,
    /// A `Transfer-Encoding` header: `Some(true)` when its last coding is `chunked`.
    chunked: Option<bool>,
    content_length: Option<Result<u64, Error>>,
    http11: bool,
}

impl Framing {
    /// What a head without framing fields says: kept alive in HTTP/1.1, no body framing.
    fn bare(http11: bool) -> Framing {
        Framing {
            keep_alive: http11,
            chunked: None,
            content_length: None,
            http11,
        }
    }

    fn of(headers: &[httparse::Header<'_>], http11: bool) -> Framing {
        let mut framing = Framing::bare(http11);
        let mut close = false;
        for h in headers {
            let (name, value) = (h.name.as_bytes(), h.value);
            // By length first, then compared a word at a time (`spells`, which folds ASCII case
            // as `eq_ignore_ascii_case` does): a byte loop per name was most of this function.
            match name.len() {
                10 if spells(name, b"connection") => {
                    if !close && spells(value, b"keep-alive") {
                        // The usual value: no `close` in it.
                        framing.keep_alive = true;
                    } else if close || has_token(value, "close") {
                        close = true;
                        framing.keep_alive = false;
                    } else if !framing.keep_alive {
                        framing.keep_alive = has_token(value, "keep-alive");
                    }
                }
                17 if spells(name, b"transfer-encoding") => {
                    // The last Transfer-Encoding line decides, by its last coding.
                    framing.chunked = Some(last_coding_is_chunked(value));
                }
                14 if spells(name, b"content-length") => {
                    framing.content_length = Some(match framing.content_length {
                        Some(Err(e)) => Err(e),
                        seen => content_length(value, seen.map(|r| r.expect("errors kept above"))),
                    });
                }
                _ => {}
            }
        }
        framing
    }

    /// How the body is framed: `Transfer-Encoding` over `Content-Length`, else until close.
    fn body(self) -> Result<State, Error> {
        match (self.chunked, self.content_length) {
            (Some(_), _) if !self.http11 => Err(Error::TransferEncoding),
            (Some(true), _) => Ok(State::Chunked(Chunked::default())),
            (Some(false), _) => Ok(State::UntilClose),
            (None, Some(Ok(len))) if len > u64::MAX - 2 => Err(Error::TooLarge),
            (None, Some(Ok(0))) => Ok(State::Done),
            (None, Some(Ok(len))) => Ok(State::Length(len)),
            (None, Some(Err(e))) => Err(e),
            (None, None) => Ok(State::UntilClose),
        }
    }
}

/// The length every one of these `Content-Length` values states (a comma list of equal
/// lengths is one length), or `None` when one is not a length or they disagree: hyper's rule,
/// for a request the proxy sends as for a response it reads.
pub fn agreed_length<'a>(values: impl IntoIterator<Item = &'a [u8]>) -> Option<u64> {
    let mut length = None;
    for value in values {
        length = Some(content_length(value, length).ok()?);
    }
    length
}

/// A `Transfer-Encoding` value whose last coding is `chunked` (any case).
pub fn ends_chunked(value: &[u8]) -> bool {
    last_coding_is_chunked(value)
}

/// A header value that `http`'s `to_str` takes as text: visible ASCII and tabs only. Such a
/// value is worked on as bytes below: with no other bytes in it, splitting at `,` and trimming
/// ASCII whitespace is what `str::split` and `str::trim` do, without their UTF-8 searchers
/// (about 100 instructions a call on a short value; issue 49).
fn visible(value: &[u8]) -> bool {
    value.iter().all(|&b| b == b'\t' || (32..127).contains(&b))
}

/// The comma-separated parts of a visible value, trimmed.
fn parts(value: &[u8]) -> impl DoubleEndedIterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(<[u8]>::trim_ascii)
}

/// `value` is a comma-separated list holding `token` (any case).
pub fn has_token(value: &[u8], token: &str) -> bool {
    visible(value) && parts(value).any(|t| t.eq_ignore_ascii_case(token.as_bytes()))
}

fn last_coding_is_chunked(value: &[u8]) -> bool {
    visible(value)
        && parts(value)
            .next_back()
            .is_some_and(|t| t.eq_ignore_ascii_case(b"chunked"))
}

/// A `Content-Length` value (a list of equal lengths is one length), agreeing with `seen`.
fn content_length(value: &[u8], seen: Option<u64>) -> Result<u64, Error> {
    if !visible(value) {
        return Err(Error::ContentLength);
    }
    let mut length = seen;
    for part in parts(value) {
        let n = digits(part).ok_or(Error::ContentLength)?;
        match length {
            Some(m) if m != n => return Err(Error::ContentLength),
            _ => length = Some(n),
        }
    }
    length.ok_or(Error::ContentLength)
}

/// Decimal digits only (no sign, no spaces), without overflow.
pub(crate) fn digits(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |n, &b| {
        b.is_ascii_digit()
            .then(|| n.checked_mul(10)?.checked_add(u64::from(b - b'0')))
            .flatten()
    })
}

/// Where a chunked body's reader stands (each step is one byte, but for chunk data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Step {
    /// The first digit of a chunk size.
    #[default]
    Start,
    Size,
    /// Spaces after the size.
    SizeSpace,
    Extension,
    SizeLf,
    Data,
    DataCr,
    DataLf,
    /// After the last chunk: a trailer line or the final CRLF.
    EndCr,
    EndLf,
    Trailer,
    TrailerLf,
}

#[derive(Debug, Default)]
struct Chunked {
    step: Step,
    /// The current chunk's size, then the bytes of it still due.
    size: u64,
    extension_bytes: u64,
    /// The trailer section's bytes (checked as headers at the end).
    trailers: Option<Vec<u8>>,
    trailer_lines: usize,
}

impl Chunked {
    /// Reads from `buf`: bytes consumed, body bytes among them, and whether the body ended.
    fn read(&mut self, buf: &[u8]) -> Result<(usize, u64, bool), Error> {
        let mut at = 0;
        let mut body = 0;
        loop {
            let (n, data, end) = self.read_run(&buf[at..])?;
            at += n;
            let found = data.is_some();
            body += data.map_or(0, |d| d.len() as u64);
            if end || !found {
                return Ok((at, body, end));
            }
        }
    }

    /// Reads framing from `buf` up to and including the first run of chunk data: bytes
    /// consumed, where that run lies in `buf`, and whether the body ended.
    fn read_run(&mut self, buf: &[u8]) -> Result<(usize, Option<Range<usize>>, bool), Error> {
        let mut at = 0;
        while at < buf.len() {
            if self.step == Step::Data {
                let n = ((buf.len() - at) as u64).min(self.size) as usize;
                self.size -= n as u64;
                if self.size == 0 {
                    self.step = Step::DataCr;
                }
                return Ok((at + n, Some(at..at + n), false));
            }
            let b = buf[at];
            at += 1;
            if self.byte(b)? {
                return Ok((at, None, true));
            }
        }
        Ok((at, None, false))
    }

    /// Takes one framing byte; true when the body has ended.
    fn byte(&mut self, b: u8) -> Result<bool, Error> {
        self.step = match (self.step, b) {
            (Step::Start | Step::Size, _) if b.is_ascii_hexdigit() => {
                let digit = u64::from((b as char).to_digit(16).expect("a hex digit"));
                self.size = self
                    .size
                    .checked_mul(16)
                    .and_then(|s| s.checked_add(digit))
                    .ok_or(Error::Chunk("size overflows"))?;
                Step::Size
            }
            (Step::Start, _) => return Err(Error::Chunk("missing size digit")),
            (Step::Size | Step::SizeSpace, b'\t' | b' ') => Step::SizeSpace,
            (Step::Size | Step::SizeSpace, b';') => Step::Extension,
            (Step::Size | Step::SizeSpace | Step::Extension, b'\r') => Step::SizeLf,
            (Step::Size | Step::SizeSpace, _) => return Err(Error::Chunk("invalid size")),
            (Step::Extension, b'\n') => return Err(Error::Chunk("newline in an extension")),
            (Step::Extension, _) => {
                self.extension_bytes += 1;
                if self.extension_bytes >= MAX_EXTENSION_BYTES {
                    return Err(Error::Chunk("extensions over the limit"));
                }
                Step::Extension
            }
            (Step::SizeLf, b'\n') if self.size == 0 => Step::EndCr,
            (Step::SizeLf, b'\n') => Step::Data,
            (Step::SizeLf, _) => return Err(Error::Chunk("no LF after the size")),
            (Step::DataCr, b'\r') => Step::DataLf,
            (Step::DataCr, _) => return Err(Error::Chunk("no CR after the data")),
            (Step::DataLf, b'\n') => {
                self.size = 0;
                Step::Start
            }
            (Step::DataLf, _) => return Err(Error::Chunk("no LF after the data")),
            (Step::EndCr, b'\r') => {
                self.keep_trailer_byte(b)?;
                Step::EndLf
            }
            (Step::EndCr, _) => {
                self.trailers.get_or_insert_with(Vec::new);
                self.keep_trailer_byte(b)?;
                Step::Trailer
            }
            (Step::EndLf, b'\n') => {
                self.keep_trailer_byte(b)?;
                self.check_trailers()?;
                return Ok(true);
            }
            (Step::EndLf, _) => return Err(Error::Chunk("no LF at the end")),
            (Step::Trailer, _) => {
                self.keep_trailer_byte(b)?;
                if b == b'\r' {
                    Step::TrailerLf
                } else {
                    Step::Trailer
                }
            }
            (Step::TrailerLf, b'\n') => {
                if self.trailer_lines >= MAX_HEADERS {
                    return Err(Error::Chunk("too many trailers"));
                }
                self.trailer_lines += 1;
                self.keep_trailer_byte(b)?;
                Step::EndCr
            }
            (Step::TrailerLf, _) => return Err(Error::Chunk("no LF after a trailer")),
            (Step::Data, _) => unreachable!("chunk data is taken in runs, not bytes"),
        };
        Ok(false)
    }

    fn keep_trailer_byte(&mut self, b: u8) -> Result<(), Error> {
        if let Some(trailers) = &mut self.trailers {
            trailers.push(b);
            if trailers.len() >= MAX_TRAILER_BYTES {
                return Err(Error::Chunk("trailers over the limit"));
            }
        }
        Ok(())
    }

    /// The trailer section, if any, must be valid header lines.
    fn check_trailers(&self) -> Result<(), Error> {
        self.trailer_map().map(drop)
    }

    /// The trailer section as a header map (`None` when the body had none).
    fn trailer_map(&self) -> Result<Option<HeaderMap>, Error> {
        let Some(bytes) = &self.trailers else {
            return Ok(None);
        };
        let mut headers = vec![httparse::EMPTY_HEADER; self.trailer_lines];
        match httparse::parse_headers(bytes, &mut headers) {
            Ok(httparse::Status::Complete((_, parsed))) => {
                let mut map = HeaderMap::with_capacity(parsed.len());
                for h in parsed.iter() {
                    let name = HeaderName::from_bytes(h.name.as_bytes());
                    let value = HeaderValue::from_bytes(h.value);
                    match (name, value) {
                        (Ok(name), Ok(value)) => {
                            map.append(name, value);
                        }
                        _ => return Err(Error::Chunk("invalid trailer")),
                    }
                }
                Ok(Some(map))
            }
            _ => Err(Error::Chunk("invalid trailers")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list readers as they were written over `str` (before they worked on bytes).
    mod by_str {
        fn text(value: &[u8]) -> Option<&str> {
            let visible = value.iter().all(|&b| b == b'\t' || (32..127).contains(&b));
            visible.then(|| std::str::from_utf8(value).ok()).flatten()
        }
        pub fn has_token(value: &[u8], token: &str) -> bool {
            text(value).is_some_and(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        }
        pub fn ends_chunked(value: &[u8]) -> bool {
            text(value)
                .and_then(|s| s.rsplit(',').next())
                .is_some_and(|t| t.trim().eq_ignore_ascii_case("chunked"))
        }
        pub fn content_length(value: &[u8], seen: Option<u64>) -> Option<u64> {
            let s = text(value)?;
            let mut length = seen;
            for part in s.split(',') {
                let part = part.trim();
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                let n = part.parse::<u64>().ok()?;
                match length {
                    Some(m) if m != n => return None,
                    _ => length = Some(n),
                }
            }
            length
        }
    }

    /// A comma list of `parts`, each a word with whitespace around it as picked.
    fn list(parts: &[(usize, usize, usize)]) -> Vec<u8> {
        const SPACE: [&[u8]; 4] = [b"", b" ", b"\t", b" \t "];
        const WORD: [&[u8]; 12] = [
            b"close",
            b"CLOSE",
            b"chunked",
            b"Chunked",
            b"keep-alive",
            b"7",
            b"007",
            b"",
            b"18446744073709551616",
            b"clo se",
            b"\xc2\xa0close",
            b"7\x0c",
        ];
        let each = parts
            .iter()
            .map(|&(a, w, b)| [SPACE[a % 4], WORD[w % 12], SPACE[b % 4]].concat());
        each.collect::<Vec<_>>().join(&b","[..])
    }

    proptest::proptest! {
        /// The byte readers answer as the `str` ones did: on comma lists of the words that
        /// matter to them (with spaces, tabs, a control byte and non-ASCII in and around them)
        /// and on any bytes.
        #[test]
        fn list_readers_answer_as_over_str(
            parts in proptest::collection::vec((0usize..4, 0usize..12, 0usize..4), 0..5),
            any_bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..24),
            seen in proptest::option::of(proptest::sample::select(vec![0u64, 7, 8])),
        ) {
            for value in [list(&parts), any_bytes] {
                for token in ["close", "chunked", "keep-alive"] {
                    proptest::prop_assert_eq!(
                        has_token(&value, token),
                        by_str::has_token(&value, token)
                    );
                }
                proptest::prop_assert_eq!(ends_chunked(&value), by_str::ends_chunked(&value));
                proptest::prop_assert_eq!(
                    content_length(&value, seen).ok(),
                    by_str::content_length(&value, seen)
                );
            }
        }
    }

    /// `Framing::of` as it was written before it compared names a word at a time.
    fn framing_by_bytes(headers: &[httparse::Header<'_>], http11: bool) -> Framing {
        let mut framing = Framing::bare(http11);
        let mut close = false;
        for h in headers {
            let value = h.value;
            if h.name.eq_ignore_ascii_case("connection") {
                if close || has_token(value, "close") {
                    close = true;
                    framing.keep_alive = false;
                } else if !framing.keep_alive {
                    framing.keep_alive = has_token(value, "keep-alive");
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                framing.chunked = Some(last_coding_is_chunked(value));
            } else if h.name.eq_ignore_ascii_case("content-length") {
                framing.content_length = Some(match framing.content_length {
                    Some(Err(e)) => Err(e),
                    seen => content_length(value, seen.map(|r| r.expect("errors kept above"))),
                });
            }
        }
        framing
    }

    proptest::proptest! {
        /// The framing read from a head's fields is the one the byte-at-a-time reader found:
        /// names in any case and near misses, values from the list readers' words.
        #[test]
        fn framing_is_read_as_before(
            fields in proptest::collection::vec(
                (
                    0usize..12,
                    0usize..10,
                    proptest::collection::vec((0usize..4, 0usize..12, 0usize..4), 0..3),
                ),
                0..6,
            ),
            http11 in proptest::prelude::any::<bool>(),
        ) {
            const NAMES: [&str; 12] = [
                "connection",
                "Connection",
                "CONNECTION",
                "connectioN",
                "connectiom",
                "transfer-encoding",
                "Transfer-Encoding",
                "transfer_encoding",
                "content-length",
                "Content-Length",
                "content-lengtH",
                "content-lenght",
            ];
            // Whole values the readers' fast paths take, or a list of words.
            const WHOLE: [&[u8]; 6] = [b"keep-alive", b"Keep-Alive", b"close", b"chunked", b"7", b""];
            let values: Vec<Vec<u8>> = fields
                .iter()
                .map(|(_, v, parts)| WHOLE.get(*v).map_or_else(|| list(parts), |w| w.to_vec()))
                .collect();
            let headers: Vec<httparse::Header<'_>> = fields
                .iter()
                .zip(&values)
                .map(|((n, _, _), value)| httparse::Header { name: NAMES[n % 12], value })
                .collect();
            let (now, before) = (Framing::of(&headers, http11), framing_by_bytes(&headers, http11));
            proptest::prop_assert_eq!(now.keep_alive, before.keep_alive);
            proptest::prop_assert_eq!(now.chunked, before.chunked);
            proptest::prop_assert_eq!(now.content_length, before.content_length);
        }
    }

    /// Reads `bytes` offered in pieces of `step` bytes (the unconsumed rest offered again),
    /// ending with the peer's close when `close`.
    fn read(bytes: &[u8], step: usize, head: bool, close: bool) -> Result<Response, Error> {
        let mut reader = Reader::new(head);
        let mut pending = Vec::new();
        for piece in bytes.chunks(step.max(1)) {
            pending.extend_from_slice(piece);
            let (n, progress) = reader.read(&pending)?;
            pending.drain(..n);
            if let Progress::Done(r) = progress {
                return Ok(r);
            }
        }
        if close {
            reader.eof()
        } else {
            Ok(Response {
                status: 0,
                body_bytes: 0,
                keep_alive: false,
            })
        }
    }

    fn ok(status: u16, body_bytes: u64, keep_alive: bool) -> Result<Response, Error> {
        Ok(Response {
            status,
            body_bytes,
            keep_alive,
        })
    }

    /// At most 16 interim heads and 16 KiB of them before the final one (a flood of
    /// `100 Continue` used to be read for as long as the server sent it).
    #[test]
    fn an_interim_flood_is_refused() {
        let heads = |n: usize, head: &[u8]| {
            let mut b = head.repeat(n);
            b.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
            b
        };
        let cont: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";
        for step in [1, 7, 4096] {
            assert_eq!(read(&heads(16, cont), step, false, true), ok(204, 0, true));
            let flood = read(&heads(17, cont), step, false, true);
            assert_eq!(flood, Err(Error::InterimFlood), "pieces of {step}");
        }
        // Few heads, but large: 3 x 6 KiB of hints.
        let big = [
            b"HTTP/1.1 103 Early Hints\r\nlink: ".as_slice(),
            &[b'a'; 6000],
            b"\r\n\r\n",
        ]
        .concat();
        assert_eq!(read(&heads(2, &big), 4096, false, true), ok(204, 0, true));
        assert_eq!(
            read(&heads(3, &big), 4096, false, true),
            Err(Error::InterimFlood)
        );
        assert_eq!(Error::InterimFlood.kind(), ErrorKind::InterimFlood);
        // The same bound for the head reader the proxy uses.
        let mut buf = BytesMut::from(&heads(17, cont)[..]);
        assert_eq!(
            Reader::new(false)
                .read_head(&mut buf, &mut Names::default())
                .unwrap_err(),
            Error::InterimFlood
        );
    }

    #[test]
    fn framings_are_read_whole_in_any_pieces() {
        let cases: &[(&[u8], Result<Response, Error>)] = &[
            (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello", ok(200, 5, true)),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n0\r\nA: b\r\n\r\n",
                ok(200, 5, true),
            ),
            (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n", ok(204, 0, true)),
            (b"HTTP/1.0 200 OK\r\ncontent-length: 2\r\n\r\nhi", ok(200, 2, false)),
            (
                b"HTTP/1.0 200 OK\r\nconnection: keep-alive\r\ncontent-length: 2\r\n\r\nhi",
                ok(200, 2, true),
            ),
            (b"HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n", ok(200, 0, false)),
            (b"HTTP/1.1 200 OK\r\n\r\nuntil the end", ok(200, 13, false)),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 1, 1\r\n\r\nx", ok(200, 1, true)),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\nxx", Err(Error::ContentLength)),
            (b"HTTP/1.1 200 OK\r\ncontent-length: +1\r\n\r\nx", Err(Error::ContentLength)),
            (b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n", Err(Error::TransferEncoding)),
            (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n", Err(Error::Chunk("invalid size"))),
            (b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhel", Err(Error::Closed)),
            (b"HTTP/1.1 099 Odd\r\n\r\n", Err(Error::Status)),
        ];
        for (bytes, want) in cases {
            for step in [1, 3, 7, bytes.len()] {
                let got = read(bytes, step, false, true);
                assert_eq!(
                    &got,
                    want,
                    "{:?} in pieces of {step}",
                    String::from_utf8_lossy(bytes)
                );
            }
        }
    }

    #[test]
    fn a_head_response_has_no_body_whatever_it_declares() {
        let bytes = b"HTTP/1.1 200 OK\r\ncontent-length: 500\r\n\r\n";
        assert_eq!(read(bytes, 64, true, false), ok(200, 0, true));
    }

    #[test]
    fn a_head_without_an_end_is_cut_at_the_limit() {
        let mut bytes = b"HTTP/1.1 200 OK\r\n".to_vec();
        while bytes.len() <= MAX_HEAD_BYTES {
            bytes.extend_from_slice(b"x-filler: 0123456789012345678901234567890123456789\r\n");
        }
        let mut reader = Reader::new(false);
        assert_eq!(reader.read(&bytes), Err(Error::TooLarge));
    }

    #[test]
    fn bytes_after_a_response_are_left_unconsumed() {
        let bytes = b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\nxEXTRA";
        let mut reader = Reader::new(false);
        let (n, progress) = reader.read(bytes).unwrap();
        assert_eq!(n, bytes.len() - 5);
        assert_eq!(
            progress,
            Progress::Done(Response {
                status: 200,
                body_bytes: 1,
                keep_alive: true
            })
        );
    }
}
