//! `tailguard proxy` with Kubernetes discovery, as a process: without any Kubernetes
//! configuration it refuses to start and names the namer; with RBAC denying it the
//! EndpointSlices, it serves (no endpoints: 503) and says why in one error line, not one per
//! retry. The API server is a real one (`shared/tools/k8s/start-apiserver.sh --rbac`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;
use tailguard_testsupport::Deadline;

const NAMER: &str = "{kind: io.l5d.k8s, service: web, port: http}";

fn config(tag: &str) -> PathBuf {
    let path =
        std::env::temp_dir().join(format!("tailguard-k8s-{tag}-{}.yaml", std::process::id()));
    let yaml = format!(
        "admin: {{ip: 127.0.0.1, port: 0}}\nservers: [{{ip: 127.0.0.1, port: 0}}]\n\
         services:\n  - name: web\n    namer: {NAMER}\n"
    );
    std::fs::write(&path, yaml).unwrap();
    path
}

#[test]
fn without_a_kubernetes_configuration_the_proxy_refuses_to_start() {
    let path = config("none");
    let out = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["proxy", "--config"])
        .arg(&path)
        .env("KUBECONFIG", "/nonexistent/kubeconfig")
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env("HOME", "/nonexistent")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("services[web].namer"), "{err}");
    assert!(err.contains("no Kubernetes configuration"), "{err}");
}

fn tools() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/tools/k8s")
}

/// Starts a real API server (`--rbac`: with RBAC) and returns its directory.
fn start_api(args: &[&str]) -> PathBuf {
    let out = Command::new("bash")
        .arg(tools().join("start-apiserver.sh"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

#[test]
#[ignore = "tier 2: a real kube-apiserver and etcd"]
fn a_denied_watch_is_one_clear_error_line_and_no_endpoints() {
    let dir = start_api(&["--rbac"]);
    let path = config("rbac");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(["proxy", "--config"])
        .arg(&path)
        // The `tailguard` user has no role: listing EndpointSlices is forbidden.
        .env("KUBECONFIG", dir.join("kubeconfig-tailguard"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let lines = tailguard_testsupport::process::lines(stderr);
    // Read for 8 s: the watcher retries with backoff several times in that while.
    let until = Deadline::after(Duration::from_secs(8));
    let mut seen = Vec::new();
    while !until.passed() {
        if let Ok(line) = lines.recv_timeout(until.left()) {
            seen.push(line);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    let _ = Command::new("bash")
        .arg(tools().join("stop-apiserver.sh"))
        .arg(&dir)
        .status();
    std::fs::remove_file(&path).unwrap();
    assert!(
        seen.iter()
            .any(|l| l.contains("tailguard proxy listening on")),
        "it serves: {seen:#?}"
    );
    let errors: Vec<&String> = seen
        .iter()
        .filter(|l| l.contains("kubernetes discovery failed"))
        .collect();
    assert_eq!(errors.len(), 1, "{seen:#?}");
    assert!(errors[0].contains("forbidden"), "{}", errors[0]);
    assert!(errors[0].contains("endpointslices"), "{}", errors[0]);
}

/// Every manifest in deploy/k8s is accepted by a real API server (`kubectl apply
/// --dry-run=server`: schema, defaults and admission, nothing stored).
#[test]
#[ignore = "tier 2: a real kube-apiserver and etcd"]
fn the_manifests_pass_the_api_server_s_validation() {
    let dir = start_api(&[]);
    let deploy = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/k8s");
    let apply = |what: &[&str]| {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(dir.join("kubeconfig"))
            .args(["apply", "--dry-run=server"])
            .args(what)
            .current_dir(&deploy)
            .output()
            .unwrap()
    };
    let outs = [
        apply(&["-k", "."]),
        apply(&["-f", "daemonset.yaml"]),
        apply(&["-f", "load-job.yaml"]),
    ];
    let _ = Command::new("bash")
        .arg(tools().join("stop-apiserver.sh"))
        .arg(&dir)
        .status();
    for out in outs {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(text.contains("(server dry run)"), "{text}");
    }
}
