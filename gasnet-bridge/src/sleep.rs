//! How a waiting rank gives the CPU away without missing the event it waits for.
//!
//! Ranks are often more numerous than cores (16 ranks on 2 cores is a supported shape), so a
//! wait cannot spin forever. A wait goes through three phases, counted by [`Backoff`]:
//!
//! 1. **Spin** ([`SPIN_ROUNDS`] rounds, or [`OVERSUBSCRIBED_SPIN_ROUNDS`] when the job has
//!    more ranks than the machine has cores): poll, check the condition, `spin_loop` hint. This
//!    keeps a two-rank round trip well under a microsecond when each rank has a core, and
//!    gives the core away almost at once when the rank being waited for needs it.
//! 2. **Yield** ([`YIELD_ROUNDS`] rounds): poll, check, `thread::yield_now`. When other ranks
//!    share the core they run now; the rank that everybody waits for gets the CPU.
//! 3. **Sleep**: announce `SLEEPING` in the rank's [`Sleeper`], check once more, then park for
//!    at most [`PARK_TIMEOUT`].
//!
//! Events that end a wait (a message pushed to the rank's inbox, a barrier released, a rank
//! failing) call [`Sleeper::wake`] after publishing the event. The sleeper stores `SLEEPING`
//! then issues a `SeqCst` fence then re-checks; the waker publishes, issues a `SeqCst` fence,
//! then loads the state. By the fences' total order at least one side sees the other, so a
//! wake-up is never lost. Events that send no wake-up (a put into a flag the rank polls) are
//! seen within one park timeout at worst.
//!
//! **Hang report** (opt-in, `PGAS_HANG_REPORT=SECONDS`): a wait that has been in the sleep
//! phase that long without progress is *due* ([`Backoff::hang_due`]) once; the waiting call
//! (which knows what it waits for, an [`Awaiting`]) then prints one report and keeps waiting.
//! The clock is read only in the sleep phase, so the spin and yield phases cost nothing more.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering, fence};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::error::ConfigError;

/// Polling rounds with a spin hint before the first yield.
pub const SPIN_ROUNDS: u32 = 2_000;
/// Spin rounds when ranks outnumber cores: a spinning rank then holds the core that the rank
/// it waits for needs (LULESH on 8 ranks and 2 cores spent 40% more CPU with the full spin).
pub const OVERSUBSCRIBED_SPIN_ROUNDS: u32 = 20;
/// Rounds with `yield_now` before parking.
pub const YIELD_ROUNDS: u32 = 200;
/// Longest single park; bounds the delay of events that send no wake-up.
pub const PARK_TIMEOUT: Duration = Duration::from_micros(200);

/// The rank is running (or spinning, or yielding).
const AWAKE: u8 = 0;
/// The rank is parked or about to park; wakers must unpark it.
const SLEEPING: u8 = 1;

/// One rank's sleep state and the thread to unpark.
#[derive(Debug)]
pub struct Sleeper {
    state: AtomicU8,
    thread: OnceLock<Thread>,
    spin_rounds: u32,
}

impl Default for Sleeper {
    fn default() -> Self {
        Sleeper::with_spin(SPIN_ROUNDS)
    }
}

impl Sleeper {
    /// A sleeper whose waits spin `spin_rounds` rounds before yielding.
    pub fn with_spin(spin_rounds: u32) -> Self {
        Sleeper {
            state: AtomicU8::new(AWAKE),
            thread: OnceLock::new(),
            spin_rounds,
        }
    }

    /// The spin rounds for a job of `ranks` ranks on this machine.
    pub fn spin_rounds_for(ranks: usize) -> u32 {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        if ranks > cores {
            OVERSUBSCRIBED_SPIN_ROUNDS
        } else {
            SPIN_ROUNDS
        }
    }

    /// Records the calling thread as the one this sleeper parks (once, at rank start).
    pub fn register_current(&self) {
        let _ = self.thread.set(thread::current());
    }

