//! Access classes: regions of this rank's segment a relaxed CD declares *private* (no other
//! CD touches them until the relaxed group completes) or *privatized* (private while the CD
//! runs), and the check that no other CD of the group accesses them meanwhile.
//!
//! Everything else is *potentially shared* (the default) and logged. The check is on in
//! debug builds and with `check_classes = true`: each remote access of a checking relaxed CD
//! asks the target (an internal rpc, served from its progress) whether the range touches a
//! region one of its CDs declared; a hit is a [`ClassificationError`] naming both CDs.

use bytemuck::Pod;
use pgas::GlobalPtr;
use pgas::runtime_hooks::internal;

use crate::cd::Cd;
use crate::error::ClassificationError;
use crate::frame::CdKind;
use crate::relaxed::interceptor::logging_frame;
use crate::runtime::CdRuntime;

pub use super::frame_state::Region;

/// The region `len` elements at `ptr`, or `None` in a strict CD (a CD the program calls
/// relaxed but the configuration makes strict: it logs nothing and re-executes with all its
/// ranks, so access classes do not matter to it).
fn own_region<T: 'static>(
    cd: &Cd,
    what: &str,
    name: &str,
    ptr: GlobalPtr<T>,
    len: usize,
) -> Option<Region> {
    assert!(
        !ptr.is_null() && ptr.rank() == pgas::rank_me(),
        "CD {:?}: {what} region `{name}` must be in this rank's segment",
        cd.frame.name
    );
    if cd.frame.kind != CdKind::Relaxed {
        return None;
    }
    Some(Region {
        cd: cd.frame.name.clone(),
        name: name.to_string(),
        offset: ptr.offset(),
        len: len * std::mem::size_of::<T>(),
    })
}

impl Cd {
    /// Declares `len` elements at `ptr` (this rank's memory) *private*: no other CD touches
    /// them until the relaxed group completes; not logged, simply re-executed. No effect in a
    /// strict CD (e.g. one the configuration makes strict with `kind = "strict"`).
    pub fn private<T: 'static>(&self, name: &str, ptr: GlobalPtr<T>, len: usize) {
        let Some(r) = own_region(self, "private", name, ptr, len) else {
            return;
        };
        let mut rx = self.frame.rx.borrow_mut();
        if !rx.private.contains(&r) {
            rx.private.push(r);
        }
    }

    /// Declares `len` elements at `ptr` (this rank's memory) *privatized*: private while this
    /// CD runs, usable by others after; logged once, at completion, as its final bytes.
    /// Returns the pointer the body must use for the region: `ptr`, or, when an enclosing
    /// relaxed CD replays this CD after it completed, a shadow copy (others may be reading
    /// the region by then; `relaxed/shadow.rs` tells the protocol). No effect in a strict CD
    /// (e.g. one the configuration makes strict with `kind = "strict"`): returns `ptr`.
    #[must_use = "the body must compute the region through the returned pointer (a shadow copy in a re-execution)"]
    pub fn privatized<T: Pod>(&self, name: &str, ptr: GlobalPtr<T>, len: usize) -> GlobalPtr<T> {
        let Some(r) = own_region(self, "privatized", name, ptr, len) else {
            return ptr;
        };
        {
            let mut rx = self.frame.rx.borrow_mut();
            if !rx.privatized.contains(&r) {
                rx.privatized.push(r.clone());
            }
        }
        let rt = crate::runtime::handle();
        crate::relaxed::shadow::open(&rt, &self.frame, &r, ptr, len)
    }
}

/// Checks a remote access of the running relaxed CD, if its settings ask for it.
pub(crate) fn check_access(rt: &CdRuntime, target: usize, offset: usize, len: usize) {
    let Some(frame) = logging_frame(rt) else {
        return;
    };
    if !frame.settings.check_classes {
        return;
    }
    let hit = internal(|| {
        pgas::rpc(
            target,
            rt.relaxed.rpcs.check,
            (rt.rank, frame.name.clone(), offset, len),
        )
        .wait()
    });
    if let Some((owner_cd, region)) = hit {
        let (class, region) = region
            .split_once(':')
            .map(|(c, r)| (c.to_string(), r.to_string()))
            .unwrap_or_default();
        frame
            .rx
            .borrow_mut()
            .class_errors
            .push(ClassificationError {
                cd: frame.name.clone(),
                rank: rt.rank,
                owner_cd,
                owner: target,
                region,
                class,
                offset,
                len,
            });
    }
}

/// Answers a check from `asker`: the region of this rank the access touches, as
/// (declaring CD, "class:region").
pub(crate) fn serve_check(
    rt: &CdRuntime,
    asker: usize,
    _asker_cd: &str,
    offset: usize,
    len: usize,
) -> Option<(String, String)> {
    if asker == rt.rank {
        return None;
    }
    for f in rt.frames.borrow().iter().rev() {
        let Ok(rx) = f.rx.try_borrow() else { continue };
        if let Some(r) = rx.private.iter().find(|r| r.overlaps(offset, len)) {
            return Some((r.cd.clone(), format!("private:{}", r.name)));
        }
        if f.kind == CdKind::Relaxed {
            // A region re-executed into shadow memory is not private any more: its CD had
            // completed, and others may read it (the re-execution never writes it).
            let shadowed = |r: &Region| rx.shadows.iter().any(|s| s.region == r.offset);
            if let Some(r) = rx
                .privatized
                .iter()
                .find(|r| r.overlaps(offset, len) && !shadowed(r))
            {
                return Some((r.cd.clone(), format!("privatized:{}", r.name)));
            }
        }
    }
    None
}
