//! Request lines of a later HTTP/1 minor version (`HTTP/1.2`), read as HTTP/1.1.
//!
//! RFC 9110 section 2.5: a recipient treats a message of a higher minor version of the major
//! version it speaks as if it were of the highest minor version it speaks. nginx and HAProxy
//! serve `GET / HTTP/1.2`; `httparse` (under the lean server and hyper's) knows only 1.0 and
//! 1.1, so without this the proxy closed such a connection with no answer at all.

/// Rewrites the first request line in `buf` (after any empty lines) from `HTTP/1.x`, x from 2
/// to 9, to `HTTP/1.1` in place; true when it did. Anything else is left as it is.
pub fn later_minor_as_11(buf: &mut [u8]) -> bool {
    let Some(start) = buf.iter().position(|b| *b != b'\r' && *b != b'\n') else {
        return false;
    };
    let Some(len) = buf[start..].iter().position(|b| *b == b'\n') else {
        return false;
    };
    let mut end = start + len;
    if end > start && buf[end - 1] == b'\r' {
        end -= 1;
    }
    let line = &buf[start..end];
    let Some(at) = line.len().checked_sub(9) else {
        return false;
    };
    let later = line[at..at + 8] == *b" HTTP/1." && (b'2'..=b'9').contains(&line[at + 8]);
    if later {
        buf[start + at + 8] = b'1';
    }
    later
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_later_http1_minor_version_is_rewritten() {
        for (sent, want) in [
            (
                "GET / HTTP/1.2\r\nhost: t\r\n\r\n",
                Some("GET / HTTP/1.1\r\nhost: t\r\n\r\n"),
            ),
            ("\r\nGET /a HTTP/1.9\n\n", Some("\r\nGET /a HTTP/1.1\n\n")),
            ("GET / HTTP/1.1\r\n\r\n", None),
            ("GET / HTTP/1.0\r\n\r\n", None),
            ("GET / HTTP/2.0\r\n\r\n", None),
            ("GET / HTTP/1.22\r\n\r\n", None),
            ("GET / HTTP/1.2", None),
            ("GET /HTTP/1.2\r\n", None),
            ("", None),
        ] {
            let mut buf = sent.as_bytes().to_vec();
            let rewritten = later_minor_as_11(&mut buf);
            assert_eq!(rewritten, want.is_some(), "{sent:?}");
            assert_eq!(buf, want.unwrap_or(sent).as_bytes(), "{sent:?}");
        }
    }
}
