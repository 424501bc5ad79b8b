//! The docs cannot drift from the binary: every `tailguard ...` command line in a code block of
//! README.md and docs/*.md goes through the argument parser, and the verb count the README
//! states is the binary's. A failure names the file and the line.

use crate::Cli;
use clap::{CommandFactory, Parser};
use std::path::{Path, PathBuf};

/// README.md and every page in docs/.
fn pages() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("a docs entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The `tailguard` command lines in the code blocks of `text`: (line number, words), a
/// prompt, leading `VAR=value` words and a trailing pipe, redirection or comment taken off,
/// lines ending in `\` joined. In a `text` block (a command's output) only lines after a `$ `
/// prompt are commands.
fn command_lines(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut found = Vec::new();
    let mut block: Option<&str> = None;
    let mut pending: Option<(usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(fence) = line.trim_start().strip_prefix("```") {
            block = match block {
                Some(_) => None,
                None => Some(fence.trim()),
            };
            continue;
        }
        let Some(language) = block else {
            continue;
        };
        if language == "text" && pending.is_none() && !line.trim_start().starts_with("$ ") {
            continue;
        }
        let (number, joined) = match pending.take() {
            Some((n, mut head)) => {
                head.push(' ');
                head.push_str(line.trim());
                (n, head)
            }
            None => (i + 1, line.trim().to_owned()),
        };
        if let Some(head) = joined.strip_suffix('\\') {
            pending = Some((number, head.to_owned()));
            continue;
        }
        let command = joined.strip_prefix("$ ").unwrap_or(&joined);
        let Some(words) = shlex::split(command) else {
            continue;
        };
        let mut words = words
            .into_iter()
            .skip_while(|w| w.contains('=') && !w.starts_with('-'))
            .peekable();
        if words.peek().map(String::as_str) != Some("tailguard") {
            continue;
        }
        let ends = ["|", "&&", ";", "&", ">", ">>", "2>&1", "<"];
        let words: Vec<String> = words
            .take_while(|w| !ends.contains(&w.as_str()) && !w.starts_with('>'))
            .collect();
        found.push((number, words));
    }
    found
}

#[test]
fn every_command_line_in_the_docs_parses() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("a page");
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        for (line, words) in command_lines(&text) {
            checked += 1;
            if let Err(e) = Cli::try_parse_from(&words) {
                let first = e.to_string().lines().next().unwrap_or_default().to_owned();
                failures.push(format!("{name}:{line}: {}: {first}", words.join(" ")));
            }
        }
    }
    assert!(
        checked > 40,
        "only {checked} command lines found: is the scan broken?"
    );
    assert!(
        failures.is_empty(),
        "{} of {checked} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn the_readme_counts_the_verbs_the_binary_has() {
    let verbs: Vec<String> = Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .filter(|n| n != "help")
        .collect();
    let words = [
        "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    ];
    let said = format!("{} verbs", words[verbs.len() - 1]);
    let readme = std::fs::read_to_string(&pages()[0]).expect("README.md");
    assert!(
        readme.contains(&said),
        "README.md does not say {said:?} ({verbs:?})"
    );
    for (count, word) in words.iter().enumerate() {
        let claim = format!("{word} verbs");
        assert!(
            count + 1 == verbs.len() || !readme.contains(&claim),
            "README.md says {claim:?}; the binary has {}",
            verbs.len()
        );
    }
}

#[test]
fn the_scan_finds_commands_and_leaves_the_rest() {
    let page = "text\n```sh\n$ TAILGUARD_LOG=debug tailguard load -r 5 \\\n  http://x/ | head  # c\ncurl x\ntailguard: error: no\n```\n`tailguard nope` in prose\n";
    let found = command_lines(page);
    assert_eq!(
        found,
        vec![(
            3,
            vec![
                "tailguard".into(),
                "load".into(),
                "-r".into(),
                "5".into(),
                "http://x/".into()
            ]
        )]
    );
}

/// A `built-ins: a, b, c` list on a `tailguard sim` or `tailguard serve --fleet` line, in the
/// docs or in a verb's help text, must be the binary's list, in its order.
#[test]
fn built_in_lists_in_the_docs_are_the_binary_s() {
    let sims: Vec<&str> = tailguard_sim::Scenario::builtin_names().to_vec();
    let fleets: Vec<&str> = tailguard_serve::fleet::Fleet::builtin_names().to_vec();
    let mut failures = Vec::new();
    let mut seen = 0;
    let cmd = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
    let helps = ["sim.rs", "serve.rs"].map(|f| cmd.join(f));
    for page in pages().into_iter().chain(helps) {
        let text = std::fs::read_to_string(&page).expect("a page");
        let name = page.file_name().unwrap().to_string_lossy().into_owned();
        for (i, line) in text.lines().enumerate() {
            let Some((_, list)) = line.split_once("built-ins: ") else {
                continue;
            };
            let listed: Vec<&str> = list
                .split([')', '`'])
                .next()
                .unwrap_or_default()
                .split(", ")
                .map(str::trim)
                .collect();
            let want = if line.contains("tailguard sim") {
                &sims
            } else if line.contains("--fleet") {
                &fleets
            } else {
                continue;
            };
            seen += 1;
            if &listed != want {
                failures.push(format!(
                    "{name}:{}: lists {listed:?}, the binary has {want:?}",
                    i + 1
                ));
            }
        }
    }
    assert!(seen > 0, "no built-ins list found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `proxy --help` names every balancer kind the proxy takes, and each one starts a proxy.
#[test]
fn the_balancer_help_names_every_kind() {
    let cli = Cli::command();
    let proxy = cli.find_subcommand("proxy").expect("the proxy verb");
    let arg = proxy
        .get_arguments()
        .find(|a| a.get_id() == "balancer")
        .expect("--balancer");
    let help = arg.get_help().map(ToString::to_string).unwrap_or_default();
    for kind in tailguard_proxy::yaml::BALANCER_KINDS {
        assert!(
            help.contains(kind),
            "--balancer's help omits {kind}: {help}"
        );
        assert!(tailguard_proxy::yaml::balancer_kind(kind).is_ok(), "{kind}");
    }
}
