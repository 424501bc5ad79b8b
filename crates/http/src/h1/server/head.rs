//! The request heads the lean server serves ([`parse`]), told apart from those it hands to
//! hyper's server.

use crate::h1::parse;
use crate::names::Names;
use bytes::{Bytes, BytesMut};
use http::header::{self, HeaderValue};
use http::{Method, Request, Uri, Version};
use smallvec::SmallVec;
use std::mem::MaybeUninit;

/// Most header fields in a request head (hyper's server's limit; more: handed to hyper).
const MAX_HEADERS: usize = 100;
/// Longest request target (hyper's server's limit; longer: handed to hyper, which answers 414).
const MAX_URI_LEN: usize = (u16::MAX - 1) as usize;

/// A request head the lean path serves.
#[derive(Debug)]
pub(super) struct Head {
    pub(super) request: Request<()>,
    /// The body's length (0: none).
    pub(super) length: u64,
    pub(super) keep_alive: bool,
}

#[allow(
    clippy::large_enum_variant,
    reason = "returned once per request and taken apart at once; a box would cost an allocation"
)]
pub(super) enum Parsed {
    Lean(Head),
    Partial,
    Other,
}

/// Parses the head at the front of `buf`, taking it off `buf` only when the lean path serves
/// it ([module docs](self)).
pub(super) fn parse(buf: &mut BytesMut, max_head: usize, names: &mut Names) -> Parsed {
    // Where each header's name and value are in the head: only as many written as it has
    // (an array of `MAX_HEADERS` zeroed per request was 1.6 KiB of memset, 18 L1 data misses a
    // GET in callgrind's model).
    let mut fields = SmallVec::<[(u32, u32, u32, u32); MAX_HEADERS]>::new();
    let (len, path, method) = {
        // Left uninitialised: httparse writes the fields it finds. The 3.2 KiB of empty ones
        // written per request here and per response in `h1::parse` cost the proxy 114 L1
        // data misses and 680 instructions a GET (callgrind; issue 49).
        let mut headers = [const { MaybeUninit::<httparse::Header<'_>>::uninit() }; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut []);
        let len = match req.parse_with_uninit_headers(buf, &mut headers) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if buf.len() < max_head => return Parsed::Partial,
            // `HTTP/1.2` is served as HTTP/1.1 (RFC 9110 section 2.5), as nginx does.
            Err(httparse::Error::Version) if crate::h1::later_minor_as_11(buf) => {
                return parse(buf, max_head, names)
            }
            Ok(httparse::Status::Partial) | Err(_) => return Parsed::Other,
        };
        let (Some(method), Some(path), Some(1)) = (req.method, req.path, req.version) else {
            return Parsed::Other;
        };
        if len > max_head || path.len() > MAX_URI_LEN {
            return Parsed::Other;
        }
        let Ok(method) = Method::from_bytes(method.as_bytes()) else {
            return Parsed::Other;
        };
        if method == Method::CONNECT {
            return Parsed::Other;
        }
        let base = buf.as_ptr() as usize;
        // Where `s` lies in `buf`. A slice httparse hands from elsewhere (an empty value may be
        // a slice of its own) is an empty range, as `parse::Seen::of` reads it, never an offset
        // computed past the buffer.
        let read = buf.len();
        let at = |s: &[u8]| match (s.as_ptr() as usize).checked_sub(base) {
            Some(start) if start + s.len() <= read => (start, start + s.len()),
            _ => (0, 0),
        };
        for h in req.headers.iter() {
            let (name, value) = (at(h.name.as_bytes()), at(h.value));
            // A head is at most `max_head` bytes, far below 4 GiB.
            fields.push((name.0 as u32, name.1 as u32, value.0 as u32, value.1 as u32));
        }
        (len, at(path.as_bytes()), method)
    };
    let bytes = buf.split_to(len).freeze();
    match lean_head(&bytes, &fields, path, method, names) {
        Some(head) => Parsed::Lean(head),
        None => {
            // Put the head back for hyper.
            let mut whole = BytesMut::with_capacity(bytes.len() + buf.len());
            whole.extend_from_slice(&bytes);
            whole.extend_from_slice(buf);
            *buf = whole;
            Parsed::Other
        }
    }
}

/// The request in `bytes` (a complete head), or `None` when it is not one the lean path
/// serves.
/// Fields a proxy adds to a request head it forwards, at most (see [`lean_head`]).
const ADDED_FIELDS: usize = 4;

fn lean_head(
    bytes: &Bytes,
    fields: &[(u32, u32, u32, u32)],
    path: (usize, usize),
    method: Method,
    names: &mut Names,
) -> Option<Head> {
    let uri = Uri::from_maybe_shared(bytes.slice(path.0..path.1)).ok()?;
    // Room for the fields a proxy adds (`via`, `x-forwarded-for`, a deadline, a trace
    // context): a map sized to the request alone grows, and allocates, on the first of them.
    let mut headers = crate::spare::map(fields.len() + ADDED_FIELDS);
    let (mut length, mut keep_alive) = (None, true);
    names.fit(fields.len());
    for (i, &(ns, ne, vs, ve)) in fields.iter().enumerate() {
        let name = names.get(i, &bytes[ns as usize..ne as usize]).ok()?;
        let value = HeaderValue::from_maybe_shared(bytes.slice(vs as usize..ve as usize)).ok()?;
        match name {
            header::TRANSFER_ENCODING | header::EXPECT | header::UPGRADE | header::TE => {
                return None
            }
            header::CONTENT_LENGTH => {
                // One length of at most 18 digits (hyper's limit is just under 2^64).
                if length.is_some() || value.len() > 18 {
                    return None;
                }
                length = Some(parse::digits(value.as_bytes())?);
            }
            header::CONNECTION => {
                let v = value.as_bytes();
                if v.eq_ignore_ascii_case(b"close") {
                    keep_alive = false;
                } else if !v.eq_ignore_ascii_case(b"keep-alive") {
                    return None;
                }
            }
            _ => {}
        }
        headers.append(name, value);
    }
    let mut request = Request::new(());
    *request.method_mut() = method;
    *request.uri_mut() = uri;
    *request.version_mut() = Version::HTTP_11;
    *request.headers_mut() = headers;
    Some(Head {
        request,
        length: length.unwrap_or(0),
        keep_alive,
    })
}
