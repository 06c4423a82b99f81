//! How long the watchdog leaves its listener alone after `accept` failed.
//!
//! A failed `accept` (out of file descriptors, say) leaves the connection in the queue, so the
//! listener stays readable: polling it again at once would spin a core for as long as the
//! cause lasts. Each failure in a row doubles the pause, from [`FIRST_PAUSE`] up to
//! [`MAX_PAUSE`]; an empty queue (`accept` would block) means the listener is healthy again.

use std::time::{Duration, Instant};

/// The pause after a first failure.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
/// The longest pause: how late a connection may be taken once the cause is gone.
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// The pause state of one listener.
#[derive(Debug)]
pub(super) struct Backoff {
    /// The pause the next failure starts.
    next: Duration,
    /// Until when the listener is left alone.
    until: Option<Instant>,
}

impl Backoff {
    pub(super) fn new() -> Self {
        Backoff {
            next: FIRST_PAUSE,
            until: None,
        }
    }

    /// `accept` failed at `now`: pause, twice as long as the previous pause in a row.
    pub(super) fn failed(&mut self, now: Instant) {
        self.until = Some(now + self.next);
        self.next = (self.next * 2).min(MAX_PAUSE);
    }

    /// The queue was found empty: the next failure starts from the first pause again.
    pub(super) fn drained(&mut self) {
        self.next = FIRST_PAUSE;
        self.until = None;
    }

    /// Whether the listener may be polled and accepted from at `now`.
    pub(super) fn ready(&self, now: Instant) -> bool {
        self.until.is_none_or(|u| now >= u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_double_up_to_the_cap_and_reset_when_drained() {
        let mut b = Backoff::new();
        let t0 = Instant::now();
        assert!(b.ready(t0));
        let mut now = t0;
        let mut pauses = Vec::new();
        for _ in 0..8 {
            b.failed(now);
            let mut until = now;
            while !b.ready(until) {
                until += Duration::from_millis(1);
            }
            pauses.push((until - now).as_millis());
            now = until;
        }
        assert_eq!(pauses, [5, 10, 20, 40, 80, 100, 100, 100]);
        b.drained();
        assert!(b.ready(now));
        b.failed(now);
        assert!(!b.ready(now + Duration::from_millis(4)));
        assert!(b.ready(now + FIRST_PAUSE));
    }
}
