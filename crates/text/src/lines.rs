//! Lines of a file that may be huge or hostile: read one at a time, each within a stated
//! length, counted from 1 so an error can name its line.

use std::io::BufRead;

/// The lines of `input`, each at most `max` bytes (newline excluded), UTF-8.
#[derive(Debug)]
pub struct Lines<R> {
    input: R,
    max: usize,
    number: usize,
    buf: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    /// Lines of `input` of at most `max` bytes.
    pub fn new(input: R, max: usize) -> Self {
        Lines {
            input,
            max,
            number: 0,
            buf: Vec::new(),
        }
    }

    /// The next line without its line ending, with its number, or `None` at the end.
    ///
    /// # Errors
    /// `line N: ...`: a read error, a line longer than the bound (nothing past the bound is
    /// read), a line that is not UTF-8.
    pub fn next_line(&mut self) -> Result<Option<(usize, &str)>, String> {
        use std::io::Read as _;
        self.buf.clear();
        self.number += 1;
        let n = self.number;
        let limit = self.max as u64 + 2;
        let got = (&mut self.input)
            .take(limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| format!("line {n}: {e}"))?;
        if got == 0 {
            return Ok(None);
        }
        while matches!(self.buf.last(), Some(b'\n' | b'\r')) {
            self.buf.pop();
        }
        if self.buf.len() > self.max {
            return Err(format!("line {n}: longer than {} bytes", self.max));
        }
        std::str::from_utf8(&self.buf)
            .map(|line| Some((n, line)))
            .map_err(|_| format!("line {n}: not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_bounded_and_checked() {
        let mut l = Lines::new("a\r\nbb\n\nccc".as_bytes(), 3);
        let mut got = Vec::new();
        while let Some((n, line)) = l.next_line().unwrap() {
            got.push((n, line.to_string()));
        }
        assert_eq!(
            got,
            [
                (1, "a".into()),
                (2, "bb".into()),
                (3, String::new()),
                (4, "ccc".into())
            ]
        );
        let mut long = Lines::new("ok\ntoo long\n".as_bytes(), 3);
        assert_eq!(long.next_line().unwrap(), Some((1, "ok")));
        assert_eq!(long.next_line().unwrap_err(), "line 2: longer than 3 bytes");
        let mut bad = Lines::new(&b"\xff\n"[..], 3);
        assert_eq!(bad.next_line().unwrap_err(), "line 1: not UTF-8");
    }
}
