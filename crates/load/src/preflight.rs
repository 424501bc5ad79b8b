//! The pre-flight check: one real request per target before the clock starts, through the same
//! connector (TLS verification, ALPN, HTTP/2) and the same request template as the run, so a run
//! that cannot succeed stops at once with its cause and the fix instead of counting failures.
//!
//! The request is not counted. A cause that cannot change between two requests (refused
//! connection, untrusted certificate, wrong protocol, a 4xx that `--expect-status` does not
//! allow) stops the run at once; a reset or a close is tried three times before it does, a 5xx
//! ten times (a backend that fails one request in two must still be measurable); a request
//! that times out is a note, not a stop (a slow server is a result).

use crate::config::H1Client;
use crate::config::{Config, Protocol};
use crate::conn::{read_reply, Connector, DialError, ReadError};
use crate::request::Template;
use crate::target::Target;
use tailguard_record::{grpc_name, ErrorKind, Outcome};

/// How many times a failure that may be transient is tried before the run is refused.
const ATTEMPTS: usize = 3;

/// How many times a server error (5xx) is tried before the run is refused: a backend that
/// fails one request in two passes with odds of 1,023 in 1,024.
const SERVER_ERROR_ATTEMPTS: usize = 10;

/// Why a target failed the check.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Refusal {
    /// The URL.
    pub url: String,
    /// The cause and the fix, one line.
    pub cause: String,
}

/// Sends one request to every target; returns the notes worth printing (a gRPC status other
/// than OK, a body that fails a check, a slow first response), or the first target that cannot
/// be served (a 4xx, a 5xx on every try; for gRPC also: not a gRPC server, or a method it does
/// not implement).
pub(crate) async fn check(cfg: &Config) -> Result<Vec<String>, Refusal> {
    let any_tls = cfg.targets.iter().any(|t| t.tls);
    // The pre-flight explains failures with hyper's errors, whichever client the run uses.
    let connector = Connector::new(
        cfg.protocol,
        cfg.insecure,
        any_tls,
        cfg.largest_body(),
        H1Client::Hyper,
        &[],
    );
    let mut notes = Vec::new();
    for (target, send) in checked(cfg) {
        let refuse = |cause: String| Refusal {
            url: target.url.clone(),
            cause,
        };
        if !send {
            // Only requests that change something go to this origin: connect, send nothing.
            connect_only(&connector, target, cfg)
                .await
                .map_err(refuse)?;
            continue;
        }
        let template = Template::new(cfg, target).map_err(refuse)?;
        let grpc = cfg.grpc.as_ref().map(|c| c.method.as_str());
        let mut tries = 0;
        loop {
            tries += 1;
            let answer = once(&connector, target, &template, cfg, grpc.is_some()).await;
            let note = match answer.map(|a| judge(a, grpc, cfg)) {
                Ok(Judged::Fine) => None,
                Ok(Judged::Note(note)) => Some(format!(
                    "note: the pre-flight request to {} was answered {note}; running anyway",
                    target.url
                )),
                Err(Failure::SlowAnswer) => Some(format!(
                    "note: the pre-flight request to {} had no answer within --timeout {}; running anyway",
                    target.url,
                    tailguard_text::duration::format_duration(cfg.timeout)
                )),
                Ok(Judged::Refuse(cause)) | Err(Failure::Fatal(cause)) => {
                    return Err(refuse(cause))
                }
                Ok(Judged::Again(cause)) if tries >= SERVER_ERROR_ATTEMPTS => {
                    return Err(refuse(format!("{cause} ({tries} attempts)")))
                }
                Err(Failure::Transient(cause)) if tries >= ATTEMPTS => {
                    return Err(refuse(format!("{cause} ({tries} attempts)")))
                }
                Ok(Judged::Again(_)) | Err(Failure::Transient(_)) => continue,
            };
            notes.extend(note);
            break;
        }
    }
    Ok(notes)
}

/// The targets the pre-flight checks, and whether it sends their request: every URL given
/// (each is the run's own request); of a request file, per origin the first `GET` or `HEAD`,
/// or, when the origin has none, its first request, connected to and not sent (a `POST` sent
/// twice may do something twice).
fn checked(cfg: &Config) -> Vec<(&Target, bool)> {
    let mut seen = std::collections::HashMap::new();
    let mut out: Vec<(&Target, bool)> = Vec::new();
    for target in &cfg.targets {
        let Some(spec) = &target.spec else {
            out.push((target, true));
            continue;
        };
        let safe = cfg.grpc.is_some()
            || spec.method == http::Method::GET
            || spec.method == http::Method::HEAD;
        match seen.get(&target.origin()) {
            None => {
                seen.insert(target.origin(), out.len());
                out.push((target, safe));
            }
            Some(&i) if safe && !out[i].1 => out[i] = (target, true),
            Some(_) => {}
        }
    }
    out
}

