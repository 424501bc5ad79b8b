//! Tier 2: the training `scripts/build-pgo.sh` runs between its two builds, on this build's
//! binary (`--train BIN`): `serve` behind `proxy`, driven by `load` over HTTP/1.1 and gRPC. It
//! must run as written, every flag it gives still parsing and every request answered (each
//! load has `--slo 'success>=100%'`), so the script cannot rot between PGO builds, which are
//! too long for the suite. About 15 s of wall clock, on the script's fixed ports 18401-18403
//! (below the kernel's ephemeral range, which the other tests' port-0 binds use).

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use tailguard_testsupport::process::{drain, wait_or_kill};

#[test]
#[ignore = "tier 2: 14 s of live HTTP/1.1 and gRPC load through the proxy on ports 18401-18403"]
fn the_pgo_training_runs_as_written_and_every_request_is_answered() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut child = Command::new("bash")
        .arg(root.join("scripts/build-pgo.sh"))
        .args(["--train", env!("CARGO_BIN_EXE_tailguard")])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // A group of its own: on a timeout the script's serve and proxy go with it.
        .process_group(0)
        .spawn()
        .expect("bash runs the script");
    let (out, err) = (
        drain(child.stdout.take().expect("piped")),
        drain(child.stderr.take().expect("piped")),
    );
    let status = wait_or_kill(&mut child, Duration::from_secs(90));
    if status.is_none() {
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    }
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        status.is_some_and(|s| s.success()),
        "the training failed ({status:?}): {out}{err}"
    );
    assert!(
        out.contains("every request answered"),
        "the training did not finish: {out}{err}"
    );
}
