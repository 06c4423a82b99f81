//! A distributed lock: one word in a home rank's segment, taken by compare-exchange from any
//! rank (the holder's rank + 1 in it, 0 when free).
//!
//! Acquire and release are synchronizations of the program (the relaxed-CD seed names locks
//! first): the acquiring rank steps its epoch counter (EC) once it holds the lock, the
//! releasing rank before it lets go, so the writes another holder makes into this rank land
//! in another epoch than this rank's accesses under the lock, and a replay applies them in
//! the first run's order. Each attempt is a remote atomic (a relaxed CD logs it, and a replay
//! serves its logged result, so the replayed rank fails and succeeds as it did).
//!
//! Not fair and not reentrant: a waiting rank retries with a growing back-off (running
//! progress between attempts), so ranks that outnumber cores leave the holder its core.

use std::time::Duration;

use crate::alloc::new_;
use crate::atomic_domain::AtomicDomain;
use crate::collectives::broadcast;
use crate::error::PgasError;
use crate::global_ptr::GlobalPtr;
use crate::hook::SyncEvent;
use crate::runtime::{self, progress};

/// Longest pause between two attempts to take a busy lock.
const MAX_BACKOFF: Duration = Duration::from_micros(200);

/// A lock any rank can take, living in one word of its home rank's segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DistLock {
    word: GlobalPtr<u64>,
}

impl DistLock {
    /// A new free lock on rank `home`, collective over the world: `home` allocates its word,
    /// every rank gets the same lock.
    ///
    /// # Errors
    /// When `home` cannot allocate the word.
    pub fn new(home: usize) -> Result<DistLock, PgasError> {
        let word = if runtime::rank_me() == home {
            Some(new_(0u64)?)
        } else {
            None
        };
        let word = broadcast(word, home)
            .wait()
            .ok_or_else(|| PgasError::Team(format!("lock home rank {home} allocated no word")))?;
        Ok(DistLock { word })
    }

    /// A lock in `word`, a word the program allocated, holding 0, and touches only through
    /// this lock (every rank that uses the lock must use the same word).
    pub fn from_word(word: GlobalPtr<u64>) -> DistLock {
        DistLock { word }
    }

    /// The lock's word (to free it with `delete_` once no rank uses the lock).
    pub fn word(&self) -> GlobalPtr<u64> {
        self.word
    }

    fn tag() -> u64 {
        runtime::rank_me() as u64 + 1
    }

    /// Takes the lock, waiting while another rank holds it; then steps this rank's EC
    /// ([`SyncEvent::LockAcquire`]).
    ///
    /// # Errors
    /// [`PgasError::LockHeldByCaller`] if this rank holds it already.
    pub fn acquire(&self) -> Result<(), PgasError> {
        let me = Self::tag();
        let ad = AtomicDomain::<u64>::new();
        let mut pause = Duration::from_micros(1);
        loop {
            let seen = ad.compare_exchange(self.word, 0, me).wait();
            if seen == 0 {
                break;
            }
            if seen == me {
                return Err(PgasError::LockHeldByCaller {
                    rank: runtime::rank_me(),
                    home: self.word.rank(),
                    offset: self.word.offset(),
                });
            }
            progress();
            std::thread::sleep(pause);
            pause = (pause * 2).min(MAX_BACKOFF);
        }
        runtime::with(|rt| rt.sync(SyncEvent::LockAcquire));
        Ok(())
    }

    /// Lets the lock go: this rank's operations in flight complete and its EC steps
    /// ([`SyncEvent::LockRelease`]), then the word is freed.
    ///
    /// # Errors
    /// [`PgasError::LockNotHeld`] if this rank does not hold it (the word is left alone).
    pub fn release(&self) -> Result<(), PgasError> {
        let me = Self::tag();
        runtime::with(|rt| rt.sync(SyncEvent::LockRelease));
        let seen = AtomicDomain::<u64>::new()
            .compare_exchange(self.word, me, 0)
            .wait();
        if seen == me {
            return Ok(());
        }
        Err(PgasError::LockNotHeld {
            rank: runtime::rank_me(),
            home: self.word.rank(),
            offset: self.word.offset(),
            holder: match seen {
                0 => "is free".into(),
                r => format!("rank {} holds", r - 1),
            },
        })
    }
}
