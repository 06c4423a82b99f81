//! Failure detection for the mpi conduit: a TCP star between the rank processes of a job.
//!
//! MPI itself offers no portable way to learn that a peer died: Open MPI's launcher notices
//! and kills the job about a second later with SIGTERM then SIGKILL, and until then a rank
//! waiting on the dead one just waits. So every job opens one TCP connection from each rank
//! to rank 0 (addresses exchanged over MPI at start-up). The kernel closes a process's
//! sockets however it ends, SIGKILL included, so:
//!
//! * a connection that reaches end-of-file without a `BYE` line means its rank is lost; rank
//!   0 then sends `LOST r` to everyone (and if rank 0 is the lost one, every rank sees its
//!   connection close);
//! * a rank whose body panics sends `FAIL r message`; rank 0 relays it to everyone, back to
//!   the sender too, which waits (at most [`ECHO_WAIT`]) for that echo before it returns, so
//!   the news is out before its process can exit.
//!
//! On the first failure the watchdog prints a line naming the failed rank to stderr, records
//! it (waiting calls on the rank thread then unwind and `launch` returns the error), and arms
//! a deadline: the process ends with status 1 after [`EXIT_DEADLINE`] if it has not ended by
//! itself (a rank stuck inside an MPI call never returns). A SIGTERM from the launcher is
//! turned into the same orderly exit: if the cause is not known yet, the watchdog waits up
//! to [`TERM_GRACE`] for it, then exits with 143. Everything ends well within 10 s.
//!
//! A host that vanishes without closing its connections (power loss) is not detected here;
//! that is left to the launcher.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::error::BridgeError;
use crate::failure::Failure;
use crate::sleep::Sleeper;

use ::mpi::ffi;

use super::calls::{check, uint8};
use super::process::SIGTERM_READ;

/// How long a panicking rank waits for rank 0 to confirm that the failure was relayed.
pub(crate) const ECHO_WAIT: Duration = Duration::from_secs(2);
/// How long after a failure the process is ended if it has not ended by itself.
pub(crate) const EXIT_DEADLINE: Duration = Duration::from_secs(5);
/// How long a SIGTERM waits for the name of the failed rank before exiting anyway.
pub(crate) const TERM_GRACE: Duration = Duration::from_millis(700);
/// How long connecting the star may take at start-up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// What the rank thread and the watchdog thread share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) failure: Failure,
    /// The rank thread's sleeper; woken when a failure is recorded.
    pub(crate) sleeper: Sleeper,
    /// This rank's own FAIL came back from rank 0.
    echoed: AtomicBool,
    /// This rank is leaving normally: end-of-file from rank 0 is expected now.
    leaving: AtomicBool,
    deadline_armed: AtomicBool,
}

impl Shared {
    /// Records a failure (the first one wins), says so on stderr and arms the exit deadline.
    pub(crate) fn fail(&self, me: usize, rank: usize, message: String) {
        let first = !self.failure.is_failed();
        if first && rank != me {
            eprintln!(
                "gasnet-bridge (mpi conduit): rank {me}: rank {rank} failed: {message}; \
                 this rank gives up"
            );
        }
        self.failure.record(rank, message);
        self.sleeper.wake();
        if !self.deadline_armed.swap(true, Ordering::AcqRel) {
            let info = self.failure.first();
            let _ = std::thread::Builder::new()
                .name("gasnet-bridge exit deadline".into())
                .spawn(move || {
                    std::thread::sleep(EXIT_DEADLINE);
                    let (rank, message) = info.unwrap_or((rank, String::new()));
                    eprintln!(
                        "gasnet-bridge (mpi conduit): rank {me}: ending the process {} s \
                         after rank {rank} failed ({message})",
                        EXIT_DEADLINE.as_secs()
                    );
                    // SAFETY: _exit ends the process at once; nothing of ours needs running.
                    unsafe { libc::_exit(1) };
                });
        }
    }
}

