//! Worker threads: one single-threaded Tokio runtime per thread, each running its share of the
//! workers and keeping one set of statistics.
//!
//! Why not one multi-threaded runtime: a worker and the HTTP/1.1 connection it drives stay on
//! one thread, so a request costs no cross-thread wake-up or work-stealing bookkeeping, and the
//! statistics lock is only ever contended once per interval, by the reporter (the shape
//! linkerd2-proxy and HAProxy use: a runtime per core). One `Stats` per thread, not per worker,
//! keeps memory flat when `--concurrency` is in the thousands.

use crate::worker::{ClosedLoop, Job, Shared, Worker};
use std::sync::{Arc, Mutex};
use tailguard_record::Stats;
use tokio::sync::mpsc;
use tokio::task::JoinSet;

/// Where workers get their requests.
#[derive(Clone)]
pub(crate) enum Feed {
    /// Open loop: jobs released by the pacer.
    Open(async_channel::Receiver<Job>),
    /// Closed loop: the next index as soon as the previous request completed.
    Closed(Arc<ClosedLoop>),
}

/// The running worker threads.
pub(crate) struct WorkerThreads {
    done: mpsc::UnboundedReceiver<()>,
    remaining: usize,
    joins: Vec<std::thread::JoinHandle<()>>,
}

impl WorkerThreads {
    /// Starts `threads` threads sharing `concurrency` workers; returns each thread's statistics.
    pub(crate) fn start(
        threads: usize,
        concurrency: usize,
        shared: &Arc<Shared>,
        feed: &Feed,
    ) -> (WorkerThreads, Vec<Arc<Mutex<Stats>>>) {
        let threads = threads.clamp(1, concurrency);
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
                    run_thread(ids, shared, stats, feed);
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

fn run_thread(ids: Vec<usize>, shared: Arc<Shared>, stats: Arc<Mutex<Stats>>, feed: Feed) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a current-thread runtime builds");
    rt.block_on(async move {
        let mut set = JoinSet::new();
        for id in ids {
            let worker = Worker::new(id, shared.clone(), stats.clone());
            match &feed {
                Feed::Open(jobs) => set.spawn(worker.run_open(jobs.clone())),
                Feed::Closed(ctl) => set.spawn(worker.run_closed(ctl.clone())),
            };
        }
        while set.join_next().await.is_some() {}
    });
}
