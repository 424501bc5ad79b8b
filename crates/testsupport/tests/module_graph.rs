//! Every crate's module graph is acyclic.
//!
//! A node is one module file (`lib.rs`/`main.rs` is the crate root, `a/mod.rs` and `a.rs` are
//! `a`, `a/b.rs` is `a::b`). An edge A -> B means A's code names a path that resolves into B:
//! `crate::b::..`, `super::..`, `self::..` or a child module's name. What only declares or
//! re-exports (`mod b;`, `pub use b::X;` when the module does not use `X` itself) and what only
//! tests compile (`#[cfg(test)]` items) draw no edge, so a root that only declares and
//! re-exports is not a hub of cycles.
//!
//! Run it with `cargo test -p tailguard-testsupport --test module_graph -- --nocapture`: it
//! prints each crate's modules in dependency order (a module's line comes after every module
//! it uses) and fails naming the modules of each cycle with the edges that tie them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Path,
    Open,
    Close,
    Comma,
    Semi,
    Hash,
    Other(char),
}

// long: one pass of a small lexer; its cases read best side by side.
/// Rust source as tokens, without comments, strings and character literals.
fn tokens(src: &str) -> Vec<Tok> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if c == '"' {
            i += 1;
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if (c == 'r' || c == 'b')
            && matches!(next, Some('#') | Some('"'))
            && !(i > 0 && (b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
            && (c == 'r' || next == Some('"'))
        {
            // r"..", r#".."#, b"..": a raw or byte string.
            let raw = c == 'r';
            i += 1;
            let mut hashes = 0;
            while i < b.len() && b[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1; // the opening quote
            loop {
                if i >= b.len() {
                    break;
                }
                if !raw && b[i] == '\\' {
                    i += 2;
                    continue;
                }
                if b[i] == '"' && (0..hashes).all(|k| b.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('a', '\n', '\u{1F}') or a lifetime ('a).
            if next == Some('\\') {
                i += 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
                while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                    i += 1;
                }
            }
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < b.len() && (b[i].is_alphanumeric() || b[i] == '_') {
                i += 1;
            }
            out.push(Tok::Ident(b[start..i].iter().collect()));
        } else if c == ':' && next == Some(':') {
            out.push(Tok::Path);
            i += 2;
        } else {
            out.push(match c {
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                ';' => Tok::Semi,
                '#' => Tok::Hash,
                c if c.is_whitespace() => {
                    i += 1;
                    continue;
                }
                c => Tok::Other(c),
            });
            i += 1;
        }
    }
    out
}

fn is_ident(t: Option<&Tok>, name: &str) -> bool {
    matches!(t, Some(Tok::Ident(s)) if s == name)
}

/// A module's source split by what it does with names.
#[derive(Debug, Default)]
struct Code {
    /// The tokens that draw edges: without `#[cfg(test)]` items, `mod x;` declarations and
    /// `pub use` re-exports.
    uses: Vec<Tok>,
    /// The tokens of the `pub use` re-exports (which the graph follows, not counts).
    reexports: Vec<Tok>,
    /// The modules declared under `#[cfg(test)]`.
    test_mods: BTreeSet<String>,
}

fn code(toks: &[Tok]) -> Code {
    let mut out = Vec::new();
    let mut reexports = Vec::new();
    let mut test_mods = BTreeSet::new();
    let mut i = 0;
    let skip_item = |mut i: usize| -> usize {
        // To the end of the item that starts at i: its `;` or its balanced `{ }` block.
        let mut depth = 0;
        while i < toks.len() {
            match toks[i] {
                Tok::Open => depth += 1,
                Tok::Close => {
                    depth -= 1;
                    if depth == 0 {
                        return i + 1;
                    }
                }
                Tok::Semi if depth == 0 => return i + 1,
                _ => {}
            }
            i += 1;
        }
        i
    };
    while i < toks.len() {
        let cfg_test = toks[i] == Tok::Hash
            && toks.get(i + 1) == Some(&Tok::Other('['))
            && is_ident(toks.get(i + 2), "cfg")
            && toks.get(i + 3) == Some(&Tok::Other('('))
            && is_ident(toks.get(i + 4), "test")
            && toks.get(i + 5) == Some(&Tok::Other(')'));
        if cfg_test {
            let start = i + 7;
            let end = skip_item(start);
            let item = &toks[start..end];
            if let Some(p) = item.iter().position(|t| is_ident(Some(t), "mod")) {
                if let Some(Tok::Ident(name)) = item.get(p + 1) {
                    test_mods.insert(name.clone());
                }
            }
            i = end;
            continue;
        }
        if is_ident(toks.get(i), "mod")
            && matches!(toks.get(i + 1), Some(Tok::Ident(_)))
            && toks.get(i + 2) == Some(&Tok::Semi)
        {
            i += 3;
            continue;
        }
        if is_ident(toks.get(i), "pub") {
            // `pub use`, `pub(crate) use`, `pub(super) use`: a re-export.
            let mut j = i + 1;
            if toks.get(j) == Some(&Tok::Other('(')) {
                while j < toks.len() && toks[j] != Tok::Other(')') {
                    j += 1;
                }
                j += 1;
            }
            if is_ident(toks.get(j), "use") {
                let end = skip_item(j);
                reexports.extend_from_slice(&toks[j + 1..end]);
                i = end;
                continue;
            }
        }
        out.push(toks[i].clone());
        i += 1;
    }
    Code {
        uses: out,
        reexports,
        test_mods,
    }
}

/// Every path named in `toks` that starts with `crate`, `super`, `self` or one of `heads`
/// (`None`: any name), as its segments (use-groups expanded).
fn paths(toks: &[Tok], heads: Option<&BTreeSet<String>>) -> Vec<Vec<String>> {
    fn tree(toks: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
        // A path continuing `prefix` at i: `a::b::{..}` or `a::b`.
        let mut path = prefix.to_vec();
        loop {
            match toks.get(i) {
                Some(Tok::Ident(s)) => {
                    path.push(s.clone());
                    i += 1;
                }
                Some(Tok::Open) => {
                    i += 1;
                    loop {
                        match toks.get(i) {
                            Some(Tok::Close) => return i + 1,
                            Some(Tok::Comma) => i += 1,
                            Some(_) => {
                                let before = i;
                                i = tree(toks, i, &path, out);
                                if i == before {
                                    i += 1;
                                }
                            }
                            None => return i,
                        }
                    }
                }
                _ => {
                    out.push(path);
                    return i;
                }
            }
            if toks.get(i) == Some(&Tok::Path) {
                i += 1;
            } else {
                // `a::B as C`: the alias follows the path as `as`, `C`.
                if let (true, Some(Tok::Ident(alias))) =
                    (is_ident(toks.get(i), "as"), toks.get(i + 1))
                {
                    path.push("as".to_owned());
                    path.push(alias.clone());
                    i += 2;
                }
                out.push(path);
                return i;
            }
        }
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let starts = match &toks[i] {
            Tok::Ident(s) => {
                (i == 0 || toks[i - 1] != Tok::Path)
                    && (toks.get(i + 1) == Some(&Tok::Path)
                        || (heads.is_none() && is_ident(toks.get(i + 1), "as")))
                    && (s == "crate"
                        || s == "super"
                        || s == "self"
                        || heads.is_none_or(|h| h.contains(s)))
            }
            _ => false,
        };
        if starts {
            i = tree(toks, i, &[], &mut out);
        } else {
            i += 1;
        }
    }
    out
}

/// One crate's modules (by path) and their edges.
struct Graph {
    edges: BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
}

fn module_path(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .with_extension("")
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().map(String::as_str) == Some("mod") {
        parts.pop();
    }
    if parts == ["lib"] || parts == ["main"] {
        parts.clear();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = fs::read_dir(dir).expect("read src dir").flatten().collect();
    entries.sort_by_key(|e| e.path());
    for e in entries {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

fn graph(src_dir: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src_dir, &mut files);
    let mut code_of = BTreeMap::new();
    let mut test_only = BTreeSet::new();
    for f in &files {
        let module = module_path(f.strip_prefix(src_dir).expect("under src"));
        let code = code(&tokens(&fs::read_to_string(f).expect("read source")));
        for m in &code.test_mods {
            let mut child = module.clone();
            child.push(m.clone());
            test_only.insert(child);
        }
        code_of.insert(module, code);
    }
    code_of.retain(|m, _| !test_only.iter().any(|t| m.starts_with(t)));
    let modules: BTreeSet<Vec<String>> = code_of.keys().cloned().collect();
    // What each module re-exports: the name, and the path it names (from that module).
    let reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>> = code_of
        .iter()
        .map(|(m, code)| {
            let names = paths(&code.reexports, None)
                .into_iter()
                .filter_map(|mut p| match p.len() {
                    n if n >= 3 && p[n - 2] == "as" => {
                        let alias = p.pop()?;
                        p.pop();
                        Some((alias, p))
                    }
                    _ => Some((p.last()?.clone(), p)),
                })
                .collect();
            (m.clone(), names)
        })
        .collect();
    let resolver = Resolver {
        modules: &modules,
        reexports: &reexports,
    };
    let mut edges = BTreeMap::new();
    for (module, code) in &code_of {
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
            .map(|m| m[module.len()].clone())
            .collect();
        let mut to = BTreeSet::new();
        for path in paths(&code.uses, Some(&children)) {
            if let Some(at) = resolver.resolve(module, &path, 0) {
                if &at != module {
                    to.insert(at);
                }
            }
        }
        // A name this module re-exports and also uses itself is a use like any other.
        let used: BTreeSet<&str> = code
            .uses
            .iter()
            .filter_map(|t| match t {
                Tok::Ident(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        for (name, path) in &reexports[module] {
            if used.contains(name.as_str()) {
                if let Some(at) = resolver.resolve(module, path, 0) {
                    if &at != module {
                        to.insert(at);
                    }
                }
            }
        }
        edges.insert(module.clone(), to);
    }
    Graph { edges }
}

struct Resolver<'a> {
    modules: &'a BTreeSet<Vec<String>>,
    reexports: &'a BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

impl Resolver<'_> {
    /// The module that `path`, named in `from`, lands in: re-exports are followed to the
    /// module that defines the name. `None` for a path into another crate.
    fn resolve(&self, from: &[String], path: &[String], depth: usize) -> Option<Vec<String>> {
        let (mut at, mut rest): (Vec<String>, &[String]) = match path.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &path[1..]),
            Some("super" | "self") => (from.to_vec(), path),
            Some(head) => {
                let mut child = from.to_vec();
                child.push(head.to_owned());
                if !self.modules.contains(&child) {
                    return None; // An external crate (or a prelude name).
                }
                (from.to_vec(), path)
            }
            None => return Some(from.to_vec()),
        };
        while let Some(head) = rest.first() {
            match head.as_str() {
                "super" => {
                    at.pop();
                }
                "self" => {}
                _ => break,
            }
            rest = &rest[1..];
        }
        for (k, seg) in rest.iter().enumerate() {
            let mut next = at.clone();
            next.push(seg.clone());
            if self.modules.contains(&next) {
                at = next;
                continue;
            }
            if let Some(target) = self.reexports.get(&at).and_then(|r| r.get(seg)) {
                if depth < 8 {
                    let mut target = target.clone();
                    target.extend(rest[k + 1..].iter().cloned());
                    return self.resolve(&at, &target, depth + 1);
                }
            }
            break;
        }
        Some(at)
    }
}

fn name(m: &[String]) -> String {
    if m.is_empty() {
        "crate".to_string()
    } else {
        m.join("::")
    }
}

/// The strongly connected components with more than one module (Tarjan), and a topological
/// order of all modules when there are none.
fn cycles(g: &Graph) -> (Vec<Vec<Vec<String>>>, Vec<Vec<String>>) {
    struct State<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a Vec<String>, usize>,
        low: BTreeMap<&'a Vec<String>, usize>,
        stack: Vec<&'a Vec<String>>,
        on: BTreeSet<&'a Vec<String>>,
        out: Vec<Vec<Vec<String>>>,
        order: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a Vec<String>) {
        let n = s.index.len();
        s.index.insert(v, n);
        s.low.insert(v, n);
        s.stack.push(v);
        s.on.insert(v);
        for w in &s.g.edges[v] {
            let Some((w, _)) = s.g.edges.get_key_value(w) else {
                continue;
            };
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().expect("on stack");
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            s.order.extend(comp.iter().cloned());
            if comp.len() > 1 {
                s.out.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
        order: Vec::new(),
    };
    for v in g.edges.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    (s.out, s.order)
}

#[test]
fn every_crate_has_an_acyclic_module_graph() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut dirs: Vec<PathBuf> = fs::read_dir(&crates)
        .expect("read crates/")
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 10,
        "found only {} crates under {}",
        dirs.len(),
        crates.display()
    );
    let mut failures = Vec::new();
    for dir in dirs {
        let krate = dir.parent().and_then(Path::file_name).expect("crate dir");
        let krate = krate.to_string_lossy();
        let g = graph(&dir);
        let (found, order) = cycles(&g);
        println!("{krate}:");
        for m in &order {
            let uses: Vec<String> = g.edges[m].iter().map(|m| name(m)).collect();
            println!("  {:<24} -> {}", name(m), uses.join(", "));
        }
        for comp in found {
            let set: BTreeSet<&Vec<String>> = comp.iter().collect();
            let ties: Vec<String> = comp
                .iter()
                .map(|m| {
                    let to: Vec<String> = g.edges[m]
                        .iter()
                        .filter(|t| set.contains(t))
                        .map(|t| name(t))
                        .collect();
                    format!("{} -> {}", name(m), to.join(", "))
                })
                .collect();
            failures.push(format!("{krate}: {}", ties.join("; ")));
        }
    }
    assert!(
        failures.is_empty(),
        "module cycles:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_reader_sees_paths_not_comments_strings_or_reexports() {
    let src = r##"
        //! crate::doc::mention
        pub use crate::reexported::Thing;
        pub use other_crate as renamed;
        mod child;
        use crate::{a::{X, Y}, b};
        use super::sibling;
        fn f() { let s = "crate::in_string"; let r = r#"crate::raw"#; let c = '"'; child::go(); }
        fn g<'a>(x: &'a str) -> &'a str { crate::c::d::e(x) }
        #[cfg(test)]
        mod tests { use crate::only_tests; }
    "##;
    let code = code(&tokens(src));
    assert!(code.test_mods.contains("tests"));
    let reexported: Vec<String> = paths(&code.reexports, None)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    assert_eq!(
        reexported,
        ["crate::reexported::Thing", "other_crate::as::renamed"]
    );
    let heads: BTreeSet<String> = ["child".to_string()].into();
    let got: BTreeSet<String> = paths(&code.uses, Some(&heads))
        .iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = [
        "crate::a::X",
        "crate::a::Y",
        "crate::b",
        "super::sibling",
        "child::go",
        "crate::c::d::e",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(got, want);
}