/// Connects to `target` as the run would (TLS and HTTP handshakes), sending nothing.
async fn connect_only(connector: &Connector, target: &Target, cfg: &Config) -> Result<(), String> {
    match tokio::time::timeout(cfg.timeout, connector.dial(target)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => match explain_dial(&e, target, connector.protocol()) {
            Failure::Fatal(cause) | Failure::Transient(cause) => Err(cause),
            Failure::SlowAnswer => Ok(()),
        },
        Err(_) => Err(format!(
            "no connection within --timeout {}",
            tailguard_text::duration::format_duration(cfg.timeout)
        )),
    }
}

#[derive(Debug)]
enum Failure {
    /// The same request would fail the same way again.
    Fatal(String),
    /// It may work on a second try.
    Transient(String),
    /// No answer within the timeout: the run goes on and measures it.
    SlowAnswer,
}

/// What an answer means for the run.
#[derive(Debug, PartialEq, Eq)]
enum Judged {
    /// The run can count it.
    Fine,
    /// Worth a line, not a stop.
    Note(String),
    /// The run cannot succeed: stop at once.
    Refuse(String),
    /// A server error: try again, and stop when every try gets one.
    Again(String),
}

/// Judges an answer. Without `--expect-status`, only 2xx and 3xx pass: a 4xx is most often a
/// mistyped path or a missing header, and counting it good would let every SLO pass on a run
/// of 404s (fortio stops on it too); a 5xx may be one bad replica of several, so only a 5xx on
/// every try stops the run. With `--expect-status`, its set decides, with the same stops.
fn judge(answer: Answer, grpc: Option<&str>, cfg: &Config) -> Judged {
    let expect = cfg.classifier.expect;
    let allowed = expect.is_some_and(|e| e.decides(answer.outcome) && e.allows(answer.outcome));
    let status = match (answer.outcome, grpc) {
        (Outcome::Status(s), Some(_)) if (400..500).contains(&s) => {
            return Judged::Refuse(format!(
                "HTTP {s} to a gRPC call: is it a gRPC server? (gRPC answers HTTP 200)"
            ))
        }
        (Outcome::Grpc(12), Some(method)) if !allowed => {
            return Judged::Refuse(format!(
            "the server does not implement {method} (UNIMPLEMENTED); --call names another method"
        ))
        }
        (Outcome::Grpc(0), _) => None,
        (Outcome::Grpc(_), _) if allowed => None,
        (Outcome::Grpc(code), _) => return Judged::Note(grpc_name(code).to_string()),
        (Outcome::Status(s), _) => Some(s),
        (Outcome::Error(_), _) => None,
    };
    if let Some(s) = status.filter(|_| !allowed) {
        let shown = match http::StatusCode::from_u16(s)
            .ok()
            .and_then(|c| c.canonical_reason())
        {
            Some(reason) => format!("{s} {reason}"),
            None => s.to_string(),
        };
        let allow = match expect {
            Some(set) => format!("--expect-status {set},{s}"),
            None => format!("--expect-status {s} (or {}xx)", s / 100),
        };
        match s {
            400..=499 => {
                return Judged::Refuse(format!(
                    "answered {shown}: check the URL, method and headers; if that is the answer to measure, {allow} counts it good"
                ))
            }
            500.. => {
                return Judged::Again(format!(
                    "answered {shown} every time: the server fails this request; {allow} counts it good, --no-preflight runs anyway"
                ))
            }
            _ if expect.is_some() => {
                return Judged::Note(format!("{shown}, a status {allow} would allow (each such answer counts bad)"))
            }
            _ => {}
        }
    }
    match answer.failed_check {
        Some(check) => Judged::Note(format!(
            "with a body that fails --expect-{} (each such answer counts bad)",
            check.name()
        )),
        None => Judged::Fine,
    }
}

/// An answer to the pre-flight request.
#[derive(Clone, Copy, Debug)]
struct Answer {
    outcome: Outcome,
    failed_check: Option<tailguard_record::Check>,
}

async fn once(
    connector: &Connector,
    target: &Target,
    template: &Template,
    cfg: &Config,
    grpc: bool,
) -> Result<Answer, Failure> {
    let timeout = cfg.timeout;
    let mut conn = match tokio::time::timeout(timeout, connector.dial(target)).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => return Err(explain_dial(&e, target, connector.protocol())),
        Err(_) => {
            return Err(Failure::Fatal(format!(
                "no connection within --timeout {}",
                tailguard_text::duration::format_duration(timeout)
            )))
        }
    };
    let h2 = conn.is_h2();
    let exchange = async {
        conn.ready().await.map_err(|_| None)?;
        conn.send(template.build(h2, None)).await.map_err(Some)
    };
    let (reply, status) = match tokio::time::timeout(timeout, exchange).await {
        Err(_) => return Err(Failure::SlowAnswer),
        Ok(Ok(_)) if conn.flooded() => return Err(interim_flood()),
        Ok(Ok(response)) => {
            let status = response.status();
            let read = tokio::time::timeout(timeout, read_reply(response, grpc, &cfg.body_checks));
            let read = read.await;
            (read, status)
        }
        Ok(Err(None)) => {
            return Err(Failure::Transient(closed(
                "before the request could be sent",
                target,
            )))
        }
        Ok(Err(Some(_))) if conn.flooded() => return Err(interim_flood()),
        Ok(Err(Some(e))) => return Err(explain_exchange(&e, target, h2)),
    };
    match reply {
        Err(_) => Err(Failure::SlowAnswer),
        Ok(Ok(reply)) => Ok(Answer {
            outcome: reply.outcome,
            failed_check: reply.failed_check,
        }),
        // A head came: the server answered, and its body broke off.
        Ok(Err(ReadError::Http(e))) => Err(Failure::Transient(format!(
            "the server answered {status} and then broke off its body ({})",
            tailguard_http::error_chain(&e)
        ))),
        Ok(Err(ReadError::NoGrpcStatus)) => Err(Failure::Fatal(
            "HTTP 200 without a grpc-status: not a gRPC server".into(),
        )),
    }
}