/// One job's watchdog: the connections and the thread that watches them.
#[derive(Debug)]
pub(crate) struct Watchdog {
    me: usize,
    pub(crate) shared: Arc<Shared>,
    /// Rank 0: a connection to every other rank; other ranks: the one to rank 0.
    writers: Arc<Mutex<Vec<(usize, TcpStream)>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn conduit_err(what: &str, e: impl std::fmt::Display) -> BridgeError {
    BridgeError::Conduit(format!("failure detector: {what}: {e}"))
}

impl Watchdog {
    /// Connects the job's ranks (collective over `comm`); `hosts[r]` is rank `r`'s host.
    pub(crate) fn start(
        comm: ffi::MPI_Comm,
        rank: usize,
        hosts: &[String],
        shared: Arc<Shared>,
    ) -> Result<Watchdog, BridgeError> {
        let bcast = |p: &mut u32| {
            // SAFETY: four bytes of a live u32, broadcast over a valid communicator.
            check(
                unsafe { ffi::MPI_Bcast((p as *mut u32).cast(), 4, uint8(), 0, comm) },
                "MPI_Bcast(port)",
            )
        };
        if rank == 0 {
            Watchdog::start_root(hosts.len(), shared, |port| bcast(&mut (port as u32)))
        } else {
            let mut p = 0u32;
            bcast(&mut p)?;
            Watchdog::start_leaf(rank, &hosts[0], hosts[0] == hosts[rank], p as u16, shared)
        }
    }

