//! Process-wide MPI state: initialization on the first mpi job, `MPI_Finalize` at exit, and the
//! SIGTERM hook that lets a rank name the lost rank before the launcher's SIGKILL arrives.

use std::ffi::{CStr, c_char, c_int};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

use ::mpi::ffi;

use crate::error::{BridgeError, LaunchError};

use super::calls::{bytemuck_bytes, check};

/// What `MPI_Init_thread` gave this process.
#[derive(Debug)]
pub(crate) struct Process {
    /// The thread level MPI provides.
    pub(crate) thread_level: ThreadLevel,
}

/// The MPI thread levels, in increasing order of what they allow.
///
/// The conduit makes every MPI call of a job from the thread that runs the job's rank (the
/// watchdog's threads, and threads the application starts, such as rayon's, make none), one
/// job at a time. So `Single` suffices when every job runs on the thread that initialized MPI,
/// and `Serialized` when jobs run on other threads. The standard words `Single` as "only one
/// thread will execute"; this conduit reads it as "only one thread calls MPI", which is what
/// implementations rely on (Open MPI and MPICH start threads of their own at every level).
/// The level matters for speed: Open MPI 4.1 locks a mutex in every send and progress call
/// at any level above `Single`, `Funneled` included, which every round trip pays
/// (docs/benchmarks.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ThreadLevel {
    /// `MPI_THREAD_SINGLE`: jobs run on the thread that initialized MPI.
    Single,
    /// `MPI_THREAD_FUNNELED`: as `Single`, for MPI libraries that need it said.
    Funneled,
    /// `MPI_THREAD_SERIALIZED`: jobs may run on any thread, one at a time.
    Serialized,
    /// `MPI_THREAD_MULTIPLE`: the application may call MPI from other threads meanwhile.
    Multiple,
}

impl ThreadLevel {
    /// The level to ask for: `PGAS_MPI_THREAD` if set (`single`, `funneled`, `serialized`
    /// or `multiple`), else `Single` on the process's main thread (where an MPI program's
    /// jobs run) and `Serialized` elsewhere (a test harness runs each test on its own thread).
    fn wanted(var: Option<&str>, on_main_thread: bool) -> Result<ThreadLevel, String> {
        match var.map(str::trim) {
            None => Ok(if on_main_thread {
                ThreadLevel::Single
            } else {
                ThreadLevel::Serialized
            }),
            Some("single") => Ok(ThreadLevel::Single),
            Some("funneled") => Ok(ThreadLevel::Funneled),
            Some("serialized") => Ok(ThreadLevel::Serialized),
            Some("multiple") => Ok(ThreadLevel::Multiple),
            Some(other) => Err(format!(
                "PGAS_MPI_THREAD={other:?}: expected single, funneled, serialized or multiple"
            )),
        }
    }

    fn to_mpi(self) -> c_int {
        // SAFETY: reading link-time constants exported by rsmpi's C shim.
        unsafe {
            match self {
                ThreadLevel::Single => ffi::RSMPI_THREAD_SINGLE,
                ThreadLevel::Funneled => ffi::RSMPI_THREAD_FUNNELED,
                ThreadLevel::Serialized => ffi::RSMPI_THREAD_SERIALIZED,
                ThreadLevel::Multiple => ffi::RSMPI_THREAD_MULTIPLE,
            }
        }
    }

    /// The level MPI reports (`provided`): the highest whose constant it reaches.
    fn from_mpi(provided: c_int) -> ThreadLevel {
        [
            ThreadLevel::Multiple,
            ThreadLevel::Serialized,
            ThreadLevel::Funneled,
        ]
        .into_iter()
        .find(|l| provided >= l.to_mpi())
        .unwrap_or(ThreadLevel::Single)
    }

    /// The level's name in the MPI standard.
    pub(crate) fn name(self) -> &'static str {
        match self {
            ThreadLevel::Single => "MPI_THREAD_SINGLE",
            ThreadLevel::Funneled => "MPI_THREAD_FUNNELED",
            ThreadLevel::Serialized => "MPI_THREAD_SERIALIZED",
            ThreadLevel::Multiple => "MPI_THREAD_MULTIPLE",
        }
    }
}

