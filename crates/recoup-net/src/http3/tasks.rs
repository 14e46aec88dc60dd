//! A tiny single-threaded executor for one connection's HTTP/3 futures, polled from the mio loop.
//!
//! Each task has a flag its waker sets; [`Tasks::run_woken`] polls the flagged tasks once.
//! Tasks sleep on [`Timers`] that run on the driver's injected clock, never a clock of their own.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Wake, Waker};

use recoup_time::Instant;

// `Send` only so that a server can be moved to the thread that runs it.
type LocalFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Set by a task's waker, cleared when the task is polled.
#[derive(Debug, Default)]
struct WakeFlag(AtomicBool);

impl Wake for WakeFlag {
    fn wake(self: Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.store(true, Ordering::Release);
    }
}

struct Task {
    flag: Arc<WakeFlag>,
    waker: Waker,
    future: LocalFuture,
}

/// Hands new tasks to the [`Tasks`] it came from, also from inside a running task.
#[derive(Clone, Default)]
pub(crate) struct Spawner(Arc<Mutex<Vec<LocalFuture>>>);

impl Spawner {
    pub(crate) fn spawn(&self, future: impl Future<Output = ()> + Send + 'static) {
        lock(&self.0).push(Box::pin(future));
    }
}

impl std::fmt::Debug for Spawner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Spawner")
            .field("queued", &lock(&self.0).len())
            .finish()
    }
}

/// The tasks of one connection.
#[derive(Default)]
pub(crate) struct Tasks {
    running: Vec<Task>,
    spawner: Spawner,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("running", &self.running.len())
            .finish()
    }
}

impl Tasks {
    pub(crate) fn spawner(&self) -> Spawner {
        self.spawner.clone()
    }

    /// Polls every new or woken task once and drops the finished ones; returns whether a task
    /// is woken again (another round has work).
    pub(crate) fn run_woken(&mut self) -> bool {
        let spawned: Vec<LocalFuture> = std::mem::take(&mut *lock(&self.spawner.0));
        for future in spawned {
            let flag = Arc::new(WakeFlag(AtomicBool::new(true)));
            self.running.push(Task {
                waker: Waker::from(Arc::clone(&flag)),
                flag,
                future,
            });
        }
        self.running.retain_mut(|task| {
            if !task.flag.0.swap(false, Ordering::AcqRel) {
                return true;
            }
            let mut cx = Context::from_waker(&task.waker);
            task.future.as_mut().poll(&mut cx).is_pending()
        });
        self.any_woken()
    }

    /// Whether a task's waker fired since it was last polled (or a task is new).
    pub(crate) fn any_woken(&self) -> bool {
        !lock(&self.spawner.0).is_empty()
            || self
                .running
                .iter()
                .any(|t| t.flag.0.load(Ordering::Acquire))
    }

    #[cfg(test)]
    fn is_empty(&self) -> bool {
        self.running.is_empty() && lock(&self.spawner.0).is_empty()
    }
}

/// The driver's time as tasks see it, and the wake-ups they asked for.
#[derive(Debug)]
pub(crate) struct Timers {
    now: Mutex<Instant>,
    sleeping: Mutex<Vec<(Instant, Waker)>>,
}

impl Timers {
    pub(crate) fn new(now: Instant) -> Arc<Self> {
        Arc::new(Self {
            now: Mutex::new(now),
            sleeping: Mutex::new(Vec::new()),
        })
    }

    pub(crate) fn now(&self) -> Instant {
        *lock(&self.now)
    }

    /// Advances the time and wakes the tasks whose deadline passed.
    pub(crate) fn advance(&self, now: Instant) {
        *lock(&self.now) = now;
        lock(&self.sleeping).retain(|(at, waker)| {
            if *at <= now {
                waker.wake_by_ref();
                false
            } else {
                true
            }
        });
    }

    /// The earliest deadline a task sleeps until.
    pub(crate) fn next_wakeup(&self) -> Option<Instant> {
        lock(&self.sleeping).iter().map(|(at, _)| *at).min()
    }

    /// Completes once the driver's time reaches `at`.
    pub(crate) async fn sleep_until(&self, at: Instant) {
        std::future::poll_fn(|cx| {
            if self.now() >= at {
                return Poll::Ready(());
            }
            lock(&self.sleeping).push((at, cx.waker().clone()));
            Poll::Pending
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU8;
    use std::time::Duration;

    #[test]
    fn tasks_run_when_woken_and_sleep_on_the_injected_clock() {
        let start = Instant::ZERO;
        let timers = Timers::new(start);
        let done = Arc::new(AtomicU8::new(0));
        let mut tasks = Tasks::default();
        let (t, d) = (Arc::clone(&timers), Arc::clone(&done));
        tasks.spawner().spawn(async move {
            d.store(1, Ordering::Relaxed);
            t.sleep_until(start + Duration::from_millis(10)).await;
            d.store(2, Ordering::Relaxed);
        });
        assert!(!tasks.run_woken());
        assert_eq!(done.load(Ordering::Relaxed), 1);
        assert_eq!(
            timers.next_wakeup(),
            Some(start + Duration::from_millis(10))
        );
        timers.advance(start + Duration::from_millis(9));
        assert!(!tasks.run_woken());
        assert_eq!(done.load(Ordering::Relaxed), 1);
        timers.advance(start + Duration::from_millis(10));
        tasks.run_woken();
        assert_eq!(done.load(Ordering::Relaxed), 2);
        assert!(tasks.is_empty());
    }
}
