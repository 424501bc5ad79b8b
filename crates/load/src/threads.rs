//! Worker threads: one single-threaded Tokio runtime per thread, each running its share of the
//! workers, keeping one set of statistics and, in an open loop, pacing its own shard of the
//! schedule ([`crate::pacer`]).
//!
//! Why not one multi-threaded runtime: a worker and the HTTP/1.1 connection it drives stay on
//! one thread, so a request costs no cross-thread wake-up or work-stealing bookkeeping, and the
//! statistics lock is only ever contended once per interval, by the reporter (the shape
//! linkerd2-proxy and HAProxy use: a runtime per core). One `Stats` per thread, not per worker,
//! keeps memory flat when `--concurrency` is in the thousands.

use crate::clock::Clock;
use crate::pacer::{self, Limits, PacerState};
use crate::worker::{ClosedLoop, Job, Shared, Worker};
use std::sync::{Arc, Mutex};
use tailguard_pacing::{Schedule, Shard};
use tailguard_record::Stats;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Where workers get their requests.
#[derive(Clone)]
pub(crate) enum Feed {
    /// Open loop: each thread's pacer releases its shard of the schedule into that thread's
    /// queue (`queues[t]`).
    Open(Arc<OpenLoop>),
    /// Closed loop: the next index as soon as the previous request completed.
    Closed(Arc<ClosedLoop>),
}

/// An open-loop run: the schedule, where it ends, and one queue per thread.
pub(crate) struct OpenLoop {
    pub schedule: Schedule,
    /// This generator's part of the schedule (the whole one unless `--shard`).
    pub part: crate::Part,
    pub limits: Limits,
    /// Poll instead of sleeping this long before each due time (zero: never).
    pub busy_poll: std::time::Duration,
    pub clock: Clock,
    pub state: Arc<PacerState>,
    pub queues: Vec<(async_channel::Sender<Job>, async_channel::Receiver<Job>)>,
    /// A replay's streams, one per thread, each taken by its thread's pacer (`None`: the
    /// pacers follow `schedule`).
    pub streams: Option<Vec<Mutex<Option<crate::replay::Stream>>>>,
    /// Each thread's failed requests waiting to be sent again (`--retry-after`; `None`: off).
    pub resends: Option<Vec<Arc<crate::resend::Resends>>>,
}

/// The running worker threads.
///
/// A thread whose workers are done keeps its runtime running until every thread's are
/// ([`finished`](Self::finished) releases them): an HTTP/2 connection is driven by a task on
/// the runtime of the worker that dialed it and carries other threads' streams too, so ending
/// that runtime early would cut their requests in flight.
pub(crate) struct WorkerThreads {
    done: mpsc::UnboundedReceiver<()>,
    remaining: usize,
    release: watch::Sender<bool>,
    joins: Vec<std::thread::JoinHandle<()>>,
}

impl WorkerThreads {
    /// Starts `threads` threads (at most `concurrency`, and an open loop's queue count) sharing
    /// `concurrency` workers; returns each thread's statistics.
    pub(crate) fn start(
        threads: usize,
        concurrency: usize,
        shared: &Arc<Shared>,
        feed: &Feed,
    ) -> (WorkerThreads, Vec<Arc<Mutex<Stats>>>) {
        let threads = threads.clamp(1, concurrency);
        if let Feed::Open(open) = feed {
            assert_eq!(open.queues.len(), threads, "one queue per thread");
        }
        let (done_tx, done) = mpsc::unbounded_channel();
        let (release, released) = watch::channel(false);
        let mut joins = Vec::new();
        let mut all_stats = Vec::new();
        for t in 0..threads {
            let stats = Arc::new(Mutex::new(Stats::new()));
            all_stats.push(stats.clone());
            let ids: Vec<usize> = (t..concurrency).step_by(threads).collect();
            let (shared, feed) = (shared.clone(), feed.clone());
            let (done_tx, released) = (done_tx.clone(), released.clone());
            let join = std::thread::Builder::new()
                .name(format!("tailguard-load-{t}"))
                .spawn(move || run_thread(t, ids, shared, stats, feed, done_tx, released))
                .expect("spawn a worker thread");
            joins.push(join);
        }
        let remaining = threads;
        (
            WorkerThreads {
                done,
                remaining,
                release,
                joins,
            },
            all_stats,
        )
    }

    /// Resolves when every worker of every thread has finished, and lets the threads end.
    pub(crate) async fn finished(&mut self) {
        while self.remaining > 0 {
            if self.done.recv().await.is_none() {
                break;
            }
            self.remaining -= 1;
        }
        self.release.send_replace(true);
    }

    /// Waits for the threads to exit (after [`finished`](Self::finished)).
    pub(crate) fn join(self) {
        for j in self.joins {
            let _ = j.join();
        }
    }
}

fn run_thread(
    thread: usize,
    ids: Vec<usize>,
    shared: Arc<Shared>,
    stats: Arc<Mutex<Stats>>,
    feed: Feed,
    done: mpsc::UnboundedSender<()>,
    mut released: watch::Receiver<bool>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds");
    rt.block_on(async move {
        let mut set = JoinSet::new();
        if let Feed::Open(open) = &feed {
            let (tx, _) = open.queues[thread].clone();
            // Thread t of T in part p of N sends the requests i with i % (N T) == p + N t: the
            // threads together send the part, the parts together the schedule.
            let threads = open.queues.len() as u64;
            let shard = Shard::new(
                open.schedule.clone(),
                open.part.index + open.part.of * thread as u64,
                open.part.of * threads,
            );
            let stream = open.streams.as_ref().map(|s| {
                let stream = s[thread].lock().expect("never poisoned").take();
                stream.expect("one stream per thread")
            });
            let resends = open.resends.as_ref().map(|r| r[thread].clone());
            let open = open.clone();
            set.spawn(async move {
                let (limits, clock, state) = (open.limits, open.clock, &open.state);
                match (stream, resends) {
                    (Some(s), _) => pacer::run(s, limits, open.busy_poll, clock, tx, state).await,
                    (None, Some(r)) => {
                        let source = crate::resend::WithResends::new(shard, r);
                        pacer::run(source, limits, open.busy_poll, clock, tx, state).await
                    }
                    (None, None) => {
                        pacer::run(shard, limits, open.busy_poll, clock, tx, state).await
                    }
                }
            });
        }
        for id in ids {
            let worker = Worker::new(id, shared.clone(), stats.clone());
            match &feed {
                Feed::Open(open) => {
                    let failed = open.resends.as_ref().map(|r| {
                        let r = r[thread].clone();
                        Box::new(move |index, ended| r.push(index, ended)) as crate::worker::Failed
                    });
                    set.spawn(worker.run_open(open.queues[thread].1.clone(), failed))
                }
                Feed::Closed(ctl) => set.spawn(worker.run_closed(ctl.clone())),
            };
        }
        while set.join_next().await.is_some() {}
        let _ = done.send(());
        // Keep driving the connections this runtime dialed until every thread is done (an
        // error here means the run was dropped: end too).
        let _ = released.wait_for(|all| *all).await;
    });
}