/// Whether the calling thread is the process's main thread (the one `main` runs on).
fn on_main_thread() -> bool {
    std::thread::current().name() == Some("main")
}

static PROCESS: OnceLock<Result<Process, String>> = OnceLock::new();
/// Set once a job failed: MPI may be unusable, so `MPI_Finalize` (collective) is skipped.
pub(crate) static POISONED: AtomicBool = AtomicBool::new(false);
/// Set while a job runs in this process (its watchdog reads the SIGTERM pipe).
pub(crate) static JOB_ACTIVE: AtomicBool = AtomicBool::new(false);
/// This process took part in a recovery from a lost process (`ulfm/RECOVERY.md`): its
/// `MPI_Finalize` is skipped at exit, since Open MPI 5.0.11 was seen waiting in it forever
/// on every live process after a recovery (`ompi_mpi_finalize`, in some runs of
/// `cd_stencil_real_loss`); the exit status tells how the job ended.
pub(crate) static RECOVERED: AtomicBool = AtomicBool::new(false);
/// Write end of the pipe on which the SIGTERM handler tells the watchdog; -1 when none.
pub(crate) static SIGTERM_PIPE: AtomicI32 = AtomicI32::new(-1);

/// Initializes MPI once per process (at the [`ThreadLevel`] `PGAS_MPI_THREAD` or the calling
/// thread decides) and returns its state.
pub(crate) fn process() -> Result<&'static Process, LaunchError> {
    PROCESS
        .get_or_init(init)
        .as_ref()
        .map_err(|e| LaunchError::Conduit(e.clone()))
}

/// This process's rank in `MPI_COMM_WORLD` and the job's rank count: the world's size less the
/// spares (`PGAS_SPARES`, with ULFM), initializing MPI if needed.
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
    // Spares hold no rank: the job has the other processes.
    let spares =
        super::spares::from_env(size as usize).map_err(|e| LaunchError::Conduit(e.to_string()))?;
    Ok((rank as usize, size as usize - spares))
}

/// Refuses a job on a thread that may not call MPI: below `MPI_THREAD_SERIALIZED`, only the
/// thread that initialized MPI may.
pub(crate) fn check_thread(p: &Process) -> Result<(), LaunchError> {
    if p.thread_level >= ThreadLevel::Serialized {
        return Ok(());
    }
    let mut main: c_int = 0;
    // SAFETY: MPI is initialized (`p` exists); the call writes one int.
    let rc = unsafe { ffi::MPI_Is_thread_main(&mut main) };
    check(rc, "MPI_Is_thread_main").map_err(|e| LaunchError::Conduit(e.to_string()))?;
    if main != 0 {
        return Ok(());
    }
    Err(LaunchError::Conduit(format!(
        "MPI was initialized at {} on another thread, so this thread may not call MPI: run \
         every job on the thread that started the first one, or set \
         PGAS_MPI_THREAD=serialized to run jobs from any thread (one at a time)",
        p.thread_level.name()
    )))
}

