//! How a waiting rank gives the CPU away without missing the event it waits for.
//!
//! Ranks are often more numerous than cores (16 ranks on 2 cores is a supported shape), so a
//! wait cannot spin forever. A wait goes through three phases, counted by [`Backoff`]:
//!
//! 1. **Spin** ([`SPIN_ROUNDS`] rounds, or [`OVERSUBSCRIBED_SPIN_ROUNDS`] when the job has
//!    more ranks, or on mpi the host more processes, than the machine has cores): poll, check
//!    the condition, `spin_loop` hint. This keeps a two-rank round trip well under a
//!    microsecond when each rank has a core, and gives the core away almost at once when the
//!    rank being waited for needs it.
//! 2. **Yield** ([`YIELD_ROUNDS`] rounds): poll, check, `thread::yield_now`. When other ranks
//!    share the core they run now; the rank that everybody waits for gets the CPU.
//! 3. **Sleep**: announce `SLEEPING` in the rank's [`Sleeper`], check once more, then park for
//!    at most [`PARK_TIMEOUT`]; in a wait for an event that wakes the rank
//!    ([`Awaiting::woken`]) on a conduit that wakes for all such events ([`Sleeper::waking`],
//!    smp), each further park of the same wait doubles that bound, up to [`LONGEST_PARK`].
//!
//! Events that end a wait (a message pushed to the rank's inbox, a barrier released, a rank
//! failing) call [`Sleeper::wake`] after publishing the event. The sleeper stores `SLEEPING`
//! then issues a `SeqCst` fence then re-checks; the waker publishes, issues a `SeqCst` fence,
//! then loads the state. By the fences' total order at least one side sees the other, so a
//! wake-up is never lost. Events that send no wake-up (a put into a flag the rank polls) are
//! seen within one park timeout at worst.
//!
//! **Growing parks.** On a machine with many more ranks than cores, ranks that wait long
//! (outside a dependency-limited re-execution, at a barrier for the slowest rank) would wake
//! at every park timeout and take the cores from the ranks they wait for (many ranks parked
//! in an agreement slow the few ranks of a limited re-execution markedly). A wait
//! whose event wakes the rank (a future, an rpc reply, a barrier) needs no timeout for its
//! own event, so its parks grow; the bound stays for what the rank serves meanwhile without
//! a wake (nothing on smp, where every message wakes) and is kept short enough that a missed
//! case costs little. A wait for a condition of the program ([`Endpoint::wait_until`], a flag
//! a put sets) keeps [`PARK_TIMEOUT`]: puts do not wake (a wake per put into a sleeping
//! target costs a system call, more than a small put itself).
//!
//! **Hang report** (opt-in, `PGAS_HANG_REPORT=SECONDS`): a wait that has been in the sleep
//! phase that long without progress is *due* ([`Backoff::hang_due`]) once; the waiting call
//! (which knows what it waits for, an [`Awaiting`]) then prints one report and keeps waiting.
//! The clock is read only in the sleep phase, so the spin and yield phases cost nothing more.
//!
//! [`Endpoint::wait_until`]: crate::Endpoint::wait_until

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering, fence};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::error::ConfigError;