fn interim_flood() -> Failure {
    Failure::Fatal(format!(
        "the server sent more than {} interim (1xx) responses, or {} bytes of them, before its answer",
        tailguard_http::h1::parse::MAX_INTERIM,
        tailguard_http::h1::parse::MAX_INTERIM_BYTES
    ))
}

fn explain_dial(e: &DialError, target: &Target, protocol: Protocol) -> Failure {
    match e {
        DialError::Connect(io) => Failure::Fatal(format!(
            "cannot connect to {}: {io} (is the server running, on that port?)",
            target.addr
        )),
        DialError::ServerName => Failure::Fatal(format!(
            "{:?} is not a name a TLS certificate can carry",
            target.host
        )),
        DialError::Tls(io) => Failure::Fatal(explain_tls(io, target)),
        DialError::NoH2 => Failure::Fatal(
            "the server did not choose HTTP/2 by ALPN: drop --h2 to speak HTTP/1.1 to it".into(),
        ),
        DialError::Http(e) => explain_exchange(e, target, protocol == Protocol::Http2),
    }
}

fn explain_tls(io: &std::io::Error, target: &Target) -> String {
    use rustls::{CertificateError as C, Error as E};
    let inner = io.get_ref().and_then(|e| e.downcast_ref::<E>());
    match inner {
        Some(E::InvalidCertificate(C::UnknownIssuer | C::BadSignature)) => {
            "the server's certificate is not trusted (unknown issuer); --insecure accepts self-signed test servers".into()
        }
        Some(E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. })) => {
            format!(
                "the server's certificate is not valid for {:?}; use the name it was issued for, or --insecure for a test server",
                target.host
            )
        }
        Some(E::InvalidCertificate(
            C::Expired | C::ExpiredContext { .. } | C::NotValidYet | C::NotValidYetContext { .. },
        )) => "the server's certificate is expired or not yet valid (check the clocks); --insecure accepts it anyway".into(),
        Some(E::InvalidCertificate(why)) => format!(
            "the server's certificate is not accepted ({why:?}); --insecure accepts self-signed test servers"
        ),
        Some(E::InvalidMessage(_)) => {
            "the server did not answer in TLS: is it a plain HTTP port? use http://".into()
        }
        Some(other) => format!("TLS handshake failed: {other}"),
        None if io.kind() == std::io::ErrorKind::UnexpectedEof
            || io.kind() == std::io::ErrorKind::ConnectionReset =>
        {
            format!(
                "the server closed the connection during the TLS handshake ({io}): is it a plain HTTP port? use http://"
            )
        }
        None => format!("TLS handshake failed: {io}"),
    }
}

fn explain_exchange(e: &hyper::Error, target: &Target, h2: bool) -> Failure {
    let kind = tailguard_http::error::kind(e);
    let detail = tailguard_http::error_chain(e);
    if h2 && !target.tls && matches!(kind, ErrorKind::Protocol | ErrorKind::Other) {
        return Failure::Fatal(format!(
            "no HTTP/2 answer ({detail}): the server may not accept HTTP/2 without TLS (h2c prior knowledge); drop --h2 to speak HTTP/1.1"
        ));
    }
    match kind {
        ErrorKind::Protocol if !target.tls => Failure::Fatal(format!(
            "the answer is not HTTP/1.1 ({detail}): if the port speaks TLS, use https://; if it speaks only HTTP/2, add --h2"
        )),
        ErrorKind::Protocol => Failure::Fatal(format!("the answer is not valid HTTP ({detail})")),
        ErrorKind::Connect => Failure::Fatal(format!("cannot connect: {detail}")),
        _ if h2 && !target.tls => Failure::Transient(format!(
            "no HTTP/2 answer ({detail}): if the server does not accept HTTP/2 without TLS (h2c prior knowledge), drop --h2"
        )),
        _ => Failure::Transient(closed(&detail, target)),
    }
}

fn closed(detail: &str, target: &Target) -> String {
    let hint = if target.tls {
        ""
    } else {
        "; if the port speaks TLS, use https://"
    };
    format!("the server closed the connection without a response ({detail}){hint}")
}
