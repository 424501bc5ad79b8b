//! Size and nesting limits checked before a YAML document is parsed.
//!
//! YAML parsers slow down sharply on deep nesting: 40,000 levels of `[` or of `- ` took
//! serde_yaml_ng 6.8 s, 100,000 over 30 s (it then refuses them anyway, past its recursion
//! limit of 128). Real documents nest a handful of levels (the proxy configuration 6, a
//! scenario with an inline fleet 8), so a cheap scan refuses anything deeper, and anything
//! larger than [`MAX_BYTES`], before the parser sees it.
//!
//! The scan counts the levels open at each line: block levels by indentation (and by the
//! `- `, `? ` and `: ` indicators that open a level on the same line, as in `- - - x`), flow
//! levels by `[` and `{`. It skips comments, quoted scalars (which may span lines) and the
//! content of block scalars (`|`, `>`). It may count a level more than the parser would (a
//! sequence written at its key's indentation), never fewer.

/// The largest document read: 1 MiB, a hundred times a large real one.
pub const MAX_BYTES: usize = 1 << 20;

/// The deepest nesting accepted, block and flow levels together.
pub const MAX_DEPTH: usize = 32;

/// A document refused before parsing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShapeError {
    /// Larger than [`MAX_BYTES`].
    #[error("larger than {MAX_BYTES} bytes ({0} bytes)")]
    TooLarge(usize),
    /// Nested deeper than [`MAX_DEPTH`].
    #[error("nested deeper than {MAX_DEPTH} levels")]
    TooDeep {
        /// The line (from 1) where the limit was passed.
        line: usize,
    },
}

/// Refuses `text` when it is larger than [`MAX_BYTES`] or nests deeper than [`MAX_DEPTH`].
///
/// # Example
/// ```
/// use tailguard_text::yaml::{check_shape, ShapeError};
/// assert_eq!(check_shape("a: {b: [1, 2]}\n"), Ok(()));
/// let deep = format!("a: {}\n", "[".repeat(40));
/// assert_eq!(check_shape(&deep), Err(ShapeError::TooDeep { line: 1 }));
/// ```
///
/// # Errors
/// [`ShapeError`] saying which limit was passed (and where, for depth).
pub fn check_shape(text: &str) -> Result<(), ShapeError> {
    if text.len() > MAX_BYTES {
        return Err(ShapeError::TooLarge(text.len()));
    }
    let mut scan = Scan::default();
    for (i, line) in text.lines().enumerate() {
        scan.line(line)
            .map_err(|()| ShapeError::TooDeep { line: i + 1 })?;
    }
    Ok(())
}

/// The state carried from line to line.
#[derive(Default)]
struct Scan {
    /// The indentation of each open block level (at most [`MAX_DEPTH`] of them).
    blocks: Vec<usize>,
    /// Open flow collections.
    flow: usize,
    /// Inside a quoted scalar that continues on the next line.
    quote: Option<char>,
    /// Inside a block scalar whose header line had this indentation: more-indented and blank
    /// lines are its content.
    block_scalar: Option<usize>,
}

impl Scan {
    /// One line; `Err` when it opens a level past [`MAX_DEPTH`].
    fn line(&mut self, line: &str) -> Result<(), ()> {
        let indent = line.len() - line.trim_start_matches(' ').len();
        let rest = &line[indent..];
        if let Some(parent) = self.block_scalar {
            if rest.trim().is_empty() || indent > parent {
                return Ok(());
            }
            self.block_scalar = None;
        }
        if self.quote.is_some() || self.flow > 0 {
            // A continuation: its indentation means nothing.
            return self.chars(line, indent);
        }
        if rest.is_empty() || rest.starts_with('#') {
            return Ok(());
        }
        if indent == 0 && (rest.starts_with("---") || rest.starts_with("...")) {
            self.blocks.clear();
            return self.chars(line, indent);
        }
        self.enter_block(indent)?;
        // `- - x`, `? - x`: each indicator opens a level on the same line.
        let mut column = indent;
        let mut rest = rest;
        while let Some(after) = indicator(rest) {
            let spaces = after.len() - after.trim_start_matches(' ').len();
            column += rest.len() - after.len() + spaces;
            rest = &after[spaces..];
            self.enter_block(column)?;
        }
        self.chars(line, column)
    }

    /// A block node at `indent`: closes the deeper levels, opens its own.
    fn enter_block(&mut self, indent: usize) -> Result<(), ()> {
        while self.blocks.last().is_some_and(|&top| top > indent) {
            self.blocks.pop();
        }
        if self.blocks.last() != Some(&indent) {
            self.blocks.push(indent);
        }
        self.check()
    }

    fn check(&self) -> Result<(), ()> {
        if self.blocks.len() + self.flow > MAX_DEPTH {
            Err(())
        } else {
            Ok(())
        }
    }