    /// Called after publishing an event the rank may wait for.
    #[inline]
    pub fn wake(&self) {
        fence(Ordering::SeqCst);
        if self.state.load(Ordering::Relaxed) == SLEEPING {
            if let Some(t) = self.thread.get() {
                t.unpark();
            }
        }
    }

    /// Parks unless `idle()` turns false once the sleep is announced.
    fn sleep(&self, idle: impl FnOnce() -> bool) {
        self.state.store(SLEEPING, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if idle() {
            thread::park_timeout(PARK_TIMEOUT);
        }
        self.state.store(AWAKE, Ordering::Relaxed);
    }
}

/// What a waiting rank waits for, set by the waiting call for the hang report: a fixed
/// description and, when one rank is awaited, that rank. Copy, no allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Awaiting {
    /// What is awaited (`"a barrier"`, `"the reply of an rpc"`).
    pub what: &'static str,
    /// The rank it must come from, if one.
    pub rank: Option<usize>,
}

impl Awaiting {
    /// A wait for `what`, from no particular rank.
    pub const fn new(what: &'static str) -> Self {
        Awaiting { what, rank: None }
    }

    /// A wait for `what` from `rank`.
    pub const fn from_rank(what: &'static str, rank: usize) -> Self {
        Awaiting {
            what,
            rank: Some(rank),
        }
    }
}

impl Default for Awaiting {
    fn default() -> Self {
        Awaiting::new("a condition of the program (Endpoint::wait_until)")
    }
}

/// The environment variable that turns the hang report on.
pub const HANG_REPORT_VAR: &str = "PGAS_HANG_REPORT";

/// How long a wait may go without progress before it is reported: `PGAS_HANG_REPORT`
/// (seconds, a positive number), read once; `Ok(None)` when unset. A value that is not a
/// positive number of seconds is an error naming the variable ([`crate::launch()`] refuses
/// to start then).
pub fn hang_report_after() -> Result<Option<Duration>, ConfigError> {
    static AFTER: OnceLock<Result<Option<Duration>, ConfigError>> = OnceLock::new();
    AFTER
        .get_or_init(|| parse_hang_report(std::env::var(HANG_REPORT_VAR).ok().as_deref()))
        .clone()
}

/// Parses a `PGAS_HANG_REPORT` value.
pub fn parse_hang_report(value: Option<&str>) -> Result<Option<Duration>, ConfigError> {
    let Some(value) = value else { return Ok(None) };
    match value.trim().parse::<f64>() {
        Ok(s) if s > 0.0 && s < 1e9 => Ok(Some(Duration::from_secs_f64(s))),
        _ => Err(ConfigError::BadEnv {
            var: HANG_REPORT_VAR,
            value: value.into(),
            reason: "must be a positive number of seconds (a rank that waits that long \
                     without progress prints what it waits for)"
                .into(),
        }),
    }
}

/// Counts a wait's rounds and decides, per round, to spin, yield or sleep.
#[derive(Debug, Default)]
pub struct Backoff {
    rounds: u32,
    /// When this wait entered the sleep phase (only measured with a hang report on).
    asleep_since: Option<Instant>,
    /// The hang report is due and not yet taken.
    due: bool,
    /// The hang report of this wait was made.
    reported: bool,
}

impl Backoff {
    /// A fresh wait.
    pub fn new() -> Self {
        Backoff::default()
    }

    /// Starts over from spinning, after the rank found work to do.
    #[inline]
    pub fn reset(&mut self) {
        self.rounds = 0;
        self.asleep_since = None;
    }

    /// `Some(time waited)` once per wait, when the hang report is on and the wait has slept
    /// that long without progress; the caller then reports what it waits for.
    #[inline]
    pub fn hang_due(&mut self) -> Option<Duration> {
        if !self.due {
            return None;
        }
        self.due = false;
        self.asleep_since.map(|t| t.elapsed())
    }

