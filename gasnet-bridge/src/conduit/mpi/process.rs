//! Process-wide MPI state: initialization on the first mpi job, `MPI_Finalize` at exit, and the
//! SIGTERM hook that lets a rank name the lost rank before the launcher's SIGKILL arrives.

use std::ffi::{CStr, c_char, c_int};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use ::mpi::ffi;

use crate::error::{BridgeError, LaunchError};

use super::calls::check;

/// What `MPI_Init_thread` gave this process.
#[derive(Debug)]
pub(crate) struct Process {
    /// The thread level MPI provides (at least `MPI_THREAD_SERIALIZED`).
    pub(crate) thread_level: c_int,
}

static PROCESS: OnceLock<Result<Process, String>> = OnceLock::new();
/// Set once a job failed: MPI may be unusable, so `MPI_Finalize` (collective) is skipped.
pub(crate) static POISONED: AtomicBool = AtomicBool::new(false);
/// Set while a job runs in this process (its watchdog reads the SIGTERM pipe).
pub(crate) static JOB_ACTIVE: AtomicBool = AtomicBool::new(false);
/// Write end of the pipe on which the SIGTERM handler tells the watchdog; -1 when none.
pub(crate) static SIGTERM_PIPE: AtomicI32 = AtomicI32::new(-1);

/// Initializes MPI once per process (`MPI_THREAD_SERIALIZED`, or `MPI_THREAD_MULTIPLE` with
/// `PGAS_MPI_THREAD=multiple`, for measuring its cost) and returns its state.
pub(crate) fn process() -> Result<&'static Process, LaunchError> {
    PROCESS
        .get_or_init(init)
        .as_ref()
        .map_err(|e| LaunchError::Conduit(e.clone()))
}

/// This process's rank in `MPI_COMM_WORLD` and the world's size (initializing MPI if needed).
pub(crate) fn world_shape() -> Result<(usize, usize), LaunchError> {
    process()?;
    let conduit = |e: BridgeError| LaunchError::Conduit(e.to_string());
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    let comm = unsafe { ffi::RSMPI_COMM_WORLD };
    let (mut size, mut rank): (c_int, c_int) = (0, 0);
    // SAFETY: MPI is initialized (above); the call writes one int.
    check(
        unsafe { ffi::MPI_Comm_size(comm, &mut size) },
        "MPI_Comm_size",
    )
    .map_err(conduit)?;
    // SAFETY: as above.
    check(
        unsafe { ffi::MPI_Comm_rank(comm, &mut rank) },
        "MPI_Comm_rank",
    )
    .map_err(conduit)?;
    Ok((rank as usize, size as usize))
}

