//! The watchdog's report of the connections it refused, rate-limited.
//!
//! Any local user can connect to a listening watchdog, so one line per refusal would let a
//! flood of connects flood the job's stderr. The first refusal of each kind (garbage, wrong
//! secret, ...) gets its own line, naming where it came from; later ones are counted, and the
//! count is said in one summary line at most every [`SUMMARY_EVERY`], and once more when the
//! watchdog stops. So a job prints at most one line per kind plus one line per
//! [`SUMMARY_EVERY`], however many connections it refuses.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::handshake::Refusal;

/// How often at most a summary of the refusals not reported one by one is printed.
const SUMMARY_EVERY: Duration = Duration::from_secs(10);

/// The kinds of refusal, in the order a summary lists them.
const KINDS: [&str; 6] = [
    "garbage",
    "wrong secret",
    "unexpected rank",
    "closed before a whole greeting",
    "no greeting in time",
    "dropped: too many waiting to greet",
];

/// `why`'s index in [`KINDS`].
fn kind(why: &Refusal) -> usize {
    match why {
        Refusal::Garbage => 0,
        Refusal::WrongSecret => 1,
        Refusal::Unexpected(_) => 2,
        Refusal::Closed(_) => 3,
        Refusal::Silent => 4,
        Refusal::Crowded => 5,
    }
}

/// One rank's refusal report.
#[derive(Debug)]
pub(super) struct RefusalLog {
    me: usize,
    /// Kinds whose first refusal has had its line.
    told: [bool; KINDS.len()],
    /// Refusals of each kind not reported yet.
    unsaid: [u64; KINDS.len()],
    /// When the first of the unreported refusals happened.
    since: Option<Instant>,
}

impl RefusalLog {
    pub(super) fn new(me: usize) -> Self {
        RefusalLog {
            me,
            told: [false; KINDS.len()],
            unsaid: [0; KINDS.len()],
            since: None,
        }
    }

    /// Records that a connection from `from` was refused at `now`, printing its line if it
    /// is the first of its kind.
    pub(super) fn refused(&mut self, from: SocketAddr, why: &Refusal, now: Instant) {
        if let Some(line) = self.note(from, why, now) {
            crate::stderr_line::stderr_line(format_args!("{line}"));
        }
    }

    /// Prints the summary if one is due at `now`.
    pub(super) fn tick(&mut self, now: Instant) {
        if let Some(line) = self.due(now) {
            crate::stderr_line::stderr_line(format_args!("{line}"));
        }
    }

    /// Prints the summary of whatever was not reported yet (the watchdog stops).
    pub(super) fn finish(&mut self) {
        if let Some(line) = self.summary(Instant::now()) {
            crate::stderr_line::stderr_line(format_args!("{line}"));
        }
    }

    /// The line for a refusal, if it is the first of its kind; otherwise it is counted.
    fn note(&mut self, from: SocketAddr, why: &Refusal, now: Instant) -> Option<String> {
        let k = kind(why);
        if !std::mem::replace(&mut self.told[k], true) {
            return Some(format!(
                "gasnet-bridge (mpi conduit): rank {}: watchdog refused a connection from \
                 {from}: {why}; the job goes on",
                self.me
            ));
        }
        self.unsaid[k] += 1;
        self.since.get_or_insert(now);
        None
    }

    /// The summary, if [`SUMMARY_EVERY`] has passed since the first refusal it counts.
    fn due(&mut self, now: Instant) -> Option<String> {
        let since = self.since?;
        if now.duration_since(since) < SUMMARY_EVERY {
            return None;
        }
        self.summary(now)
    }

    /// The summary of the refusals not reported yet, if any, which are then reported.
    fn summary(&mut self, now: Instant) -> Option<String> {
        let since = self.since.take()?;
        let total: u64 = self.unsaid.iter().sum();
        let kinds: Vec<String> = KINDS
            .iter()
            .zip(&self.unsaid)
            .filter(|(_, n)| **n > 0)
            .map(|(what, n)| format!("{n} {what}"))
            .collect();
        self.unsaid = [0; KINDS.len()];
        Some(format!(
            "gasnet-bridge (mpi conduit): rank {}: watchdog refused {total} more connection{} \
             in the last {:.1} s ({}); the job goes on",
            self.me,
            if total == 1 { "" } else { "s" },
            now.duration_since(since).as_secs_f64(),
            kinds.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_gets_one_line_per_kind_then_a_summary_per_interval() {
        let mut log = RefusalLog::new(3);
        let from: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let t0 = Instant::now();
        let mut lines = Vec::new();
        // 10 000 refusals over 25 s, of two kinds, the log ticked after each.
        for i in 0..10_000u32 {
            let now = t0 + Duration::from_micros(2500 * u64::from(i));
            let why = if i % 2 == 0 {
                Refusal::Closed(0)
            } else {
                Refusal::Silent
            };
            lines.extend(log.note(from, &why, now));
            lines.extend(log.due(now));
        }
        lines.extend(log.summary(t0 + Duration::from_secs(25)));
        assert_eq!(lines.len(), 2 + 2 + 1, "{lines:#?}");
        assert!(lines[0].contains("rank 3: watchdog refused a connection from 127.0.0.1:4000"));
        assert!(lines[0].contains("closed after 0 bytes"));
        assert!(lines[1].contains("no greeting in time"));
        let counted: u64 = lines[2..]
            .iter()
            .map(|l| {
                let n = l
                    .split("refused ")
                    .nth(1)
                    .unwrap()
                    .split(' ')
                    .next()
                    .unwrap();
                n.parse::<u64>().unwrap()
            })
            .sum();
        assert_eq!(
            counted,
            10_000 - 2,
            "every refusal is counted once: {lines:#?}"
        );
        assert!(lines[2].contains("closed before a whole greeting"));
        assert!(lines[2].contains("no greeting in time"));
        // Nothing left, nothing more to say.
        assert_eq!(log.summary(t0 + Duration::from_secs(30)), None);
        assert_eq!(log.due(t0 + Duration::from_secs(60)), None);
    }

    #[test]
    fn a_quiet_log_says_nothing_more() {
        let mut log = RefusalLog::new(0);
        let from: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let now = Instant::now();
        assert!(log.note(from, &Refusal::Garbage, now).is_some());
        assert!(log.note(from, &Refusal::WrongSecret, now).is_some());
        assert_eq!(log.due(now + SUMMARY_EVERY * 2), None);
        assert_eq!(log.summary(now), None);
        assert_eq!(log.note(from, &Refusal::Garbage, now), None);
        let last = log.summary(now + Duration::from_secs(1)).unwrap();
        assert!(last.contains("refused 1 more connection in the last 1.0 s (1 garbage)"));
    }
}
