//! `tailguard load` as a user runs it: flags, output, exit codes.

use std::process::{Command, Output};
use std::time::Duration;
use tailguard_testsupport::{Deadline, TestServer};

fn tailguard(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args(args)
        .output()
        .expect("run tailguard")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn prints_interval_lines_and_the_final_report() {
    let server = TestServer::builder().spawn();
    let url = server.url("/");
    let out = tailguard(&[
        "load", "--rate", "200", "-d", "2s", "-i", "1s", "-c", "4", &url,
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.starts_with(&format!(
        "# sending 200 GET req/s with concurrency=4 to {url} ...\n"
    )));
    assert!(text.contains("good/bad/failed   target goal% intvl"));
    // Two interval lines, each due 200 requests (responses land in the interval they complete).
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("/0/0      200 "))
        .collect();
    assert_eq!(lines.len(), 2, "{text}");
    let good: u64 = lines
        .iter()
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(good, 400);
    assert!(text.contains("# 400 requests in"), "{text}");
    assert!(text.contains("# status codes: 200=400"), "{text}");
    assert!(text.contains("FROM         TO  #REQUESTS"), "{text}");
}

#[test]
fn slo_verdicts_set_the_exit_code() {
    let server = TestServer::builder()
        .delay(Duration::from_millis(20))
        .spawn();
    let url = server.url("/");
    let met = tailguard(&[
        "load",
        "-n",
        "20",
        "-c",
        "20",
        "-q",
        "--slo",
        "p50<=1s,success>=99.9%",
        &url,
    ]);
    assert_eq!(met.status.code(), Some(0), "{}", stderr(&met));
    assert!(String::from_utf8_lossy(&met.stdout).contains("# SLO success>=99.9%: met"));
    let missed = tailguard(&[
        "load", "-n", "20", "-c", "20", "-q", "--slo", "p99<=5ms", &url,
    ]);
    assert_eq!(missed.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&missed.stdout);
    assert!(
        stdout.contains("# SLO p99<=5ms: MISSED (actual "),
        "{stdout}"
    );
    assert!(stderr(&missed).contains("an objective was missed"));
}

#[test]
fn json_to_stdout_moves_the_text_to_stderr() {
    let server = TestServer::builder().spawn();
    let out = tailguard(&[
        "load",
        "-n",
        "50",
        "--rate",
        "0",
        "--json",
        "-",
        &server.url("/"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(json["requests"], 50);
    assert_eq!(json["arrivals"], "closed");
    assert!(stderr(&out).contains("# 50 requests in"));
}

// long: a table of bad inputs and the one line each must print.
#[test]
fn bad_input_is_one_clear_line_and_exit_2() {
    let cases: [(&[&str], &str); 19] = [
        (
            &[
                "load",
                "-n",
                "0",
                "--slo",
                "p99<=1ms",
                "http://127.0.0.1:9/",
            ],
            "--total-requests must be at least 1",
        ),
        (
            &["load", "-d", "0s", "http://127.0.0.1:9/"],
            "--duration must be longer than zero",
        ),
        (&["load", "127.0.0.1:9/"], "missing scheme"),
        (
            &["load", "ftp://127.0.0.1/"],
            "the scheme must be http or https",
        ),
        (
            &["load", "--unit", "min", "http://127.0.0.1:9/"],
            "unknown unit \"min\"",
        ),
        (
            &["load", "-H", "NoColon", "http://127.0.0.1:9/"],
            "expected 'Name: value'",
        ),
        (
            &["load", "--rate=-5", "http://127.0.0.1:9/"],
            "--rate must be 0",
        ),
        (
            &["load", "--arrivals", "burst", "http://127.0.0.1:9/"],
            "unknown arrivals",
        ),
        (
            &["load", "--slo", "p99=1ms", "http://127.0.0.1:9/"],
            "expected METRIC<=VALUE",
        ),
        (&["load", "@/nonexistent/urls.txt"], "cannot read URL file"),
        (
            &[
                "load",
                "-r",
                "0",
                "--ramp-from",
                "10",
                "http://127.0.0.1:9/",
            ],
            "--ramp-from applies to an open loop only",
        ),
        (
            &["load", "--ramp-from", "0", "http://127.0.0.1:9/"],
            "a ramp must start from a rate from 0.001 to 10000000, got 0",
        ),
        (
            &[
                "load",
                "-n",
                "50",
                "--ramp-from",
                "10",
                "http://127.0.0.1:9/",
            ],
            "--ramp-from needs --ramp-over or --duration",
        ),
        (
            &["load", "--ramp-over", "1s", "http://127.0.0.1:9/"],
            "--ramp-from <RATE>",
        ),
        (
            &["load", "--shard", "4/4", "http://127.0.0.1:9/"],
            "expected I/N, a part from 0 to N-1 of N",
        ),
        (
            &["load", "-r", "0", "--shard", "1/4", "http://127.0.0.1:9/"],
            "--shard applies to an open loop only",
        ),
        (
            &["load", "--start-at", "@1000", "http://127.0.0.1:9/"],
            "--start-at was ",
        ),
        (
            &[
                "load",
                "--start-at",
                "2999-01-01T00:00:00Z",
                "http://127.0.0.1:9/",
            ],
            "more than a day",
        ),
        (
            &["load", "--start-at", "noon", "http://127.0.0.1:9/"],
            "expected RFC 3339",
        ),
    ];
    for (args, want) in cases {
        let out = tailguard(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

#[test]
fn a_target_that_cannot_be_served_exits_3_with_the_cause() {
    let server = TestServer::builder().spawn();
    let url = server.url("/");
    drop(server);
    let out = tailguard(&["load", "-d", "1s", &url]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "pre-flight request to {url} failed: cannot connect"
        )),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty(), "nothing was measured");

    // Without the pre-flight the run goes ahead, every request fails, and the exit status
    // says so with the top error kinds.
    let out = tailguard(&["load", "-n", "5", "-r", "50", "-q", "--no-preflight", &url]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("tailguard: every request failed (connect=5)"),
        "{err}"
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("good 0, bad 0, failed 5"), "{text}");
}

#[test]
fn a_run_of_bad_answers_is_not_a_failed_run() {
    // 5xx answers are responses: the run is measured, judged by --slo, and exits 0 without one
    // (the pre-flight, which would stop on a 5xx every try, is off).
    let server = TestServer::builder().status(503).spawn();
    let url = server.url("/");
    let out = tailguard(&["load", "-n", "5", "-r", "50", "-q", "--no-preflight", &url]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("good 0, bad 5, failed 0"), "{text}");
}

#[test]
fn a_mistyped_path_stops_the_run_before_an_slo_can_pass_it() {
    // Every answer 404: counted good as slow_cooker does, `success>=99%` would pass. The
    // pre-flight stops the run with exit 3 and names the flag that allows a 404.
    let server = TestServer::builder().status(404).spawn();
    let url = server.url("/no/such/path");
    let out = tailguard(&[
        "load",
        "-n",
        "5",
        "-r",
        "50",
        "-q",
        "--slo",
        "success>=99%",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("answered 404 Not Found"), "{err}");
    assert!(err.contains("--expect-status 404 (or 4xx)"), "{err}");
    assert_eq!(server.hits(), 1, "only the pre-flight request");

    // Allowed, the run goes ahead; a failed check is a bad answer (exit 1 from the SLO).
    let out = tailguard(&[
        "load",
        "-n",
        "5",
        "-r",
        "50",
        "-q",
        "--expect-status",
        "404",
        "--expect-body-contains",
        "no such text",
        "--slo",
        "success>=99%",
        &url,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("good 0, bad 5, failed 0"), "{text}");
    assert!(
        text.contains("# failed checks (counted bad): body-contains=5"),
        "{text}"
    );
    let out = tailguard(&["load", "-n", "1", "--expect-status", "2xx,abc", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("\"abc\" is not a status"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn output_paths_are_checked_before_anything_is_sent() {
    let server = TestServer::builder().spawn();
    for flag in ["--json", "--hdr-log"] {
        let out = tailguard(&[
            "load",
            "-n",
            "5",
            flag,
            "/nonexistent/x.json",
            &server.url("/"),
        ]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("cannot write /nonexistent/x.json"),
            "{flag}: {}",
            stderr(&out)
        );
    }
    assert_eq!(server.hits(), 0, "nothing was sent");
}

#[test]
fn a_closed_pipe_ends_the_run_quietly() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let server = TestServer::builder().spawn();
    // `2>&1 | head -3`: both streams into one pipe whose reader leaves after three lines.
    let (reader, writer) = std::io::pipe().expect("pipe");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tailguard"))
        .args([
            "load",
            "-r",
            "100",
            "-d",
            "30s",
            "-i",
            "200ms",
            &server.url("/"),
        ])
        .stdout(writer.try_clone().expect("clone"))
        .stderr(writer)
        .stdin(Stdio::null())
        .spawn()
        .expect("run tailguard");
    let mut lines = BufReader::new(reader);
    let mut seen = Vec::new();
    for _ in 0..3 {
        let mut line = String::new();
        lines.read_line(&mut line).expect("read a line");
        seen.push(line);
    }
    drop(lines);
    let deadline = Deadline::after(Duration::from_secs(10));
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            !deadline.passed(),
            "still running 10 s after its reader left"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(141), "{seen:?}");
    assert!(seen[0].starts_with("# sending 100 GET req/s"), "{seen:?}");
    assert!(
        server.hits() < 1_000,
        "the run stopped early: {} sent",
        server.hits()
    );
}

#[test]
fn a_request_file_runs_and_reports_each_name() {
    let a = TestServer::builder().record().spawn();
    let b = TestServer::builder().spawn();
    let dir = std::env::temp_dir().join(format!("tg-cli-targets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("new.json"), "{\"id\": 7}").unwrap();
    let file = dir.join("targets.txt");
    let text = format!(
        "GET {}\n\nPOST {}\nContent-Type: application/json\n@new.json\n\nGET {}\n",
        a.url("/users/7"),
        a.url("/users"),
        b.url("/health")
    );
    std::fs::write(&file, text).unwrap();
    let html = dir.join("run.html");
    let (file_s, html_s) = (file.display().to_string(), html.display().to_string());
    let out = tailguard(&[
        "load",
        "-n",
        "6",
        "-r",
        "100",
        "-q",
        "--targets",
        &file_s,
        "-H",
        "X-Run: cli",
        "--html",
        &html_s,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let report = String::from_utf8(out.stdout).unwrap();
    assert!(report.contains("# per request name (3 names):"), "{report}");
    assert!(
        report.contains(&format!("POST {}", a.url("/users"))),
        "{report}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("per request name</h3>"),
        "the page has the names' table"
    );
    assert!(page.contains(&format!("<td>GET {}</td>", b.url("/health"))));
    // The pre-flight's GET, then two of each.
    let posts: Vec<_> = a
        .received()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 2);
    assert!(posts
        .iter()
        .all(|r| r.body.as_ref() == b"{\"id\": 7}" && r.headers["x-run"] == "cli"));

    // A request file takes the place of URLs, -X and --data; a bad line is named.
    let out = tailguard(&["load", "-n", "1", "--targets", &file_s, &b.url("/")]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    std::fs::write(&file, "GET http://127.0.0.1:1/\nnot a header\n").unwrap();
    let out = tailguard(&["load", "-n", "1", "--targets", &file_s]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{file_s}:2: expected a header")),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn per_request_records_are_read_back_by_report() {
    let server = TestServer::builder().spawn();
    let dir = std::env::temp_dir().join(format!("tg-cli-records-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("run.ndjson");
    let file_s = file.display().to_string();
    let out = tailguard(&[
        "load",
        "-r",
        "400",
        "-d",
        "1s",
        "-q",
        "--output",
        &file_s,
        &server.url("/"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let run = String::from_utf8(out.stdout).unwrap();
    assert!(
        run.contains(&format!("# per-request records: 400 written to {file_s}")),
        "{run}"
    );
    let out = tailguard(&["report", &file_s]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let back = String::from_utf8(out.stdout).unwrap();
    // The same report from the records: counts, rates, percentiles, histogram, codes.
    let from = |t: &str| {
        t.lines()
            .skip_while(|l| !l.contains(" requests in "))
            .filter(|l| !l.starts_with("# client CPU") && !l.starts_with("# per-request records"))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(from(&run), from(&back));
    assert!(from(&run).len() > 10, "{run}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_replay_runs_from_its_file_and_a_bad_one_is_refused_before_sending() {
    let server = TestServer::builder().spawn();
    let dir = std::env::temp_dir().join(format!("tg-cli-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("recorded.jsonl");
    let file_s = file.display().to_string();
    let lines: String = (0..20)
        .map(|i| {
            format!(
                "{{\"offset_ms\": {}, \"url\": \"{}\"}}\n",
                i * 10,
                server.url("/r")
            )
        })
        .collect();
    std::fs::write(&file, lines).unwrap();
    let out = tailguard(&[
        "load",
        "--replay",
        &file_s,
        "--speed",
        "4",
        "-q",
        "--slo",
        "success>=99%",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("# 20 requests in "), "{text}");
    assert!(
        text.ends_with("# SLO success>=99%: met (actual 100.000%)\n"),
        "{text}"
    );
    // The pre-flight GET, then the twenty.
    assert_eq!(server.hits(), 21);

    let out = tailguard(&["load", "--replay", &file_s, &server.url("/")]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a replay takes no URL: {}",
        stderr(&out)
    );
    std::fs::write(&file, "{\"offset_ms\": 3, \"url\": \"http://127.0.0.1:1/\"}\n{\"offset_ms\": 2, \"url\": \"http://127.0.0.1:1/\"}\n").unwrap();
    let out = tailguard(&["load", "--replay", &file_s]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("{file_s}:2: its offset is before line 1's")),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn report_reads_sweeps_and_compares_their_knees() {
    let server = TestServer::builder().spawn();
    let dir = std::env::temp_dir().join(format!("tg-cli-sweeps-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b, html) = (
        dir.join("a.json"),
        dir.join("b.json"),
        dir.join("knees.html"),
    );
    let url = server.url("/");
    for (path, slo) in [(&a, "p99<=1s"), (&b, "p99<=2s")] {
        let out = tailguard(&[
            "load",
            "--sweep",
            "100..200",
            "--sweep-steps",
            "2",
            "-d",
            "300ms",
            "-q",
            "--slo",
            slo,
            "--json",
            path.to_str().unwrap(),
            &url,
        ]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let out = tailguard(&[
        "report",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("# a: --slo p99<=1s"), "{text}");
    assert!(
        text.contains("# knee b/a: 200 req/s (at least) against 200 req/s (at least): 1.00x"),
        "{text}"
    );
    assert!(text.contains("# note: the objectives differ"), "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(
        page.contains("<title>tailguard report: a vs b</title>"),
        "{page}"
    );
    assert!(page.contains("<svg"), "the page draws the curves");
    // A sweep and a run do not mix.
    let run = dir.join("run.json");
    let out = tailguard(&[
        "load",
        "-n",
        "5",
        "-r",
        "50",
        "-q",
        "--json",
        run.to_str().unwrap(),
        &url,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let out = tailguard(&["report", a.to_str().unwrap(), run.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn chosen_percentiles_reach_the_report_the_json_and_the_objectives() {
    let server = TestServer::builder().spawn();
    let url = server.url("/");
    let dir = std::env::temp_dir().join(format!("tg-cli-pct-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let json = dir.join("run.json");
    let json_s = json.display().to_string();
    let out = tailguard(&[
        "load",
        "-n",
        "50",
        "-r",
        "200",
        "-q",
        "--percentiles",
        "50,98,99.9",
        "--slo",
        "p98<=10s",
        "--json",
        &json_s,
        &url,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).unwrap();
    let rows: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("latency service time"))
        .skip(1)
        .take(5)
        .map(|l| l.split_whitespace().next().unwrap_or(""))
        .collect();
    assert_eq!(rows, ["min", "p50", "p98", "p99.9", "max"], "{text}");
    assert!(text.contains("# SLO p98<=10s: met"), "{text}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(summary["percentiles"][1]["percentile"], 98.0);
    assert!(summary["percentiles"][1]["latency_us"].as_u64().is_some());
    // An objective on a percentile not measured is bad input, named.
    let out = tailguard(&["load", "-n", "5", "--slo", "p98<=1s", &url]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("p98 is not measured; add it to --percentiles"),
        "{}",
        stderr(&out)
    );
    let _ = std::fs::remove_dir_all(&dir);
}