/// Polling rounds with a spin hint before the first yield.
pub const SPIN_ROUNDS: u32 = 2_000;
/// Spin rounds when ranks outnumber cores: a spinning rank then holds the core that the rank
/// it waits for needs, so a full spin only burns the CPU the other rank is waiting for.
pub const OVERSUBSCRIBED_SPIN_ROUNDS: u32 = 20;
/// Rounds with `yield_now` before parking.
pub const YIELD_ROUNDS: u32 = 200;
/// Longest park of a wait for a condition; bounds the delay of events that send no wake-up.
pub const PARK_TIMEOUT: Duration = Duration::from_micros(200);
/// Longest park of a long wait for an event that wakes ([`Awaiting::woken`]) on a waking
/// conduit ([`Sleeper::waking`]): [`PARK_TIMEOUT`] doubled three times.
pub const LONGEST_PARK: Duration = Duration::from_micros(1600);

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
    /// The longest park: [`PARK_TIMEOUT`], or [`LONGEST_PARK`] for a waking conduit.
    longest_park: Duration,
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
            longest_park: PARK_TIMEOUT,
        }
    }

    /// This sleeper with parks that grow to [`LONGEST_PARK`] in a long wait for an event that
    /// wakes ([`Awaiting::woken`]): for a conduit on which every message to the rank wakes it.
    pub fn waking(mut self) -> Self {
        self.longest_park = LONGEST_PARK;
        self
    }

    /// The spin rounds for a job of `ranks` ranks on this machine.
    pub fn spin_rounds_for(ranks: usize) -> u32 {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        Self::spin_rounds(ranks, cores)
    }

    /// The spin rounds for one of `processes` processes of a host, whatever this process's
    /// own CPU affinity: a launcher that binds each process to one core (Open MPI does, with
    /// as many processes as cores) makes [`std::thread::available_parallelism`] say 1, and a
    /// process would then yield after a few rounds although its core is its own, and spend
    /// its round trips in `sched_yield`.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn spin_rounds_for_host(processes: usize) -> u32 {
        // SAFETY: sysconf with a valid name has no preconditions.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let cores = usize::try_from(online).ok().filter(|&c| c > 0);
        let cores = cores.unwrap_or_else(|| thread::available_parallelism().map_or(1, |n| n.get()));
        Self::spin_rounds(processes, cores)
    }

    fn spin_rounds(ranks: usize, cores: usize) -> u32 {
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

    /// Parks for at most `timeout` unless `idle()` turns false once the sleep is announced.
    fn sleep(&self, idle: impl FnOnce() -> bool, timeout: Duration) {
        self.state.store(SLEEPING, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if idle() {
            thread::park_timeout(timeout);
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
    /// The awaited event wakes the rank (a message handled by its progress, a barrier
    /// released), so the wait's parks may grow (see the module doc).
    pub woken: bool,
}

impl Awaiting {
    /// A wait for `what`, from no particular rank.
    pub const fn new(what: &'static str) -> Self {
        Awaiting {
            what,
            rank: None,
            woken: false,
        }
    }

    /// A wait for `what` from `rank`.
    pub const fn from_rank(what: &'static str, rank: usize) -> Self {
        Awaiting {
            what,
            rank: Some(rank),
            woken: false,
        }
    }

    /// This wait, for an event that wakes the rank: a message its progress handles, or a
    /// barrier's release; not a write into its memory.
    pub const fn woken(mut self) -> Self {
        self.woken = true;
        self
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
    /// Parks of this wait since it last found work.
    parks: u32,
    /// The wait's event wakes the rank: its parks may grow ([`Awaiting::woken`]).
    growing: bool,
    /// When this wait entered the sleep phase (only measured with a hang report on).
    asleep_since: Option<Instant>,
    /// The hang report is due and not yet taken.
    due: bool,
    /// The hang report of this wait was made.
    reported: bool,
}

impl Backoff {
    /// A fresh wait.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    pub fn new() -> Self {
        Backoff::default()
    }

    /// A fresh wait for `awaiting`: its parks grow if its event wakes the rank.
    pub fn for_wait(awaiting: &Awaiting) -> Self {
        Backoff {
            growing: awaiting.woken,
            ..Backoff::default()
        }
    }

    /// Starts over from spinning, after the rank found work to do.
    #[inline]
    pub fn reset(&mut self) {
        self.rounds = 0;
        self.parks = 0;
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

    /// How long the next park of this wait may last: [`PARK_TIMEOUT`], and in a growing wait
    /// doubled for each park since the wait last found work, up to the sleeper's longest.
    fn next_park(&self, sleeper: &Sleeper) -> Duration {
        if !self.growing {
            return PARK_TIMEOUT;
        }
        (PARK_TIMEOUT * (1u32 << self.parks.min(8))).min(sleeper.longest_park)
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
            sleeper.sleep(idle, self.next_park(sleeper));
            self.parks = self.parks.saturating_add(1);
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

    /// A park long enough that a lost wake-up cannot hide in the noise of a loaded machine.
    const NEVER: Duration = Duration::from_secs(20);

    #[test]
    fn a_wake_is_never_lost_even_when_it_races_the_announcement() {
        // The waiter announces SLEEPING, re-checks its flag and parks for NEVER; the waker
        // sets the flag and wakes with no pause, so some rounds publish before the
        // announcement, some between it and the re-check, some during the park. A lost
        // wake-up would cost one whole NEVER; 500 rounds must take a fraction of one.
        let rounds = 500;
        let sleeper = Arc::new(Sleeper::with_spin(0));
        let flags: Arc<Vec<AtomicBool>> =
            Arc::new((0..rounds).map(|_| AtomicBool::new(false)).collect());
        let answers: Arc<Vec<AtomicBool>> =
            Arc::new((0..rounds).map(|_| AtomicBool::new(false)).collect());
        let t = Instant::now();
        thread::scope(|s| {
            let (sl, fl, an) = (sleeper.clone(), flags.clone(), answers.clone());
            s.spawn(move || {
                sl.register_current();
                for (f, a) in fl.iter().zip(an.iter()) {
                    while !f.load(Ordering::Acquire) {
                        sl.sleep(|| !f.load(Ordering::Acquire), NEVER);
                    }
                    a.store(true, Ordering::Release);
                }
            });
            for (i, (f, a)) in flags.iter().zip(answers.iter()).enumerate() {
                if i % 2 == 0 {
                    // Every other round starts only once the waiter is parked (or about to).
                    while sleeper.state.load(Ordering::Relaxed) != SLEEPING {
                        thread::yield_now();
                    }
                }
                f.store(true, Ordering::Release);
                sleeper.wake();
                while !a.load(Ordering::Acquire) {
                    if t.elapsed() > NEVER / 2 {
                        // Release the waiter so the failure ends within one park.
                        flags.iter().for_each(|f| f.store(true, Ordering::Release));
                        panic!(
                            "round {i} of {rounds} not answered after {:?}: a wake-up was lost",
                            t.elapsed()
                        );
                    }
                    thread::yield_now();
                }
            }
        });
    }

    #[test]
    fn oversubscription_shortens_the_spin() {
        let cores = thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(Sleeper::spin_rounds_for(cores), SPIN_ROUNDS);
        assert_eq!(
            Sleeper::spin_rounds_for(cores + 1),
            OVERSUBSCRIBED_SPIN_ROUNDS
        );
        // The host's processors, not this process's affinity (at least as many).
        // SAFETY: as in `spin_rounds_for_host`.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) } as usize;
        assert!(online >= cores);
        assert_eq!(Sleeper::spin_rounds_for_host(online), SPIN_ROUNDS);
        assert_eq!(
            Sleeper::spin_rounds_for_host(online + 1),
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
    fn parks_grow_only_in_a_woken_wait_on_a_waking_sleeper_and_restart_after_work() {
        let fixed = Sleeper::with_spin(0);
        let waking = Sleeper::with_spin(0).waking();
        let woken = Awaiting::new("a test event").woken();
        let condition = Awaiting::new("a test condition");
        let us = Duration::from_micros;
        let parks = |b: &mut Backoff, s: &Sleeper| -> Vec<Duration> {
            (0..6)
                .map(|p| {
                    b.parks = p;
                    b.next_park(s)
                })
                .collect()
        };
        let grown = [us(200), us(400), us(800), us(1600), us(1600), us(1600)];
        assert_eq!(parks(&mut Backoff::for_wait(&woken), &waking), grown);
        assert_eq!(
            parks(&mut Backoff::for_wait(&woken), &fixed),
            [PARK_TIMEOUT; 6]
        );
        assert_eq!(
            parks(&mut Backoff::for_wait(&condition), &waking),
            [PARK_TIMEOUT; 6]
        );
        assert_eq!(parks(&mut Backoff::new(), &waking), [PARK_TIMEOUT; 6]);
        let mut b = Backoff::for_wait(&woken);
        b.parks = u32::MAX;
        assert_eq!(b.next_park(&waking), LONGEST_PARK, "no overflow");
        b.reset();
        assert_eq!(b.next_park(&waking), PARK_TIMEOUT);
        // Each park of a wait counts.
        waking.register_current();
        let mut b = Backoff {
            rounds: SPIN_ROUNDS + YIELD_ROUNDS,
            ..Backoff::for_wait(&woken)
        };
        for _ in 0..3 {
            b.snooze(&waking, || false);
        }
        assert_eq!(b.next_park(&waking), us(1600));
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
