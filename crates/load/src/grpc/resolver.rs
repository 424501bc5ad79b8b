//! `.proto` files read within bounds before `protox` parses them: at most
//! [`MAX_PROTO_BYTES`](crate::files::MAX_PROTO_BYTES) each, nested at most [`MAX_DEPTH`] deep.
//!
//! `protox`'s parser recurses once per nesting level: a file of messages nested 5,000 deep
//! overflowed the stack and aborted the process. Real files nest a handful of levels (a
//! message in a message in a message, an option's aggregate value), so deeper ones are refused
//! by a scan that counts `{`, `[`, `(` and `<` outside comments and string literals.

use protox::file::{File, FileResolver, GoogleFileResolver, IncludeFileResolver};
use std::path::{Path, PathBuf};

/// The deepest nesting of a `.proto` file accepted.
pub const MAX_DEPTH: usize = 32;

/// Include paths searched in order, then the well-known Google files, every file checked.
pub(super) struct Checked {
    includes: Vec<PathBuf>,
    google: GoogleFileResolver,
}

impl Checked {
    pub(super) fn new(includes: Vec<PathBuf>) -> Self {
        Checked {
            includes,
            google: GoogleFileResolver::new(),
        }
    }
}

impl FileResolver for Checked {
    fn resolve_path(&self, path: &Path) -> Option<String> {
        self.includes
            .iter()
            .find_map(|i| IncludeFileResolver::new(i.clone()).resolve_path(path))
    }

    fn open_file(&self, name: &str) -> Result<File, protox::Error> {
        for include in &self.includes {
            let path = include.join(name);
            if !path.is_file() {
                continue;
            }
            let refuse = |why: String| protox::Error::new(format!("{}: {why}", path.display()));
            let bytes = crate::files::read_limited(&path, crate::files::MAX_PROTO_BYTES)
                .map_err(|e| refuse(e.to_string()))?;
            let text = String::from_utf8(bytes).map_err(|_| refuse("not UTF-8".into()))?;
            if let Some(line) = too_deep(&text) {
                return Err(refuse(format!(
                    "line {line}: nested deeper than {MAX_DEPTH} levels"
                )));
            }
            return File::from_source(name, &text);
        }
        self.google.open_file(name)
    }
}

/// The line (from 1) where `text` nests deeper than [`MAX_DEPTH`], if it does.
pub(super) fn too_deep(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut line = 1;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '/' if chars.peek() == Some(&'/') => {
                chars.find(|&c| c == '\n');
                line += 1;
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut prev = ' ';
                for c in chars.by_ref() {
                    line += usize::from(c == '\n');
                    if prev == '*' && c == '/' {
                        break;
                    }
                    prev = c;
                }
            }
            '"' | '\'' => {
                while let Some(s) = chars.next() {
                    match s {
                        '\\' => {
                            chars.next();
                        }
                        '\n' => {
                            line += 1;
                            break;
                        }
                        _ if s == c => break,
                        _ => {}
                    }
                }
            }
            '{' | '[' | '(' | '<' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return Some(line);
                }
            }
            '}' | ']' | ')' | '>' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_nesting_outside_comments_and_strings() {
        let real = "syntax = \"proto3\";\nmessage A { message B { map<string, int32> m = 1; } }\n\
                    // {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{\n/* [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ */\n\
                    option (x) = \"((((((((((((((((((((((((((((((((((((((\";\n";
        assert_eq!(too_deep(real), None);
        let deep = format!(
            "syntax = \"proto3\";\n{}",
            "message M {\n".repeat(MAX_DEPTH + 1)
        );
        assert_eq!(too_deep(&deep), Some(MAX_DEPTH + 2));
    }
}
