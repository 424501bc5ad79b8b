//! Request files (`--targets`): each request leaves with its own method, headers and body,
//! exactly; weights share the requests out exactly; connections are counted per origin; every
//! figure is kept per name.

use crate::common;

use std::path::PathBuf;
use std::time::Duration;
use tailguard_load::requests::{self, Format};
use tailguard_load::Config;
use tailguard_testsupport::TestServer;

struct Dir(PathBuf);

impl Dir {
    fn new(tag: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("tg-it-requests-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(d.join("bodies")).unwrap();
        Dir(d)
    }

    fn file(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let p = self.0.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A closed loop of exactly `n` requests, one worker, over the file's requests.
fn run_file(
    path: &std::path::Path,
    n: u64,
    concurrency: usize,
) -> (Config, tailguard_load::Report) {
    let targets = requests::read(path, Format::Auto).unwrap();
    let mut cfg = common::config(&targets[0].url, 0.0, Duration::from_secs(60));
    cfg.targets = targets;
    cfg.duration = None;
    cfg.total_requests = Some(n);
    cfg.concurrency = concurrency;
    cfg.headers.insert("x-run", "it".parse().unwrap());
    cfg.headers.insert("accept", "*/*".parse().unwrap());
    let (report, _) = common::run(cfg.clone());
    (cfg, report)
}

#[test]
fn each_request_leaves_with_its_own_method_headers_and_body() {
    let server = TestServer::builder().record().spawn();
    let dir = Dir::new("exact");
    let binary: Vec<u8> = (0..=255u8).collect();
    dir.file("bodies/blob.bin", &binary);
    let base = server.url("");
    let http = format!(
        "# a comment\nGET {base}/users/42?x=1\nAccept: application/json\nX-Twice: 1\nX-Twice: 2\n\n\
         POST {base}/blobs\nContent-Type: application/octet-stream\n@bodies/blob.bin\n\n\
         HEAD {base}/health\n"
    );
    let path = dir.file("targets.txt", http.as_bytes());
    let (_, report) = run_file(&path, 6, 1);
    assert_eq!(report.summary.totals.good, 6);
    let got = server.received();
    assert_eq!(got.len(), 6);
    for round in got.chunks(3) {
        let [get, post, head] = round else {
            unreachable!()
        };
        assert_eq!(
            (get.method.as_str(), get.path.as_str()),
            ("GET", "/users/42?x=1")
        );
        // The file's Accept replaces -H's; -H's X-Run is added to every request.
        let accept: Vec<_> = get.headers.get_all("accept").iter().collect();
        assert_eq!(accept, ["application/json"]);
        assert_eq!(get.headers.get_all("x-twice").iter().count(), 2);
        assert_eq!(get.headers["x-run"], "it");
        assert!(get.body.is_empty());
        assert_eq!(
            (post.method.as_str(), post.path.as_str()),
            ("POST", "/blobs")
        );
        assert_eq!(post.body.as_ref(), binary.as_slice());
        assert_eq!(post.headers["content-type"], "application/octet-stream");
        assert_eq!(post.headers["accept"], "*/*");
        assert_eq!(head.method, "HEAD");
    }
    // One origin, one worker: one connection for all three kinds.
    assert_eq!(server.connections(), 1);
    let names: Vec<_> = report
        .summary
        .per_name
        .iter()
        .map(|n| (n.name.as_str(), n.requests))
        .collect();
    assert_eq!(names.len(), 3);
    assert!(names.iter().all(|(_, n)| *n == 2), "{names:?}");
    let get = report
        .summary
        .per_name
        .iter()
        .find(|n| n.method == "GET")
        .unwrap();
    assert_eq!(get.url, format!("{base}/users/42?x=1"));
    assert!(get.latency_us.is_some());
}

#[test]
fn json_requests_with_weights_are_shared_out_exactly() {
    let a = TestServer::builder().record().spawn();
    let b = TestServer::builder().record().spawn();
    let dir = Dir::new("weights");
    let json = format!(
        "{{\"method\": \"PUT\", \"url\": \"{}\", \"header\": {{\"X-K\": [\"v1\", \"v2\"]}}, \"body\": \"aGVsbG8=\", \"name\": \"put\", \"weight\": 3}}\n\
         {{\"url\": \"{}\", \"name\": \"get\"}}\n",
        a.url("/put"),
        b.url("/get")
    );
    let path = dir.file("targets.jsonl", json.as_bytes());
    let (_, report) = run_file(&path, 400, 4);
    let got = a.received();
    assert_eq!(got.len(), 300, "three in four");
    assert_eq!(b.received().len(), 100);
    assert!(got
        .iter()
        .all(|r| r.method == "PUT" && r.body.as_ref() == b"hello"));
    let k: Vec<_> = got[0].headers.get_all("x-k").iter().collect();
    assert_eq!(k, ["v1", "v2"]);
    // -c 4 counts connections per origin: at most four to each server.
    assert!(
        a.connections() <= 4 && b.connections() <= 4,
        "{} {}",
        a.connections(),
        b.connections()
    );
    let per: Vec<_> = report
        .summary
        .per_name
        .iter()
        .map(|n| (n.name.as_str(), n.requests, n.good))
        .collect();
    assert_eq!(per, [("put", 300, 300), ("get", 100, 100)]);
    let json = serde_json::to_value(&report.summary).unwrap();
    assert_eq!(json["per_name"][0]["method"], "PUT");
    assert_eq!(json["per_target"], serde_json::json!([300, 100]));
}

#[test]
fn the_preflight_sends_each_origins_first_get_and_never_a_post() {
    let posts = TestServer::builder().record().spawn();
    let gets = TestServer::builder().record().spawn();
    let dir = Dir::new("preflight");
    let http = format!(
        "POST {}\n\nPOST {}\n\nGET {}\n",
        posts.url("/a"),
        gets.url("/first"),
        gets.url("/second")
    );
    let path = dir.file("targets.txt", http.as_bytes());
    let mut cfg = common::config(&posts.url("/"), 0.0, Duration::from_secs(60));
    cfg.targets = requests::read(&path, Format::Http).unwrap();
    cfg.duration = None;
    cfg.total_requests = Some(3);
    cfg.concurrency = 1;
    cfg.preflight = true;
    let (report, _) = common::run(cfg);
    assert_eq!(report.summary.totals.good, 3);
    // The POST-only origin was connected to, not sent to; the other got its GET first.
    assert_eq!(posts.received().len(), 1);
    assert_eq!(posts.connections(), 2);
    let paths: Vec<_> = gets
        .received()
        .iter()
        .map(|r| (r.method.clone(), r.path.clone()))
        .collect();
    let want = [("GET", "/second"), ("POST", "/first"), ("GET", "/second")];
    assert_eq!(paths, want.map(|(m, p)| (m.to_string(), p.to_string())));
}

/// Over HTTP/2 each origin has its own pool: `--h2-connections 1` is one connection to each
/// server, carrying every stream of that server's requests, whatever their path or method.
#[test]
fn http2_pools_are_per_origin() {
    let a = TestServer::builder().record().spawn();
    let b = TestServer::builder().record().spawn();
    let dir = Dir::new("h2-origins");
    let http = format!(
        "GET {}\n\nPOST {}\n@body.txt\n\nGET {}\n",
        a.url("/one"),
        a.url("/two"),
        b.url("/three")
    );
    dir.file("body.txt", b"posted");
    let path = dir.file("targets.http", http.as_bytes());
    let targets = requests::read(&path, Format::Auto).unwrap();
    let mut cfg = common::config(&targets[0].url, 0.0, Duration::from_secs(60));
    cfg.targets = targets;
    cfg.duration = None;
    cfg.total_requests = Some(300);
    cfg.concurrency = 8;
    cfg.protocol = tailguard_load::Protocol::Http2;
    cfg.h2_connections = 1;
    let (report, _) = common::run(cfg);
    assert_eq!(report.summary.totals.good, 300);
    assert_eq!((a.connections(), b.connections()), (1, 1));
    assert_eq!((a.h2_requests(), b.h2_requests()), (200, 100));
    let posts = a.received().iter().filter(|r| r.method == "POST").count();
    assert_eq!(posts, 100);
    assert!(a
        .received()
        .iter()
        .filter(|r| r.method == "POST")
        .all(|r| r.body.as_ref() == b"posted"));
}
