//! The job-wide record of the first rank that failed, which every wait checks.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The panic payload with which surviving ranks unwind once another rank has failed; launch
/// reports the original failure, not these.
#[derive(Debug)]
pub struct PeerFailure;

/// The panic payload with which a rank ends its job deliberately, with an error already
/// worded for the user (the program prints it, once): launch returns it as the rank's panic
/// message (`LaunchError::RankPanicked`), but no conduit prints anything about it. Under mpirun
/// the other processes learn that the job was stopped and unwind quietly, where a genuine panic
/// or a lost rank is reported on every process. Raise it with `std::panic::resume_unwind`, so
/// that no panic hook runs either.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stopped(pub String);

/// First failure of a job: which rank, and its panic message.
#[derive(Debug, Default)]
pub struct Failure {
    failed: AtomicBool,
    first: Mutex<Option<(usize, String)>>,
}

impl Failure {
    /// Records a failure of `rank`; only the first one is kept.
    pub fn record(&self, rank: usize, message: String) {
        let mut first = self.first.lock().unwrap_or_else(|e| e.into_inner());
        if first.is_none() {
            *first = Some((rank, message));
        }
        self.failed.store(true, Ordering::Release);
    }

    /// True once any rank has failed.
    #[inline]
    pub fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// The first failure, if any.
    pub fn first(&self) -> Option<(usize, String)> {
        self.first.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Unwinds the calling rank if another rank has failed.
    #[inline]
    pub fn check(&self) {
        if self.is_failed() {
            std::panic::resume_unwind(Box::new(PeerFailure));
        }
    }
}

/// The text of a panic payload (`&str` or `String`; anything else is named as such).
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(Stopped(s)) = payload.downcast_ref::<Stopped>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_first_failure() {
        let f = Failure::default();
        assert!(!f.is_failed());
        f.record(3, "boom".into());
        f.record(1, "later".into());
        assert!(f.is_failed());
        assert_eq!(f.first(), Some((3, "boom".to_string())));
    }

    #[test]
    fn check_unwinds_with_peer_failure() {
        let f = Failure::default();
        f.check();
        f.record(0, "x".into());
        let err = std::panic::catch_unwind(|| f.check()).unwrap_err();
        assert!(err.is::<PeerFailure>());
        assert_eq!(
            panic_message(&*Box::new("s") as &(dyn std::any::Any + Send)),
            "s"
        );
        let stopped: Box<dyn std::any::Any + Send> = Box::new(Stopped("why".into()));
        assert_eq!(panic_message(&*stopped), "why");
    }
}
