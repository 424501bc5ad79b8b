//! A reader that goes away (`tailguard sim --list | head -1`, a closed terminal) ends a verb
//! quietly with 141, as `yes | head` ends, and never with a panic. The verbs write to a pipe
//! whose reading end is closed before they start, so every write they make fails.

use std::process::{Command, Stdio};
use std::time::Duration;
use tailguard_testsupport::process::{drain, wait_or_kill};

#[test]
fn every_verb_that_prints_ends_with_141_when_its_reader_is_gone() {
    // Where the sim case writes its JSON: a name of this process's own.
    let json_path = std::env::temp_dir().join(format!("tg-closed-{}.json", std::process::id()));
    let json_arg = json_path.to_str().unwrap();
    let cases: [&[&str]; 5] = [
        &["sim", "--list"],
        &["sim", "add-steps", "--print-scenario"],
        // Its files are written all the same.
        &["sim", "add-steps", "--duration", "2s", "--json", json_arg],
        &["bench", "--list"],
        // The demo's first line fails: it ends before any fleet starts.
        &["demo"],
    ];
    for args in cases {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(writer)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = drain(child.stderr.take().unwrap());
        let status = wait_or_kill(&mut child, Duration::from_secs(30))
            .unwrap_or_else(|| panic!("{args:?} did not end within 30 s"));
        let stderr = stderr.join().unwrap();
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(status.code(), Some(141), "{args:?}: {stderr}");
    }
    let json = std::fs::read_to_string(&json_path).expect("the sim's JSON was written");
    assert!(json.contains("add-steps"), "{json}");
    std::fs::remove_file(&json_path).unwrap();
}
