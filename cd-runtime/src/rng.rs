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
        let mut b = [0u8; 4];
        draw(&mut b, |d| {
            d.copy_from_slice(&top_rng(|r| r.next_u32()).to_ne_bytes())
        });
        u32::from_ne_bytes(b)
    }
    fn next_u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        draw(&mut b, |d| {
            d.copy_from_slice(&top_rng(|r| r.next_u64()).to_ne_bytes())
        });
        u64::from_ne_bytes(b)
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        draw(dst, |d| top_rng(|r| r.fill_bytes(d)))
    }
}

fn top_rng<R>(f: impl FnOnce(&mut rand::rngs::SmallRng) -> R) -> R {
    runtime::with(|rt| f(&mut rt.top().state.borrow_mut().rng))
}

/// Inside a logging relaxed CD a draw is logged, and served from the log in a replay
/// (docs/relaxed-cds.md: non-determinism is logged).
fn draw(dst: &mut [u8], generate: impl FnOnce(&mut [u8])) {
    let rt = runtime::handle();
    crate::relaxed::rng_draw(&rt, dst, generate);
}
