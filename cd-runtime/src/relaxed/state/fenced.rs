//! The ranks whose recovery fence this rank must check before writing into them (the
//! handshake is told in `fence.rs`).

use std::cell::RefCell;

/// The targets that told this rank they are fenced (it checks their word before writing).
#[derive(Default)]
pub(crate) struct Fenced {
    by: RefCell<Vec<usize>>,
}

impl Fenced {
    /// `target` told this rank it is fenced.
    pub(crate) fn note(&self, target: usize) {
        let mut by = self.by.borrow_mut();
        if !by.contains(&target) {
            by.push(target);
        }
    }

    /// True if `target` told this rank it is fenced.
    pub(crate) fn contains(&self, target: usize) -> bool {
        self.by.borrow().contains(&target)
    }

    /// This rank saw `target`'s fence down.
    pub(crate) fn forget(&self, target: usize) {
        self.by.borrow_mut().retain(|&r| r != target);
    }
}