fn init() -> Result<Process, String> {
    let multiple = std::env::var("PGAS_MPI_THREAD").is_ok_and(|v| v.trim() == "multiple");
    // SAFETY: reading link-time constants exported by rsmpi's C shim.
    let (want, serialized) = unsafe {
        (
            if multiple {
                ffi::RSMPI_THREAD_MULTIPLE
            } else {
                ffi::RSMPI_THREAD_SERIALIZED
            },
            ffi::RSMPI_THREAD_SERIALIZED,
        )
    };
    let mut initialized: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time and writes one int.
    let rc = unsafe { ffi::MPI_Initialized(&mut initialized) };
    check(rc, "MPI_Initialized").map_err(|e| e.to_string())?;
    let mut provided: c_int = 0;
    if initialized != 0 {
        // Someone else (the application) initialized MPI; accept it if the level suffices.
        // SAFETY: MPI is initialized; the call writes one int.
        let rc = unsafe { ffi::MPI_Query_thread(&mut provided) };
        check(rc, "MPI_Query_thread").map_err(|e| e.to_string())?;
    } else {
        // SAFETY: null argc/argv is allowed by MPI-2 and later; `provided` is written.
        let rc = unsafe {
            ffi::MPI_Init_thread(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                want,
                &mut provided,
            )
        };
        if rc != ffi::MPI_SUCCESS as c_int {
            return Err(format!("MPI_Init_thread failed with code {rc}"));
        }
        // SAFETY: registering a plain `extern "C" fn()` with the C library.
        unsafe { libc::atexit(finalize_at_exit) };
    }
    if provided < serialized {
        return Err(format!(
            "the MPI library provides thread level {provided}; the mpi conduit needs at \
             least MPI_THREAD_SERIALIZED"
        ));
    }
    // SAFETY: MPI is initialized; COMM_WORLD and ERRORS_RETURN are valid handles. With it,
    // errors on the world communicator come back as codes instead of aborting the job.
    let rc =
        unsafe { ffi::MPI_Comm_set_errhandler(ffi::RSMPI_COMM_WORLD, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler(MPI_COMM_WORLD)").map_err(|e| e.to_string())?;
    install_sigterm_hook();
    Ok(Process {
        thread_level: provided,
    })
}

extern "C" fn finalize_at_exit() {
    if POISONED.load(Ordering::Acquire) || JOB_ACTIVE.load(Ordering::Acquire) {
        // A rank was lost or the process leaves in the middle of a job: the collective
        // finalize could wait forever for the others, and the exit status already tells.
        return;
    }
    // SAFETY: MPI was initialized by this module and is not finalized twice (atexit runs once).
    let rc = unsafe { ffi::MPI_Finalize() };
    if let Err(e) = check(rc, "MPI_Finalize") {
        // The process is exiting: nobody is left to return the error to.
        crate::stderr_line::stderr_line(format_args!("gasnet-bridge (mpi conduit): {e}"));
    }
}

extern "C" fn on_sigterm(_: c_int) {
    let fd = SIGTERM_PIPE.load(Ordering::Acquire);
    if JOB_ACTIVE.load(Ordering::Acquire) && fd >= 0 {
        let byte = 1u8;
        // SAFETY: write(2) is async-signal-safe; the pipe stays open for the process's life.
        unsafe { libc::write(fd, (&byte as *const u8).cast(), 1) };
    } else {
        // No job: behave as if no handler were installed.
        // SAFETY: signal(2) and raise(3) are async-signal-safe.
        unsafe {
            libc::signal(libc::SIGTERM, libc::SIG_DFL);
            libc::raise(libc::SIGTERM);
        }
    }
}

fn install_sigterm_hook() {
    let mut fds = [0 as c_int; 2];
    // SAFETY: pipe(2) writes two descriptors into the array.
    if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
        return; // without the hook a SIGTERM just ends the process, as by default
    }
    for fd in fds {
        // SAFETY: fcntl on descriptors this function just created.
        unsafe {
            libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
            libc::fcntl(fd, libc::F_SETFL, libc::O_NONBLOCK);
        }
    }
    SIGTERM_READ.store(fds[0], Ordering::Release);
    SIGTERM_PIPE.store(fds[1], Ordering::Release);
    // SAFETY: the handler only does async-signal-safe work (see `on_sigterm`).
    unsafe {
        libc::signal(
            libc::SIGTERM,
            on_sigterm as extern "C" fn(c_int) as libc::sighandler_t,
        )
    };
}

/// Read end of the SIGTERM pipe; -1 when the hook could not be installed.
pub(crate) static SIGTERM_READ: AtomicI32 = AtomicI32::new(-1);

pub(super) fn bytemuck_bytes(chars: &[c_char]) -> &[u8] {
    // SAFETY: c_char and u8 have the same size and alignment; any bit pattern is a valid u8.
    unsafe { std::slice::from_raw_parts(chars.as_ptr().cast(), chars.len()) }
}

/// This host's name as MPI reports it.
pub(crate) fn processor_name() -> String {
    let mut buf = [0 as c_char; ffi::MPI_MAX_PROCESSOR_NAME as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_PROCESSOR_NAME characters plus a terminator.
    let rc = unsafe { ffi::MPI_Get_processor_name(buf.as_mut_ptr(), &mut len) };
    if check(rc, "MPI_Get_processor_name").is_err() {
        return "unknown-host".into();
    }
    CStr::from_bytes_until_nul(bytemuck_bytes(&buf))
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown-host".into())
}
