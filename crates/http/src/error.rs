//! What went wrong in an HTTP exchange, in few words: the [`ErrorKind`] a request failed with
//! (`load` counts requests by it, the proxy words its answers with it) and the whole error
//! chain on one line. One copy for `load` and the proxy.

use std::error::Error;
use std::io;
pub use tailguard_record::ErrorKind;

/// `e` and its sources on one line, each once: a source whose text the message already holds
/// (an error that embeds its cause, as hyper's and io's often do) is not repeated.
pub fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let text = s.to_string();
        if !out.contains(&text) {
            out.push_str(": ");
            out.push_str(&text);
        }
        source = s.source();
    }
    out
}

/// The first I/O error in `e`'s chain (`e` itself included).
pub fn io_cause<'a>(e: &'a (dyn Error + 'static)) -> Option<&'a io::Error> {
    first_cause(e)
}

/// The first error of type `T` in `e`'s chain (`e` itself included).
fn first_cause<'a, T: Error + 'static>(e: &'a (dyn Error + 'static)) -> Option<&'a T> {
    let mut next = Some(e);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        next = err.source();
    }
    None
}

/// The kind of a failed exchange: what the peer sent was not HTTP (`Protocol`), the connection
/// was refused (`Connect`), reset (`Reset`) or closed early (`Closed`), or something else.
pub fn kind(e: &(dyn Error + 'static)) -> ErrorKind {
    let hyper = first_cause::<hyper::Error>(e);
    if hyper.is_some_and(|h| h.is_parse() || h.is_parse_status() || h.is_parse_too_large()) {
        return ErrorKind::Protocol;
    }
    if let Some(io) = io_cause(e) {
        return match io.kind() {
            io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => ErrorKind::Reset,
            io::ErrorKind::ConnectionRefused => ErrorKind::Connect,
            io::ErrorKind::UnexpectedEof => ErrorKind::Closed,
            _ => ErrorKind::Other,
        };
    }
    if hyper.is_some_and(|h| h.is_incomplete_message() || h.is_closed() || h.is_canceled()) {
        return ErrorKind::Closed;
    }
    ErrorKind::Other
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_name_their_kind() {
        let refused = io::Error::from(io::ErrorKind::ConnectionRefused);
        assert_eq!(kind(&refused), ErrorKind::Connect);
        let reset = io::Error::from(io::ErrorKind::ConnectionReset);
        assert_eq!(kind(&reset), ErrorKind::Reset);
        let eof = io::Error::from(io::ErrorKind::UnexpectedEof);
        assert_eq!(kind(&eof), ErrorKind::Closed);
        assert_eq!(kind(&io::Error::other("odd")), ErrorKind::Other);
    }

    #[test]
    fn the_io_cause_is_found_down_the_chain() {
        #[derive(Debug, thiserror::Error)]
        #[error("wrapped")]
        struct Wrapped(#[source] io::Error);
        let e = Wrapped(io::Error::from(io::ErrorKind::ConnectionRefused));
        assert_eq!(
            io_cause(&e).map(io::Error::kind),
            Some(io::ErrorKind::ConnectionRefused)
        );
        assert_eq!(kind(&e), ErrorKind::Connect);
    }
}
