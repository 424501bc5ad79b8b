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
use tokio::sync::mpsc;
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
    pub limits: Limits,
    pub clock: Clock,
    pub state: Arc<PacerState>,
    pub queues: Vec<(async_channel::Sender<Job>, async_channel::Receiver<Job>)>,
}

/// The running worker threads.
pub(crate) struct WorkerThreads {
    done: mpsc::UnboundedReceiver<()>,
    remaining: usize,
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
        let mut joins = Vec::new();
        let mut all_stats = Vec::new();
        for t in 0..threads {
            let stats = Arc::new(Mutex::new(Stats::new()));
            all_stats.push(stats.clone());
            let ids: Vec<usize> = (t..concurrency).step_by(threads).collect();
            let (shared, feed, done_tx) = (shared.clone(), feed.clone(), done_tx.clone());
            let join = std::thread::Builder::new()
                .name(format!("tailguard-load-{t}"))
                .spawn(move || {
                    run_thread(t, ids, shared, stats, feed);
                    let _ = done_tx.send(());
                })
                .expect("spawn a worker thread");
            joins.push(join);
        }
        let remaining = threads;
        (
            WorkerThreads {
                done,
                remaining,
                joins,
            },
            all_stats,
        )
    }

    /// Resolves when every worker of every thread has finished.
    pub(crate) async fn finished(&mut self) {
        while self.remaining > 0 {
            if self.done.recv().await.is_none() {
                break;
            }
            self.remaining -= 1;
        }
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
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds");
    rt.block_on(async move {
        let mut set = JoinSet::new();
        if let Feed::Open(open) = &feed {
            let (tx, _) = open.queues[thread].clone();
            let shard = Shard::new(
                open.schedule.clone(),
                thread as u64,
                open.queues.len() as u64,
            );
            let open = open.clone();
            set.spawn(async move {
                pacer::run(shard, open.limits, open.clock, tx, &open.state).await;
            });
        }
        for id in ids {
            let worker = Worker::new(id, shared.clone(), stats.clone());
            match &feed {
                Feed::Open(open) => set.spawn(worker.run_open(open.queues[thread].1.clone())),
                Feed::Closed(ctl) => set.spawn(worker.run_closed(ctl.clone())),
            };
        }
        while set.join_next().await.is_some() {}
    });
}
