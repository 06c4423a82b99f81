//! Raw MPI measured in the same run as the conduit (BENCHMARKS.md): the baselines of the mpi
//! conduit's benchmarks. Every function is collective over `MPI_COMM_WORLD` (call it from
//! every process, between jobs); rank 0 measures against rank 1 and gets the median of `reps`
//! repetitions after one warm-up, the other ranks get 0.

use std::ffi::{c_int, c_void};
use std::time::Instant;

use ::mpi::ffi;

use super::process::{check, world_shape};
use super::uint8;
use crate::error::BridgeError;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn world() -> Result<(ffi::MPI_Comm, usize, usize), BridgeError> {
    let (rank, size) = world_shape().map_err(|e| BridgeError::Conduit(e.to_string()))?;
    // SAFETY: reading a link-time constant exported by rsmpi's C shim.
    Ok((unsafe { ffi::RSMPI_COMM_WORLD }, rank, size))
}

/// Nanoseconds per 8-byte `MPI_Send`/`MPI_Recv` round trip between ranks 0 and 1.
pub fn pingpong_8b(ops: u64, reps: usize) -> Result<f64, BridgeError> {
    let (comm, rank, size) = world()?;
    let mut buf = [0u8; 8];
    let mut samples = Vec::new();
    for rep in 0..=reps.max(1) {
        // SAFETY: `buf` holds 8 bytes for every send and receive; the world communicator is
        // valid; STATUS_IGNORE is allowed.
        unsafe {
            check(ffi::MPI_Barrier(comm), "MPI_Barrier")?;
            let start = Instant::now();
            if size >= 2 && rank < 2 {
                let peer = 1 - rank as c_int;
                for _ in 0..ops {
                    let p = buf.as_mut_ptr().cast::<c_void>();
                    if rank == 0 {
                        check(ffi::MPI_Send(p, 8, uint8(), peer, 7, comm), "MPI_Send")?;
                        check(
                            ffi::MPI_Recv(p, 8, uint8(), peer, 7, comm, ffi::RSMPI_STATUS_IGNORE),
                            "MPI_Recv",
                        )?;
                    } else {
                        check(
                            ffi::MPI_Recv(p, 8, uint8(), peer, 7, comm, ffi::RSMPI_STATUS_IGNORE),
                            "MPI_Recv",
                        )?;
                        check(ffi::MPI_Send(p, 8, uint8(), peer, 7, comm), "MPI_Send")?;
                    }
                }
            }
            if rep > 0 {
                samples.push(start.elapsed().as_nanos() as f64 / ops as f64);
            }
        }
    }
    Ok(if rank == 0 { median(samples) } else { 0.0 })
}

/// `MPI_Put` of `size` bytes from rank 0 into rank 1's window followed by `MPI_Win_flush`,
/// `ops` times: nanoseconds per put (a window from `MPI_Win_allocate`, passive target,
/// `MPI_Win_lock_all`).
pub fn put_flush(size: usize, ops: u64, reps: usize) -> Result<f64, BridgeError> {
    let (comm, rank, world_size) = world()?;
    let src = vec![5u8; size];
    let mut samples = Vec::new();
    // SAFETY: the window is allocated, locked, used and freed here by every process together;
    // `src` outlives every put (each is flushed before the next); the target range
    // `0..size` lies in rank 1's window of `size` bytes.
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
                    check(ffi::MPI_Win_flush(1, win), "MPI_Win_flush")?;
                }
            }
            if rep > 0 {
                samples.push(start.elapsed().as_nanos() as f64 / ops as f64);
            }
        }
        check(ffi::MPI_Win_unlock_all(win), "MPI_Win_unlock_all")?;
        check(ffi::MPI_Win_free(&mut win), "MPI_Win_free")?;
    }
    Ok(if rank == 0 { median(samples) } else { 0.0 })
}