fn init() -> Result<Process, String> {
    let var = std::env::var("PGAS_MPI_THREAD").ok();
    let want = ThreadLevel::wanted(var.as_deref(), on_main_thread())?;
    let mut initialized: c_int = 0;
    // SAFETY: MPI_Initialized may be called at any time and writes one int.
    let rc = unsafe { ffi::MPI_Initialized(&mut initialized) };
    check(rc, "MPI_Initialized").map_err(|e| e.to_string())?;
    let mut provided: c_int = 0;
    if initialized != 0 {
        // Someone else (the application) initialized MPI: take the level it got, which
        // `check_thread` holds each job to.
        // SAFETY: MPI is initialized; the call writes one int.
        let rc = unsafe { ffi::MPI_Query_thread(&mut provided) };
        check(rc, "MPI_Query_thread").map_err(|e| e.to_string())?;
    } else {
        let deadline = super::init_deadline::arm()?;
        // SAFETY: null argc/argv is allowed by MPI-2 and later; `provided` is written.
        let rc = unsafe {
            ffi::MPI_Init_thread(
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                want.to_mpi(),
                &mut provided,
            )
        };
        drop(deadline);
        if rc != ffi::MPI_SUCCESS as c_int {
            return Err(format!("MPI_Init_thread failed with code {rc}"));
        }
        // SAFETY: registering a plain `extern "C" fn()` with the C library.
        unsafe { libc::atexit(finalize_at_exit) };
        if ThreadLevel::from_mpi(provided) < want {
            return Err(format!(
                "asked MPI for {} (PGAS_MPI_THREAD={}), and the library provides only {}",
                want.name(),
                var.as_deref().unwrap_or("unset"),
                ThreadLevel::from_mpi(provided).name()
            ));
        }
    }
    // SAFETY: MPI is initialized; COMM_WORLD and ERRORS_RETURN are valid handles. With it,
    // errors on the world communicator come back as codes instead of aborting the job.
    let rc =
        unsafe { ffi::MPI_Comm_set_errhandler(ffi::RSMPI_COMM_WORLD, ffi::RSMPI_ERRORS_RETURN) };
    check(rc, "MPI_Comm_set_errhandler(MPI_COMM_WORLD)").map_err(|e| e.to_string())?;
    install_sigterm_hook();
    Ok(Process {
        thread_level: ThreadLevel::from_mpi(provided),
    })
}

extern "C" fn finalize_at_exit() {
    if POISONED.load(Ordering::Acquire)
        || JOB_ACTIVE.load(Ordering::Acquire)
        || RECOVERED.load(Ordering::Acquire)
    {
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

/// This host's name as MPI reports it.
pub(crate) fn processor_name() -> String {
    let mut buf = [0 as c_char; ffi::MPI_MAX_PROCESSOR_NAME as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_PROCESSOR_NAME characters plus a terminator.
    let rc = unsafe { ffi::MPI_Get_processor_name(buf.as_mut_ptr(), &mut len) };
    if check(rc, "MPI_Get_processor_name").is_err() {
        return "unknown-host".into();
    }
    let name = CStr::from_bytes_until_nul(bytemuck_bytes(&buf))
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown-host".into());
    // A refused value is reported by `host_comm`, which fails the set-up with it.
    match super::emulated_hosts::this_host() {
        Ok(Some(host)) => format!("{name}#{host}"),
        _ => name,
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadLevel;

    #[test]
    fn the_thread_level_follows_the_variable_then_the_thread() {
        assert_eq!(ThreadLevel::wanted(None, true), Ok(ThreadLevel::Single));
        assert_eq!(
            ThreadLevel::wanted(None, false),
            Ok(ThreadLevel::Serialized)
        );
        assert_eq!(
            ThreadLevel::wanted(Some(" funneled "), false),
            Ok(ThreadLevel::Funneled)
        );
        assert_eq!(
            ThreadLevel::wanted(Some("serialized"), true),
            Ok(ThreadLevel::Serialized)
        );
        assert_eq!(
            ThreadLevel::wanted(Some("multiple"), true),
            Ok(ThreadLevel::Multiple)
        );
        let e = ThreadLevel::wanted(Some("many"), true).unwrap_err();
        assert!(
            e.contains("PGAS_MPI_THREAD") && e.contains("serialized"),
            "{e}"
        );
    }

    #[test]
    fn levels_round_trip_through_mpi_constants_in_order() {
        let all = [
            ThreadLevel::Single,
            ThreadLevel::Funneled,
            ThreadLevel::Serialized,
            ThreadLevel::Multiple,
        ];
        for pair in all.windows(2) {
            assert!(pair[0].to_mpi() < pair[1].to_mpi(), "{pair:?}");
        }
        for level in all {
            assert_eq!(ThreadLevel::from_mpi(level.to_mpi()), level);
        }
    }
}
