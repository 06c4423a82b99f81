//! An asymmetric memory barrier: a cheap side that only stops the compiler, and an expensive
//! side (Linux's `membarrier(2)`) that makes every thread that could run the cheap side
//! execute a full fence before it returns.
//!
//! Used by the write-counting switch ([`crate::WriteCounting::Switched`]): writers, on every
//! put, store the bytes and then load the target's switch (the cheap side: a compiler fence
//! between the two), and the target, on the rare switch-on, stores the switch and then runs
//! the expensive side before it reads its IWC. The store-buffering outcome this rules out is
//! "the writer read the switch off, and the target read the IWC before the writer's bytes
//! were visible": the kernel's barrier drains every store buffer of the process (or of every
//! registered process of the host), so a writer that read off has its bytes in memory by the
//! time the target goes on, and a writer that reads the switch afterwards sees it on.
//!
//! Scopes: [`Scope::Process`] (`MEMBARRIER_CMD_PRIVATE_EXPEDITED`) covers the threads of this
//! process, enough on smp; [`Scope::Host`] (`MEMBARRIER_CMD_GLOBAL_EXPEDITED`) covers every
//! process that registered for it, which the mpi conduit's processes sharing a host's memory
//! do at start-up. Both must be registered before use ([`register`]); a kernel without them
//! makes [`register`] fail, and the job then counts every write instead of switching.

/// Which threads the expensive side reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Only this thread can write into the memory concerned: no barrier is needed.
    Thread,
    /// Every thread of this process.
    Process,
    /// Every thread of every process that registered for [`Scope::Host`].
    Host,
}

#[cfg(target_os = "linux")]
mod sys {
    // membarrier(2) commands (linux/membarrier.h).
    pub const QUERY: libc::c_int = 0;
    pub const GLOBAL_EXPEDITED: libc::c_int = 1 << 1;
    pub const REGISTER_GLOBAL_EXPEDITED: libc::c_int = 1 << 2;
    pub const PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
    pub const REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

    /// `membarrier(cmd, 0, 0)`; the error on failure.
    pub fn membarrier(cmd: libc::c_int) -> Result<libc::c_long, std::io::Error> {
        // SAFETY: membarrier takes two ints (flags 0, cpu_id unused) and touches no memory of
        // ours; any command value is checked by the kernel.
        let r = unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0, 0) };
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(r)
        }
    }
}

/// Registers this process for the expensive side of `scope`; an error says why it cannot be
/// used (the job then counts every write).
pub fn register(scope: Scope) -> Result<(), String> {
    #[cfg(target_os = "linux")]
    {
        let (cmd, register) = match scope {
            Scope::Thread => return Ok(()),
            Scope::Process => (sys::PRIVATE_EXPEDITED, sys::REGISTER_PRIVATE_EXPEDITED),
            Scope::Host => (sys::GLOBAL_EXPEDITED, sys::REGISTER_GLOBAL_EXPEDITED),
        };
        let supported = sys::membarrier(sys::QUERY).map_err(|e| format!("membarrier: {e}"))?;
        if supported & libc::c_long::from(cmd) == 0 {
            return Err(format!(
                "membarrier: command {cmd} not supported by this kernel"
            ));
        }
        sys::membarrier(register)
            .map(|_| ())
            .map_err(|e| format!("membarrier register: {e}"))
    }
    #[cfg(not(target_os = "linux"))]
    {
        match scope {
            Scope::Thread => Ok(()),
            _ => Err("membarrier(2) exists only on Linux".into()),
        }
    }
}

/// The cheap side: orders this thread's earlier memory accesses before its later ones as far
/// as the compiler is concerned; the hardware is ordered by [`heavy`] on the other side.
#[inline(always)]
pub fn light() {
    std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
}

/// The expensive side: returns once every thread of `scope` has executed a full fence (or is
/// not running, which implies one). Requires a successful [`register`] of `scope`.
pub fn heavy(scope: Scope) {
    std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
    #[cfg(target_os = "linux")]
    {
        let cmd = match scope {
            Scope::Thread => return,
            Scope::Process => sys::PRIVATE_EXPEDITED,
            Scope::Host => sys::GLOBAL_EXPEDITED,
        };
        if let Err(e) = sys::membarrier(cmd) {
            // Registered at start-up, so this cannot fail; a write could be missed if it did.
            panic!("membarrier({cmd}) failed after registration: {e}");
        }
    }
    #[cfg(not(target_os = "linux"))]
    assert!(
        scope == Scope::Thread,
        "membarrier(2) exists only on Linux (register refuses it)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_scope_registers_and_runs_here() {
        register(Scope::Process).expect("the machine's kernel has membarrier");
        heavy(Scope::Process);
        register(Scope::Thread).unwrap();
        heavy(Scope::Thread);
    }
}
