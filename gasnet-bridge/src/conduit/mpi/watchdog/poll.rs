//! The watchdog's one blocking call: a `poll(2)` over its descriptors with a short timeout,
//! so that every round also looks at its deadlines.

/// How long one round of the watchdog waits for a descriptor before it looks at its
/// deadlines again.
pub(super) const POLL_MS: libc::c_int = 20;

/// Waits up to [`POLL_MS`] for one of `fds` to be ready (their `revents` say which); an
/// interrupted wait reports nothing ready.
pub(super) fn poll(fds: &mut [libc::pollfd]) {
    // SAFETY: `fds` is a valid, exclusively borrowed array of pollfd of the given length; the
    // descriptors are open (their owners outlive the call).
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, POLL_MS) };
    if n < 0 {
        fds.iter_mut().for_each(|f| f.revents = 0);
    }
}