    /// Rank 0's half of the start-up: listens, `publish`es the port, accepts every rank.
    pub(crate) fn start_root(
        ranks: usize,
        shared: Arc<Shared>,
        publish: impl FnOnce(u16) -> Result<(), BridgeError>,
    ) -> Result<Watchdog, BridgeError> {
        let listener = TcpListener::bind(("0.0.0.0", 0)).map_err(|e| conduit_err("bind", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| conduit_err("local address", e))?
            .port();
        publish(port)?;
        listener
            .set_nonblocking(true)
            .map_err(|e| conduit_err("listen", e))?;
        let mut conns = Vec::with_capacity(ranks.saturating_sub(1));
        let start = Instant::now();
        while conns.len() + 1 < ranks {
            match listener.accept() {
                Ok((mut stream, _)) => {
                    stream
                        .set_nonblocking(false)
                        .map_err(|e| conduit_err("accept", e))?;
                    stream
                        .set_read_timeout(Some(CONNECT_TIMEOUT))
                        .map_err(|e| conduit_err("accept", e))?;
                    let mut hello = [0u8; 8];
                    stream
                        .read_exact(&mut hello)
                        .map_err(|e| conduit_err("hello", e))?;
                    stream
                        .set_read_timeout(None)
                        .map_err(|e| conduit_err("accept", e))?;
                    let _ = stream.set_nodelay(true);
                    conns.push((u64::from_ne_bytes(hello) as usize, stream));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() > CONNECT_TIMEOUT {
                        return Err(conduit_err(
                            "accept",
                            format!("only {} of {} ranks connected", conns.len() + 1, ranks),
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(e) => return Err(conduit_err("accept", e)),
            }
        }
        Self::spawn(0, shared, conns)
    }

    /// Another rank's half: connects to rank 0 at `host:port` (or this host's loopback).
    pub(crate) fn start_leaf(
        me: usize,
        host: &str,
        same_host: bool,
        port: u16,
        shared: Arc<Shared>,
    ) -> Result<Watchdog, BridgeError> {
        let start = Instant::now();
        let mut stream = loop {
            let mut addrs: Vec<_> = (host, port)
                .to_socket_addrs()
                .map(|a| a.collect())
                .unwrap_or_default();
            if same_host {
                addrs.insert(0, ([127, 0, 0, 1], port).into());
            }
            let mut last = None;
            let mut connected = None;
            for a in &addrs {
                match TcpStream::connect_timeout(a, Duration::from_secs(5)) {
                    Ok(s) => {
                        connected = Some(s);
                        break;
                    }
                    Err(e) => last = Some(e.to_string()),
                }
            }
            if let Some(s) = connected {
                break s;
            }
            if start.elapsed() > CONNECT_TIMEOUT {
                return Err(conduit_err(
                    &format!("connect to rank 0 at {host}:{port}"),
                    last.unwrap_or_else(|| "no address".into()),
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let _ = stream.set_nodelay(true);
        stream
            .write_all(&(me as u64).to_ne_bytes())
            .map_err(|e| conduit_err("hello", e))?;
        Self::spawn(me, shared, vec![(0, stream)])
    }

    fn spawn(
        me: usize,
        shared: Arc<Shared>,
        conns: Vec<(usize, TcpStream)>,
    ) -> Result<Watchdog, BridgeError> {
        let mut readers = Vec::with_capacity(conns.len());
        for (rank, s) in &conns {
            readers.push((*rank, s.try_clone().map_err(|e| conduit_err("clone", e))?));
        }
        let writers = Arc::new(Mutex::new(conns));
        let stop = Arc::new(AtomicBool::new(false));
        let watcher = Watcher {
            me,
            shared: shared.clone(),
            writers: writers.clone(),
            stop: stop.clone(),
        };
        let thread = std::thread::Builder::new()
            .name(format!("gasnet-bridge watchdog {me}"))
            .spawn(move || watcher.run(readers))
            .map_err(|e| conduit_err("thread", e))?;
        Ok(Watchdog {
            me,
            shared,
            writers,
            stop,
            thread: Some(thread),
        })
    }

    /// Tells every rank (through rank 0) that this rank's body failed with `message`, and
    /// waits a bounded time for rank 0 to confirm.
    pub(crate) fn report_failure(&self, message: &str) {
        let me = self.me;
        self.shared.fail(me, me, message.to_string());
        let line = format!("FAIL {me} {}\n", message.replace('\n', " | "));
        send_all(&self.writers, &line);
        if me != 0 {
            let start = Instant::now();
            while !self.shared.echoed.load(Ordering::Acquire) && start.elapsed() < ECHO_WAIT {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Leaves normally: says goodbye and stops watching (rank 0 first waits, boundedly, for
    /// everyone else's goodbye, so that nobody mistakes its leaving for a loss).
    pub(crate) fn shutdown(mut self) {
        self.shared.leaving.store(true, Ordering::Release);
        if self.me != 0 {
            send_all(&self.writers, "BYE\n");
        }
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn send_all(writers: &Mutex<Vec<(usize, TcpStream)>>, line: &str) {
    let mut w = writers.lock().unwrap_or_else(|e| e.into_inner());
    for (_, s) in w.iter_mut() {
        let _ = s.write_all(line.as_bytes());
    }
}

struct Watcher {
    me: usize,
    shared: Arc<Shared>,
    writers: Arc<Mutex<Vec<(usize, TcpStream)>>>,
    stop: Arc<AtomicBool>,
}

struct Peer {
    rank: usize,
    stream: TcpStream,
    buf: Vec<u8>,
    open: bool,
    said_bye: bool,
}

impl Watcher {
    fn run(self, readers: Vec<(usize, TcpStream)>) {
        let mut peers: Vec<Peer> = readers
            .into_iter()
            .map(|(rank, stream)| Peer {
                rank,
                stream,
                buf: Vec::new(),
                open: true,
                said_bye: false,
            })
            .collect();
        let term_fd = SIGTERM_READ.load(Ordering::Acquire);
        let mut term_at: Option<Instant> = None;
        let mut stop_at: Option<Instant> = None;
        loop {
            if self.stop.load(Ordering::Acquire) {
                let since = *stop_at.get_or_insert_with(Instant::now);
                // Rank 0 stays until everyone said goodbye (or 10 s passed).
                let waiting = self.me == 0
                    && peers.iter().any(|p| p.open && !p.said_bye)
                    && since.elapsed() < Duration::from_secs(10);
                if !waiting {
                    return;
                }
            }
            if let Some(t) = term_at {
                if self.shared.failure.is_failed() || t.elapsed() > TERM_GRACE {
                    self.exit_on_term();
                }
            }
            let mut fds: Vec<libc::pollfd> = peers
                .iter()
                .filter(|p| p.open)
                .map(|p| libc::pollfd {
                    fd: p.stream.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                })
                .collect();
            if term_fd >= 0 {
                fds.push(libc::pollfd {
                    fd: term_fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
            }
            // SAFETY: `fds` is a valid array of pollfd of the given length; the descriptors
            // are open (owned by `peers` or the process-wide pipe).
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 20) };
            if n <= 0 {
                continue;
            }
            if term_fd >= 0 && fds.last().is_some_and(|f| f.revents != 0) {
                let mut b = [0u8; 16];
                // SAFETY: reading into a local buffer from the non-blocking pipe.
                unsafe { libc::read(term_fd, b.as_mut_ptr().cast(), b.len()) };
                term_at.get_or_insert_with(Instant::now);
            }
            let ready: Vec<i32> = fds
                .iter()
                .filter(|f| f.revents != 0)
                .map(|f| f.fd)
                .collect();
            for peer in peers.iter_mut().filter(|p| p.open) {
                if !ready.contains(&peer.stream.as_raw_fd()) {
                    continue;
                }
                let mut chunk = [0u8; 4096];
                match peer.stream.read(&mut chunk) {
                    Ok(0) | Err(_) => {
                        peer.open = false;
                        self.closed(peer.rank, peer.said_bye);
                    }
                    Ok(k) => {
                        peer.buf.extend_from_slice(&chunk[..k]);
                        while let Some(end) = peer.buf.iter().position(|&b| b == b'\n') {
                            let line: Vec<u8> = peer.buf.drain(..=end).collect();
                            let line = String::from_utf8_lossy(&line[..end]).into_owned();
                            if line == "BYE" {
                                peer.said_bye = true;
                            } else {
                                self.line(&line);
                            }
                        }
                    }
                }
            }
        }
    }

    fn closed(&self, rank: usize, said_bye: bool) {
        if said_bye || (rank == 0 && self.shared.leaving.load(Ordering::Acquire)) {
            return;
        }
        let message = format!(
            "rank {rank} was lost: its process ended without leaving the job (killed, or \
             crashed)"
        );
        if self.me == 0 {
            send_all(&self.writers, &format!("LOST {rank}\n"));
        }
        self.shared.fail(self.me, rank, message);
    }

    fn line(&self, line: &str) {
        let mut parts = line.splitn(3, ' ');
        let (kind, rank) = (parts.next(), parts.next().and_then(|r| r.parse().ok()));
        let Some(rank) = rank else { return };
        match kind {
            Some("FAIL") => {
                let message = parts.next().unwrap_or("").to_string();
                if self.me == 0 {
                    send_all(&self.writers, &format!("{line}\n"));
                }
                if rank == self.me {
                    self.shared.echoed.store(true, Ordering::Release);
                } else {
                    self.shared
                        .fail(self.me, rank, format!("panicked: {message}"));
                }
            }
            Some("LOST") => self.shared.fail(
                self.me,
                rank,
                format!(
                    "rank {rank} was lost: its process ended without leaving the job \
                     (killed, or crashed)"
                ),
            ),
            _ => {}
        }
    }

    fn exit_on_term(&self) -> ! {
        let me = self.me;
        let code = match self.shared.failure.first() {
            Some((rank, message)) => {
                eprintln!(
                    "gasnet-bridge (mpi conduit): rank {me}: terminated by the launcher after \
                     rank {rank} failed: {message}"
                );
                1
            }
            None => {
                eprintln!(
                    "gasnet-bridge (mpi conduit): rank {me}: terminated by SIGTERM; no rank \
                     failure was reported to this rank"
                );
                143
            }
        };
        // SAFETY: _exit ends the process at once; MPI cannot be finalized in this state.
        unsafe { libc::_exit(code) }
    }
}