    #[cold]
    fn watch_for_hang(&mut self) {
        if self.reported {
            return;
        }
        let Ok(Some(limit)) = hang_report_after() else {
            return;
        };
        let since = *self.asleep_since.get_or_insert_with(Instant::now);
        if since.elapsed() >= limit {
            self.reported = true;
            self.due = true;
        }
    }

    /// Ends one unsuccessful round; `idle` reports whether the rank still has nothing to do
    /// (no message queued, condition false) and is asked again just before parking.
    #[inline]
    pub fn snooze(&mut self, sleeper: &Sleeper, idle: impl FnOnce() -> bool) {
        let spin = sleeper.spin_rounds;
        if self.rounds < spin {
            std::hint::spin_loop();
        } else if self.rounds < spin + YIELD_ROUNDS {
            thread::yield_now();
        } else {
            sleeper.sleep(idle);
            self.watch_for_hang();
            return;
        }
        self.rounds += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicBool;
    use std::time::Instant;

    #[test]
    fn a_wake_reaches_a_parked_waiter_quickly() {
        // Many rounds of: waiter sleeps until flag; waker sets flag then wakes. With a lost
        // wake-up every round would cost a full park timeout; we allow far less than that.
        let sleeper = Arc::new(Sleeper::default());
        let rounds = 200;
        let start = Instant::now();
        thread::scope(|s| {
            let flags: Arc<Vec<AtomicBool>> =
                Arc::new((0..rounds).map(|_| AtomicBool::new(false)).collect());
            let (sl, fl) = (sleeper.clone(), flags.clone());
            s.spawn(move || {
                sl.register_current();
                for f in fl.iter() {
                    let mut b = Backoff {
                        rounds: SPIN_ROUNDS + YIELD_ROUNDS,
                        ..Backoff::default()
                    };
                    while !f.load(Ordering::Acquire) {
                        b.snooze(&sl, || !f.load(Ordering::Acquire));
                    }
                }
            });
            for f in flags.iter() {
                thread::sleep(Duration::from_micros(20));
                f.store(true, Ordering::Release);
                sleeper.wake();
            }
        });
        // Each round would take >= 200 us if wake-ups were lost and only timeouts ended parks;
        // with wake-ups it is ~20 us of sleep plus a context switch.
        let per_round = start.elapsed() / rounds as u32;
        assert!(per_round < PARK_TIMEOUT * 3, "per round {per_round:?}");
    }

    #[test]
    fn oversubscription_shortens_the_spin() {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(Sleeper::spin_rounds_for(cores), SPIN_ROUNDS);
        assert_eq!(
            Sleeper::spin_rounds_for(cores + 1),
            OVERSUBSCRIBED_SPIN_ROUNDS
        );
        let s = Sleeper::with_spin(3);
        s.register_current();
        let mut b = Backoff::new();
        for _ in 0..3 {
            b.snooze(&s, || panic!("spins first"));
        }
        for _ in 0..YIELD_ROUNDS {
            b.snooze(&s, || panic!("then yields"));
        }
        let mut asked = false;
        b.snooze(&s, || {
            asked = true;
            false
        });
        assert!(asked, "then sleeps after 3 spins and the yields");
    }

    #[test]
    fn hang_report_values() {
        assert_eq!(parse_hang_report(None), Ok(None));
        assert_eq!(
            parse_hang_report(Some(" 2.5")),
            Ok(Some(Duration::from_millis(2500)))
        );
        for bad in ["0", "-3", "x", "inf"] {
            let e = parse_hang_report(Some(bad)).unwrap_err().to_string();
            assert!(e.contains("PGAS_HANG_REPORT") && e.contains(bad), "{e}");
        }
    }

    #[test]
    fn backoff_moves_through_its_phases() {
        let s = Sleeper::default();
        s.register_current();
        let mut b = Backoff::new();
        for _ in 0..SPIN_ROUNDS + YIELD_ROUNDS {
            b.snooze(&s, || panic!("must not sleep before spinning and yielding"));
        }
        let mut asked = false;
        b.snooze(&s, || {
            asked = true;
            false
        });
        assert!(asked, "the last phase asks before parking");
    }
}
