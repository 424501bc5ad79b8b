//! Test helpers: start a fleet on loopback port 0; the clients are testsupport's.

use std::net::SocketAddr;
use std::time::Duration;
use tailguard_fleet::Fleet;
use tailguard_serve::{start, Running, ServeOptions};
use tailguard_testsupport::client::{get, H1};

/// Serves the fleet in `yaml` on 127.0.0.1, each backend and the control endpoint on port 0.
pub async fn serve(yaml: &str) -> Running {
    serve_with(yaml, |_| {}).await
}

/// Like [`serve`], with a chance to change the options.
pub async fn serve_with(yaml: &str, tweak: impl FnOnce(&mut ServeOptions)) -> Running {
    let fleet = Fleet::from_yaml_str(yaml, "test").expect("test fleet parses");
    let mut options = ServeOptions::new(fleet);
    options.listen = "127.0.0.1:0".parse().unwrap();
    options.control = Some("127.0.0.1:0".parse().unwrap());
    tweak(&mut options);
    start(options).await.expect("fleet starts")
}

/// Like [`serve`], for a test on tokio's paused clock: every latency wait on tokio's timer
/// (not the precise timer thread, whose real clock the paused one cannot drive).
pub async fn serve_paused(yaml: &str) -> Running {
    serve_with(yaml, |o| o.precise_timer = false).await
}

/// Backend `i` as `GET /backends/{i}` shows it, read in process: the control endpoint answers
/// from a thread of its own, and a paused clock runs on while a test waits for it.
pub fn backend(running: &Running, i: usize) -> serde_json::Value {
    running.describe(i).expect("a backend with that index")
}

/// The address of backend `i`.
pub fn addr(running: &Running, i: usize) -> SocketAddr {
    running.backends()[i].1
}

/// The latency the backend reported deciding on, for the client's last response.
pub fn decided(client: &H1) -> Option<Duration> {
    let value = client.headers.get("x-tailguard-latency-us")?;
    let micros = value.to_str().ok()?.parse().ok()?;
    Some(Duration::from_micros(micros))
}

/// GET on the control endpoint, as JSON.
pub async fn control_get(running: &Running, path: &str) -> serde_json::Value {
    let (status, body, _) = get(running.control().unwrap(), path).await;
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).expect("json")
}

/// POST a JSON change to the control endpoint; returns status and JSON answer.
pub async fn control_post(running: &Running, path: &str, json: &str) -> (u16, serde_json::Value) {
    let mut client = H1::connect(running.control().unwrap()).await;
    let (status, body, _) = client.request("POST", path, json).await;
    (status, serde_json::from_str(&body).expect("json"))
}

/// Milliseconds as f64.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}