    /// Counts flow brackets from byte `from` of `line`, outside comments and quoted scalars (a
    /// quote opens a scalar only where a scalar may start), and notes a block scalar header.
    fn chars(&mut self, line: &str, from: usize) -> Result<(), ()> {
        let mut prev = ' ';
        let mut chars = line[from..].char_indices().peekable();
        let mut content_end = line.len() - from;
        while let Some((at, c)) = chars.next() {
            match self.quote {
                Some('\'') if c == '\'' => {
                    if chars.peek().map(|(_, c)| *c) == Some('\'') {
                        chars.next();
                    } else {
                        self.quote = None;
                    }
                }
                Some('"') if c == '\\' => {
                    chars.next();
                }
                Some('"') if c == '"' => self.quote = None,
                Some(_) => {}
                None => {
                    let token_start = prev.is_whitespace() || matches!(prev, '[' | '{' | ',' | ':');
                    match c {
                        '#' if prev.is_whitespace() => {
                            content_end = at;
                            break;
                        }
                        '"' | '\'' if token_start => self.quote = Some(c),
                        '[' | '{' => {
                            self.flow += 1;
                            self.check()?;
                        }
                        ']' | '}' => self.flow = self.flow.saturating_sub(1),
                        _ => {}
                    }
                }
            }
            prev = c;
        }
        if self.quote.is_none()
            && self.flow == 0
            && block_scalar_header(&line[from..][..content_end])
        {
            let indent = line.len() - line.trim_start_matches(' ').len();
            self.block_scalar = Some(indent);
        }
        Ok(())
    }
}

/// After a block indicator (`-`, `?` or `:` followed by a space or the end of the line), the
/// rest of the line.
fn indicator(rest: &str) -> Option<&str> {
    let mut chars = rest.chars();
    let c = chars.next()?;
    let after = chars.as_str();
    (matches!(c, '-' | '?' | ':') && (after.is_empty() || after.starts_with(' '))).then_some(after)
}

/// True when `content` (a line without its comment) ends with a block scalar header: `|` or
/// `>`, then chomping and indentation indicators, as its own token.
fn block_scalar_header(content: &str) -> bool {
    let content = content.trim_end();
    let token = content.rsplit(' ').next().unwrap_or(content);
    let mut chars = token.chars();
    matches!(chars.next(), Some('|' | '>'))
        && chars.all(|c| c == '-' || c == '+' || c.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn depth_error(text: &str) -> Option<usize> {
        match check_shape(text) {
            Ok(()) => None,
            Err(ShapeError::TooDeep { line }) => Some(line),
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn real_documents_pass() {
        let text =
            "seed: 7\nbackends:\n  - name: a\n    latency: {normal: {mean: 1ms, sd: 1ms}}\n    \
                    schedule: [\"from 1s latency x2\"]\n    body: |\n      text [[[[\n        \
                    more {{{{\n  - latency: '[[[['  # [[[[\n";
        assert_eq!(check_shape(text), Ok(()));
    }

    #[test]
    fn flow_nesting_is_bounded() {
        let ok = format!(
            "a: {}1{}\n",
            "[".repeat(MAX_DEPTH - 1),
            "]".repeat(MAX_DEPTH - 1)
        );
        assert_eq!(depth_error(&ok), None);
        let deep = format!("a: 1\nb: {}\n", "[".repeat(MAX_DEPTH));
        assert_eq!(depth_error(&deep), Some(2));
        // Across lines too.
        let lines = format!("a:\n{}", "  [\n".repeat(MAX_DEPTH + 1));
        assert!(depth_error(&lines).is_some());
    }

    #[test]
    fn block_nesting_is_bounded() {
        let dashes = format!("{}x\n", "- ".repeat(MAX_DEPTH + 1));
        assert_eq!(depth_error(&dashes), Some(1));
        let mut keys = String::new();
        for i in 0..=MAX_DEPTH {
            keys.push_str(&format!("{}k{i}:\n", " ".repeat(i)));
        }
        assert_eq!(depth_error(&keys), Some(MAX_DEPTH + 1));
        // Going back up frees the levels.
        let mut wide = String::new();
        for _ in 0..100 {
            wide.push_str("a:\n  b:\n    c: 1\n");
        }
        assert_eq!(depth_error(&wide), None);
    }

    #[test]
    fn quoted_and_block_scalars_and_comments_do_not_count() {
        let quoted = format!("a: \"{}\"\nb: '{}'\n", "[".repeat(100), "{".repeat(100));
        assert_eq!(depth_error(&quoted), None);
        let multi = format!("a: \"x\n{}\n  y\"\nb: 1\n", "[".repeat(100));
        assert_eq!(depth_error(&multi), None);
        let comment = format!("a: 1 # {}\n", "[".repeat(100));
        assert_eq!(depth_error(&comment), None);
        let mut literal = String::from("a: |-\n");
        for i in 0..100 {
            literal.push_str(&format!("{} - [\n", " ".repeat(i + 1)));
        }
        literal.push_str("b: 1\n");
        assert_eq!(depth_error(&literal), None);
    }

    #[test]
    fn size_is_bounded() {
        let big = "#".repeat(MAX_BYTES + 1);
        assert_eq!(check_shape(&big), Err(ShapeError::TooLarge(MAX_BYTES + 1)));
    }
}
