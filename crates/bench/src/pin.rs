//! `--pin`: the proxy under test on a CPU of its own, the load generator and the backend on the
//! others.
//!
//! Unpinned, a proxy shares its CPU with whatever the scheduler puts there. A socket write wakes
//! its reader with a hint that the writer will soon sleep, so the kernel may start the woken
//! peer (the load generator, the backend) on the proxy's own CPU, where it preempts the proxy
//! as the write returns; on a machine with as many busy threads as CPUs this decides a good
//! part of a maximum rate, and differently from one round and one proxy to the next. Pinned,
//! every proxy gets the same CPU to itself and the comparison is of the proxies.
//!
//! A thread's CPUs are inherited by the threads and processes it starts: the bench's own thread
//! is moved to the other CPUs before its runtimes start, and each proxy process is started from
//! a thread moved to the proxy's CPU for that moment.

use crate::error::BenchError;
use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;

/// The CPUs this process may use, split: the last for the proxy under test, the others for
/// the load generator and the backend.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pin {
    proxy: CpuSet,
    rest: CpuSet,
    proxy_cpu: usize,
    rest_count: usize,
}

/// The calling thread (`Pid` 0 is the caller's own thread for these calls).
fn here() -> Pid {
    Pid::from_raw(0)
}

fn affinity_error(what: &str, e: nix::Error) -> BenchError {
    BenchError::Io(std::io::Error::other(format!("--pin: {what}: {e}")))
}

impl Pin {
    /// Splits the CPUs the calling thread may use; at least two are needed.
    pub(crate) fn split() -> Result<Pin, BenchError> {
        let allowed = sched_getaffinity(here()).map_err(|e| affinity_error("reading CPUs", e))?;
        let cpus: Vec<usize> = (0..CpuSet::count())
            .filter(|&c| allowed.is_set(c).unwrap_or(false))
            .collect();
        let [others @ .., last] = &cpus[..] else {
            return Err(BenchError::Invalid("--pin: no CPU is allowed".to_owned()));
        };
        if others.is_empty() {
            return Err(BenchError::Invalid(format!(
                "--pin needs at least two CPUs: this process may use only CPU {last}"
            )));
        }
        let mut proxy = CpuSet::new();
        let mut rest = CpuSet::new();
        // Both in range: they came from the same set's indices.
        proxy.set(*last).map_err(|e| affinity_error("CPU set", e))?;
        for &c in others {
            rest.set(c).map_err(|e| affinity_error("CPU set", e))?;
        }
        Ok(Pin {
            proxy,
            rest,
            proxy_cpu: *last,
            rest_count: others.len(),
        })
    }

    /// Moves the calling thread (and what it starts from now on) to the load generator's and
    /// backend's CPUs, until the returned guard is dropped.
    pub(crate) fn rest_here(&self) -> Result<Restore, BenchError> {
        let before = sched_getaffinity(here()).map_err(|e| affinity_error("reading CPUs", e))?;
        sched_setaffinity(here(), &self.rest).map_err(|e| affinity_error("setting CPUs", e))?;
        Ok(Restore(before))
    }

    /// The proxy's CPU, for a thread to take on itself (an in-process proxy's runtime thread).
    pub(crate) fn proxy_set(&self) -> CpuSet {
        self.proxy
    }

    /// Runs `start` (a process's start: a child inherits the CPUs of the thread that starts it)
    /// with the calling thread on the proxy's CPU, then moves the thread back.
    pub(crate) fn on_proxy_cpu<T>(&self, start: impl FnOnce() -> T) -> Result<T, BenchError> {
        let back =
            Restore(sched_getaffinity(here()).map_err(|e| affinity_error("reading CPUs", e))?);
        sched_setaffinity(here(), &self.proxy).map_err(|e| affinity_error("setting CPUs", e))?;
        let out = start();
        drop(back);
        Ok(out)
    }

    /// For the report: where each side ran.
    pub(crate) fn describe(&self) -> String {
        let rest: Vec<String> = (0..CpuSet::count())
            .filter(|&c| self.rest.is_set(c).unwrap_or(false))
            .map(|c| c.to_string())
            .collect();
        let plural = if self.rest_count == 1 { "" } else { "s" };
        format!(
            "pinned: the proxy under test ran on CPU {} alone, the load generator and the \
             backend on CPU{plural} {} (the direct path ran on those alone: its maximum is the \
             most any proxy's could show)",
            self.proxy_cpu,
            rest.join(",")
        )
    }
}

/// Puts the calling thread back on the CPUs it had, when dropped.
#[derive(Debug)]
pub(crate) struct Restore(CpuSet);

impl Drop for Restore {
    fn drop(&mut self) {
        // The set is one this thread had a moment ago, so the kernel takes it back.
        let _ = sched_setaffinity(here(), &self.0);
    }
}

/// Sets the calling thread's CPUs (a runtime thread's start hook; the set was checked by
/// [`Pin::split`] and [`Pin::rest_here`] already, so a failure here is not expected and leaves
/// the thread where it was).
pub(crate) fn take(set: &CpuSet) {
    let _ = sched_setaffinity(here(), set);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allowed_list(status: &str) -> String {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .map(|v| v.trim().to_owned())
            .unwrap_or_default()
    }

    #[test]
    fn a_child_started_on_the_proxy_cpu_runs_there_and_the_thread_goes_back() {
        let Ok(pin) = Pin::split() else {
            // One CPU: the error is the answer (checked in the test below).
            assert_eq!(
                std::thread::available_parallelism().map_or(1, usize::from),
                1
            );
            return;
        };
        // On a thread of its own, so the test harness's thread keeps its CPUs.
        std::thread::spawn(move || {
            let before = sched_getaffinity(here()).expect("affinity");
            let out = pin
                .on_proxy_cpu(|| {
                    std::process::Command::new("cat")
                        .arg("/proc/self/status")
                        .output()
                })
                .expect("pinned start")
                .expect("cat runs");
            let status = String::from_utf8_lossy(&out.stdout);
            assert_eq!(allowed_list(&status), pin.proxy_cpu.to_string());
            assert_eq!(sched_getaffinity(here()).expect("affinity"), before);
            {
                let _guard = pin.rest_here().expect("rest");
                let now = sched_getaffinity(here()).expect("affinity");
                assert!(!now.is_set(pin.proxy_cpu).expect("in range"));
                assert!(now.is_set(0).expect("in range") || pin.proxy_cpu == 0);
            }
            assert_eq!(sched_getaffinity(here()).expect("affinity"), before);
        })
        .join()
        .expect("the pinned thread");
    }

    #[test]
    fn one_cpu_is_refused_by_name() {
        std::thread::spawn(|| {
            let mut one = CpuSet::new();
            let cpu = (0..CpuSet::count())
                .find(|&c| {
                    sched_getaffinity(here())
                        .expect("affinity")
                        .is_set(c)
                        .unwrap_or(false)
                })
                .expect("some CPU is allowed");
            one.set(cpu).expect("in range");
            sched_setaffinity(here(), &one).expect("narrowing is allowed");
            let err = Pin::split().expect_err("one CPU cannot be split");
            assert!(err.to_string().contains("at least two CPUs"), "{err}");
        })
        .join()
        .expect("the narrowed thread");
    }
}
