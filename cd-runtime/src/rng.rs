//! `cd::rng()`: random numbers that repeat when a CD re-executes (seed 003: non-determinism
//! must be reproducible in re-execution).

use rand::RngCore;

use crate::runtime;

/// A handle on the innermost CD's generator; each CD execution starts from the same seed
/// (derived from the configured seed, the rank and the CD's place in the tree).
#[derive(Debug, Clone, Copy, Default)]
pub struct CdRng;

/// The innermost CD's repeatable generator.
pub fn rng() -> CdRng {
    CdRng
}

impl RngCore for CdRng {
    fn next_u32(&mut self) -> u32 {
        runtime::with(|rt| rt.top().state.borrow_mut().rng.next_u32())
    }
    fn next_u64(&mut self) -> u64 {
        runtime::with(|rt| rt.top().state.borrow_mut().rng.next_u64())
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        runtime::with(|rt| rt.top().state.borrow_mut().rng.fill_bytes(dst))
    }
}
