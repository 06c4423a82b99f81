//! Raw MPI measured in the same run as the conduit (docs/benchmarks.md): the baselines of the
//! mpi conduit's benchmarks. Every function is collective over `MPI_COMM_WORLD` (call it from
//! every process, between jobs); rank 0 measures against rank 1 and gets the median of `reps`
//! repetitions after one warm-up, the other ranks get 0.

use std::ffi::{CStr, c_char, c_int, c_void};
use std::time::Instant;

use ::mpi::ffi;

/// A raw MPI call of a baseline failed, or its result was wrong.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    #[error("{call}: {text} (MPI error {code})")]
    Mpi {
        call: String,
        text: String,
        code: c_int,
    },
    #[error("MPI is not running: {0}")]
    NoMpi(String),
    #[error("{0}")]
    Wrong(String),
}

/// Turns an MPI return code into a result with MPI's own text for the error.
fn check(rc: c_int, call: &str) -> Result<(), BaselineError> {
    if rc == ffi::MPI_SUCCESS as c_int {
        return Ok(());
    }
    let mut buf = [0 as c_char; ffi::MPI_MAX_ERROR_STRING as usize + 1];
    let mut len: c_int = 0;
    // SAFETY: the buffer holds MPI_MAX_ERROR_STRING characters plus a terminator; on failure
    // it stays zeroed, an empty text.
    let _ = unsafe { ffi::MPI_Error_string(rc, buf.as_mut_ptr(), &mut len) };
    // SAFETY: the buffer is zero-initialized and one longer than MPI ever writes, so it holds
    // a terminator.
    let text = unsafe { CStr::from_ptr(buf.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    Err(BaselineError::Mpi {
        call: call.to_string(),
        text,
        code: rc,
    })
}

fn uint8() -> ffi::MPI_Datatype {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    unsafe { ffi::RSMPI_UINT8_T }
}

fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading a link-time constant of rsmpi's C shim.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// Whether `req` has completed.
fn test(req: &mut ffi::MPI_Request, call: &str) -> Result<bool, BaselineError> {
    let mut flag: c_int = 0;
    // SAFETY: `req` is a request this module started (or null, which MPI_Test reports as
    // complete); STATUS_IGNORE is allowed.
    let rc = unsafe { ffi::MPI_Test(req, &mut flag, ffi::RSMPI_STATUS_IGNORE) };
    check(rc, call)?;
    Ok(flag != 0)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The world communicator, this process's rank and the process count. MPI is started by
/// gasnet-bridge (asking it for the job's rank count does), at the thread level its conduit
/// needs, so that the baselines run under the same MPI set-up as the conduit.
fn world() -> Result<(ffi::MPI_Comm, usize, usize), BaselineError> {
    gasnet_bridge::job_ranks("--ranks", None, 1)
        .map_err(|e| BaselineError::NoMpi(e.to_string()))?;
    // SAFETY: reading a link-time constant exported by rsmpi's C shim.
    let comm = unsafe { ffi::RSMPI_COMM_WORLD };
    let (mut size, mut rank): (c_int, c_int) = (0, 0);
    // SAFETY: MPI is initialized (above); each call writes one int.
    check(
        unsafe { ffi::MPI_Comm_size(comm, &mut size) },
        "MPI_Comm_size",
    )?;
    // SAFETY: as above.
    check(
        unsafe { ffi::MPI_Comm_rank(comm, &mut rank) },
        "MPI_Comm_rank",
    )?;
    Ok((comm, rank as usize, size as usize))
}

/// Nanoseconds per 8-byte `MPI_Send`/`MPI_Recv` round trip between ranks 0 and 1, between
/// jobs (every process calls it; each repetition starts with a barrier).
pub fn pingpong_8b(ops: u64, reps: usize) -> Result<f64, BaselineError> {
    let (comm, rank, _) = world()?;
    let pingpong = PingPong::new()?;
    let mut samples = Vec::new();
    for rep in 0..=reps.max(1) {
        // SAFETY: the world communicator is valid.
        check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier")?;
        let ns = pingpong.run(ops)?;
        if rep > 0 {
            samples.push(ns);
        }
    }
    Ok(if rank == 0 { median(samples) } else { 0.0 })
}

/// A raw ping-pong between ranks 0 and 1 on a private duplicate of `MPI_COMM_WORLD`, so that
/// it can run *inside* a job, alternating with the operation it is the baseline of (both then
/// see the same machine state): its messages never match the conduit's pre-posted receives,
/// which live on the job's own communicator.
///
/// Creating and dropping one are collective over `MPI_COMM_WORLD` (every process, same point).
pub struct PingPong {
    comm: ffi::MPI_Comm,
    rank: usize,
    size: usize,
    pattern: Pattern,
}

/// How a [`PingPong`] moves its messages.
#[derive(Debug, Clone, Copy)]
enum Pattern {
    /// 8 bytes with `MPI_Send` and `MPI_Recv` from the peer: MPI's fastest round trip.
    Blocking8,
    /// What an active-message layer over MPI must do at least, raw: each side keeps a receive
    /// from any source pre-posted, sends `bytes` bytes with `MPI_Isend`, tests the receive
    /// until it completes and posts it again.
    Posted { bytes: usize },
}

impl PingPong {
    /// An 8-byte `MPI_Send`/`MPI_Recv` ping-pong (duplicates the world communicator:
    /// collective).
    pub fn new() -> Result<PingPong, BaselineError> {
        PingPong::with(Pattern::Blocking8)
    }

    /// The message pattern of an active-message layer over MPI with messages of `bytes`
    /// bytes (at most 8 KiB), raw: pre-posted receives of any source, `MPI_Isend`,
    /// `MPI_Test` (collective, as [`PingPong::new`]).
    pub fn am_pattern(bytes: usize) -> Result<PingPong, BaselineError> {
        PingPong::with(Pattern::Posted {
            bytes: bytes.min(RECV_BYTES),
        })
    }

    fn with(pattern: Pattern) -> Result<PingPong, BaselineError> {
        let (world, rank, size) = world()?;
        // SAFETY: reading a link-time constant exported by rsmpi's C shim.
        let mut comm = unsafe { ffi::RSMPI_COMM_NULL };
        // SAFETY: the world communicator is valid; `comm` receives the new handle.
        check(
            unsafe { ffi::MPI_Comm_dup(world, &mut comm) },
            "MPI_Comm_dup",
        )?;
        Ok(PingPong {
            comm,
            rank,
            size,
            pattern,
        })
    }

    /// `ops` round trips; nanoseconds per round trip on rank 0, 0 on the other ranks. Ranks 0
    /// and 1 must both call it (each blocks in MPI until the other side has played its part);
    /// the other ranks return at once.
    pub fn run(&self, ops: u64) -> Result<f64, BaselineError> {
        if self.size < 2 || self.rank >= 2 {
            return Ok(0.0);
        }
        let start = Instant::now();
        match self.pattern {
            Pattern::Blocking8 => self.blocking(ops)?,
            Pattern::Posted { bytes } => self.posted(ops, bytes)?,
        }
        let ns = start.elapsed().as_nanos() as f64 / ops.max(1) as f64;
        Ok(if self.rank == 0 { ns } else { 0.0 })
    }

    fn blocking(&self, ops: u64) -> Result<(), BaselineError> {
        let peer = 1 - self.rank as c_int;
        let mut buf = [0u8; 8];
        let p = buf.as_mut_ptr().cast::<c_void>();
        for _ in 0..ops {
            // SAFETY: `buf` holds the 8 bytes of every send and receive; the communicator is
            // this object's; STATUS_IGNORE is allowed.
            unsafe {
                let status = ffi::RSMPI_STATUS_IGNORE;
                if self.rank == 0 {
                    check(ffi::MPI_Send(p, 8, uint8(), peer, 7, self.comm), "MPI_Send")?;
                    check(
                        ffi::MPI_Recv(p, 8, uint8(), peer, 7, self.comm, status),
                        "MPI_Recv",
                    )?;
                } else {
                    check(
                        ffi::MPI_Recv(p, 8, uint8(), peer, 7, self.comm, status),
                        "MPI_Recv",
                    )?;
                    check(ffi::MPI_Send(p, 8, uint8(), peer, 7, self.comm), "MPI_Send")?;
                }
            }
        }
        Ok(())
    }

    /// Rank 0 sends first; each side posts its receive again before waiting for its send,
    /// except after the last round trip, so nothing is left posted.
    fn posted(&self, ops: u64, bytes: usize) -> Result<(), BaselineError> {
        let mut out = vec![0u8; bytes];
        let mut inbox = vec![0u8; RECV_BYTES];
        let outcome = self.posted_rounds(ops, &mut out, &mut inbox);
        if outcome.is_err() {
            // A failed MPI call may leave a receive posted into `inbox` or a send reading
            // `out`: the buffers are never freed then.
            std::mem::forget(out);
            std::mem::forget(inbox);
        }
        outcome
    }

    fn posted_rounds(
        &self,
        ops: u64,
        out: &mut [u8],
        inbox: &mut [u8],
    ) -> Result<(), BaselineError> {
        let peer = 1 - self.rank as c_int;
        let bytes = out.len();
        let mut recv = null_request();
        let post = |recv: &mut ffi::MPI_Request, inbox: &mut [u8]| {
            // SAFETY: `inbox` stays allocated until the receive completes: it is tested to
            // the end before the next post and before a successful return, and `posted`
            // never frees it after a failure.
            check(
                unsafe {
                    ffi::MPI_Irecv(
                        inbox.as_mut_ptr().cast(),
                        RECV_BYTES as c_int,
                        uint8(),
                        ffi::RSMPI_ANY_SOURCE,
                        8,
                        self.comm,
                        recv,
                    )
                },
                "MPI_Irecv",
            )
        };
        let send = || -> Result<ffi::MPI_Request, BaselineError> {
            let mut req = null_request();
            // SAFETY: `out` stays allocated until the send completes: it is waited on in the
            // same round, and `posted` never frees it after a failure.
            check(
                unsafe {
                    ffi::MPI_Isend(
                        out.as_ptr().cast(),
                        bytes as c_int,
                        uint8(),
                        peer,
                        8,
                        self.comm,
                        &mut req,
                    )
                },
                "MPI_Isend",
            )?;
            Ok(req)
        };
        let arrive = |recv: &mut ffi::MPI_Request| -> Result<(), BaselineError> {
            while !test(recv, "MPI_Test")? {}
            Ok(())
        };
        post(&mut recv, inbox)?;
        for i in 0..ops {
            let more = i + 1 < ops;
            let mut sent = if self.rank == 0 {
                let s = send()?;
                arrive(&mut recv)?;
                s
            } else {
                arrive(&mut recv)?;
                send()?
            };
            if more {
                post(&mut recv, inbox)?;
            }
            // SAFETY: a request of this round's send; STATUS_IGNORE is allowed.
            check(
                unsafe { ffi::MPI_Wait(&mut sent, ffi::RSMPI_STATUS_IGNORE) },
                "MPI_Wait",
            )?;
        }
        Ok(())
    }
}

/// Receive buffer of [`Pattern::Posted`]: the size of the mpi conduit's pre-posted receives.
const RECV_BYTES: usize = 8 << 10;

impl Drop for PingPong {
    fn drop(&mut self) {
        // SAFETY: the communicator was created by `new` and is freed once.
        let rc = unsafe { ffi::MPI_Comm_free(&mut self.comm) };
        if let Err(e) = check(rc, "MPI_Comm_free(ping-pong)") {
            eprintln!("bench (mpi baseline): {e}");
        }
    }
}

/// `MPI_Put` of `size` bytes from rank 0 into rank 1's window followed by `MPI_Win_flush`,
/// `ops` times: nanoseconds per put (a window from `MPI_Win_allocate`, passive target,
/// `MPI_Win_lock_all`).
pub fn put_flush(size: usize, ops: u64, reps: usize) -> Result<f64, BaselineError> {
    puts(size, ops, reps, Flush::EachPut)
}

/// `ops` `MPI_Put`s of `size` bytes from rank 0 into rank 1's window, all in flight, then one
/// `MPI_Win_flush`: nanoseconds per put (the message rate of a put flood; window as in
/// [`put_flush`]). Every put writes the same `size` bytes at offset 0.
pub fn put_flood(size: usize, ops: u64, reps: usize) -> Result<f64, BaselineError> {
    puts(size, ops, reps, Flush::Once)
}

/// When [`puts`] flushes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flush {
    EachPut,
    Once,
}

/// `ops` puts of `size` bytes from rank 0 into rank 1's window per repetition, flushed as
/// `flush` says: the median nanoseconds per put on rank 0 (0 elsewhere).
fn puts(size: usize, ops: u64, reps: usize, flush: Flush) -> Result<f64, BaselineError> {
    let (comm, rank, world_size) = world()?;
    let src = vec![5u8; size];
    let mut samples = Vec::new();
    // SAFETY: the window is allocated, locked, used and freed here by every process together;
    // `src` outlives every put (all are flushed before the repetition ends, and `src` lives
    // until the function returns); the target range `0..size` lies in rank 1's window of
    // `size` bytes.
    unsafe {
        let mut base: *mut c_void = std::ptr::null_mut();
        let mut win = ffi::RSMPI_WIN_NULL;
        check(
            ffi::MPI_Win_allocate(
                size.max(8) as ffi::MPI_Aint,
                1,
                ffi::RSMPI_INFO_NULL,
                comm,
                (&mut base as *mut *mut c_void).cast(),
                &mut win,
            ),
            "MPI_Win_allocate",
        )?;
        check(ffi::MPI_Win_lock_all(0, win), "MPI_Win_lock_all")?;
        for rep in 0..=reps.max(1) {
            check(ffi::MPI_Barrier(comm), "MPI_Barrier")?;
            let start = Instant::now();
            if rank == 0 && world_size >= 2 {
                for _ in 0..ops {
                    check(
                        ffi::MPI_Put(
                            src.as_ptr().cast(),
                            size as c_int,
                            uint8(),
                            1,
                            0,
                            size as c_int,
                            uint8(),
                            win,
                        ),
                        "MPI_Put",
                    )?;
                    if flush == Flush::EachPut {
                        check(ffi::MPI_Win_flush(1, win), "MPI_Win_flush")?;
                    }
                }
                if flush == Flush::Once {
                    check(ffi::MPI_Win_flush(1, win), "MPI_Win_flush")?;
                }
            }
            if rep > 0 {
                samples.push(start.elapsed().as_nanos() as f64 / ops.max(1) as f64);
            }
        }
        check(ffi::MPI_Win_unlock_all(win), "MPI_Win_unlock_all")?;
        check(ffi::MPI_Win_free(&mut win), "MPI_Win_free")?;
    }
    Ok(if rank == 0 { median(samples) } else { 0.0 })
}

/// Nanoseconds per `MPI_Barrier` on `MPI_COMM_WORLD`, `ops` of them per repetition (each
/// repetition starts with one more, which aligns the processes); rank 0's median.
pub fn barrier(ops: u64, reps: usize) -> Result<f64, BaselineError> {
    let (comm, rank, _) = world()?;
    let mut samples = Vec::new();
    for rep in 0..=reps.max(1) {
        // SAFETY: the world communicator is valid.
        check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier")?;
        let start = Instant::now();
        for _ in 0..ops {
            // SAFETY: as above.
            check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier")?;
        }
        if rep > 0 {
            samples.push(start.elapsed().as_nanos() as f64 / ops.max(1) as f64);
        }
    }
    Ok(if rank == 0 { median(samples) } else { 0.0 })
}

/// Nanoseconds per `MPI_Allreduce` of one `u64` with `MPI_SUM` on `MPI_COMM_WORLD`, `ops` of
/// them per repetition (each repetition starts with a barrier); rank 0's median.
pub fn allreduce_u64(ops: u64, reps: usize) -> Result<f64, BaselineError> {
    let (comm, rank, size) = world()?;
    let mut samples = Vec::new();
    let mine = 1u64;
    let mut sum = 0u64;
    for rep in 0..=reps.max(1) {
        // SAFETY: the world communicator is valid.
        check(unsafe { ffi::MPI_Barrier(comm) }, "MPI_Barrier")?;
        let start = Instant::now();
        for _ in 0..ops {
            // SAFETY: one u64 in `mine` and one out in `sum`, both live across the call;
            // datatype and op are rsmpi's link-time constants.
            check(
                unsafe {
                    ffi::MPI_Allreduce(
                        (&mine as *const u64).cast(),
                        (&mut sum as *mut u64).cast(),
                        1,
                        ffi::RSMPI_UINT64_T,
                        ffi::RSMPI_SUM,
                        comm,
                    )
                },
                "MPI_Allreduce",
            )?;
            std::hint::black_box(sum);
        }
        if rep > 0 {
            samples.push(start.elapsed().as_nanos() as f64 / ops.max(1) as f64);
        }
    }
    if ops > 0 && sum != size as u64 {
        return Err(BaselineError::Wrong(format!(
            "MPI_Allreduce baseline: sum {sum} of one per process, {size} processes"
        )));
    }
    Ok(if rank == 0 { median(samples) } else { 0.0 })
}
