//! `--output FILE`: every request's record as a line of NDJSON
//! ([`tailguard_record::records`]), written by a thread of its own through a bounded queue, so
//! a slow disk never holds a request: a record the queue has no room for is dropped and
//! counted, in the report and the file's last line.

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Mutex;
use tailguard_record::records::{self, Footer, Header};
use tailguard_record::Record;

/// Records queued for the writer at most: about 6 MB, a second at 65,000 requests a second.
pub const QUEUE: usize = 65_536;

enum Msg {
    Record(Record),
    /// The last message: the count of records dropped and the run's times.
    End(u64, [f64; 3]),
}

/// What the writer did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The file.
    pub path: PathBuf,
    /// Record lines written.
    pub records: u64,
    /// Records dropped (the queue was full).
    pub dropped: u64,
    /// Why writing stopped early, if it did.
    pub error: Option<String>,
}

/// What the writer thread ends with: the lines written, and why writing stopped early.
type Ended = (u64, Option<String>);

/// The writer of a run's records.
pub(crate) struct Output {
    path: PathBuf,
    tx: SyncSender<Msg>,
    dropped: AtomicU64,
    thread: Mutex<Option<std::thread::JoinHandle<Ended>>>,
}

impl Output {
    /// Writes `header` to `file` (created before the run, at `path`) and starts the writer.
    pub(crate) fn start(
        file: std::fs::File,
        path: &Path,
        header: &Header,
    ) -> std::io::Result<Output> {
        let mut file = BufWriter::with_capacity(256 * 1024, file);
        serde_json::to_writer(&mut file, header)?;
        file.write_all(b"\n")?;
        let (tx, rx) = sync_channel(QUEUE);
        let thread = std::thread::Builder::new()
            .name("tailguard-output".into())
            .spawn(move || write_all(file, &rx))?;
        Ok(Output {
            path: path.to_path_buf(),
            tx,
            dropped: AtomicU64::new(0),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Queues `rec`; drops and counts it when the queue is full.
    pub(crate) fn record(&self, rec: &Record) {
        match self.tx.try_send(Msg::Record(*rec)) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Ends the file with its counts and the run's length and sending time (seconds) and
    /// offered rate, and waits for the writer (after the last record).
    pub(crate) fn finish(&self, duration_s: f64, send_phase_s: f64, target_rate: f64) -> Written {
        let dropped = self.dropped.load(Ordering::Relaxed);
        // Blocking: the writer drains the queue, so the end finds room.
        let times = [duration_s, send_phase_s, target_rate];
        let _ = self.tx.send(Msg::End(dropped, times));
        let thread = self.thread.lock().expect("never poisoned").take();
        let (records, error) = match thread.map(std::thread::JoinHandle::join) {
            Some(Ok(done)) => done,
            Some(Err(_)) => (0, Some("the writer thread panicked".into())),
            None => (0, Some("already finished".into())),
        };
        Written {
            path: self.path.clone(),
            records,
            dropped,
            error,
        }
    }
}

/// The writer thread: every record until `End`, then the end line.
fn write_all(mut file: BufWriter<std::fs::File>, rx: &Receiver<Msg>) -> Ended {
    let mut records = 0u64;
    let mut error = None;
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Record(rec) => {
                if error.is_none() {
                    match records::write_line(&mut file, &rec) {
                        Ok(()) => records += 1,
                        Err(e) => error = Some(e.to_string()),
                    }
                }
            }
            Msg::End(dropped, [duration_s, send_phase_s, target_rate]) => {
                let footer = Footer {
                    end: true,
                    records,
                    dropped,
                    duration_s,
                    send_phase_s,
                    target_rate,
                };
                let ended = serde_json::to_writer(&mut file, &footer)
                    .map_err(std::io::Error::from)
                    .and_then(|()| file.write_all(b"\n"))
                    .and_then(|()| file.flush());
                if let Err(e) = ended {
                    error.get_or_insert(e.to_string());
                }
                break;
            }
        }
    }
    (records, error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;
    use std::time::Duration;

    fn rec(i: u64) -> Record {
        Record {
            scheduled: Duration::from_micros(i),
            sent: Duration::from_micros(i),
            completed: Duration::from_micros(i + 100),
            outcome: tailguard_record::Outcome::Status(200),
            bytes: 2,
            target: 0,
            failed_check: None,
        }
    }

    /// A reader that stops reading: the queue fills, later records are dropped and counted,
    /// and the file's last line says how many; no record waits.
    #[test]
    fn a_stalled_file_drops_and_counts_and_never_blocks() {
        let (read_end, write_end) = nix::unistd::pipe().unwrap();
        let header = Header {
            tailguard_records: records::FORMAT,
            ..Header::default()
        };
        let out =
            Output::start(std::fs::File::from(write_end), Path::new("pipe"), &header).unwrap();
        let total = 2 * QUEUE as u64;
        for i in 0..total {
            out.record(&rec(i));
        }
        let dropped = out.dropped.load(Ordering::Relaxed);
        assert!(
            dropped > 0,
            "the queue and the pipe hold less than {total} records"
        );
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            std::fs::File::from(read_end)
                .read_to_string(&mut text)
                .unwrap();
            text
        });
        let written = out.finish(1.0, 1.0, 100.0);
        drop(out);
        let text = reader.join().unwrap();
        assert_eq!(written.records + written.dropped, total);
        assert_eq!(written.dropped, dropped);
        let back = records::read(text.as_bytes()).unwrap();
        assert_eq!(back.stats.requests(), written.records);
        assert_eq!(back.footer.unwrap().dropped, dropped);
    }
}
