//! Failure detection for the mpi conduit: a tree of TCP connections between the rank
//! processes of a job.
//!
//! MPI itself offers no portable way to learn that a peer died: Open MPI's launcher notices
//! and kills the job about a second later with SIGTERM then SIGKILL, and until then a rank
//! waiting on the dead one just waits. So every job connects its ranks in a tree of fan-out
//! [`FANOUT`] (rank `r`'s parent is `(r - 1) / FANOUT`): each rank keeps at most `FANOUT + 1`
//! sockets and one thread, whatever the job's size, and news crosses the tree in
//! `log_FANOUT(ranks)` hops. Ranks with children listen (on the loopback address when all
//! their children share their host, see `handshake.rs`); the addresses are exchanged over MPI,
//! and every connection is authenticated with the job's secret (`handshake.rs`). A listener
//! stays open for the job's life: anything else that connects is refused and reported on
//! stderr, and the job goes on. Any local user can connect, so a stranger can neither hold up
//! the start-up or the watchdog (greetings are read side by side, each within a deadline, a
//! bounded number at once, `lobby.rs`) nor flood stderr (`refusals.rs`).
//!
//! The kernel closes a process's sockets however it ends, SIGKILL included, so:
//!
//! * a connection that reaches end-of-file without a `BYE` line means its rank is lost: the
//!   neighbour floods `LOST r` through the tree (each rank passes a line on to every neighbour
//!   but the one it came from; a tree has no cycles, so each rank hears it once). A lost rank
//!   in the middle of the tree splits it, and each part learns of the loss from its side;
//! * a rank whose body panics floods `FAIL r message`; each neighbour answers `ECHO r` after
//!   passing it on, and the failing rank waits (at most [`ECHO_WAIT`]) for those echoes
//!   before it returns, so the news is out before its process can exit. Per-connection FIFO
//!   and the tree's unique paths mean every rank hears the `FAIL` before any `LOST` of the
//!   same rank.
//!
//! A rank that ends the job deliberately (its body unwinds with
//! [`Stopped`](crate::failure::Stopped): the program reports the error itself, once) floods
//! `STOP r message` instead of `FAIL`, answered and passed on the same way; the other ranks
//! record it and unwind like after a `FAIL`, but print nothing, neither now nor when the
//! deadline or a SIGTERM ends them (they exit with status 1 then).
//!
//! On the first failure the watchdog prints a line naming the failed rank to stderr, records
//! it (waiting calls on the rank thread then unwind and `launch` returns the error), and arms
//! a deadline: the process ends with status 1 after [`EXIT_DEADLINE`] if it has not ended by
//! itself (a rank stuck inside an MPI call never returns). A SIGTERM from the launcher is
//! turned into the same orderly exit: if the cause is not known yet, the watchdog waits up
//! to [`TERM_GRACE`] for it, then exits with 143. Everything ends well within 10 s.
//!
//! Leaving normally, every rank sends `BYE` to its neighbours, then stays (at most 10 s) until
//! each neighbour has said `BYE` too, so that nobody mistakes a neighbour's leaving for a loss.
//!
//! A host that vanishes without closing its connections (power loss) is not detected here;
//! that is left to the launcher. The secret travels in clear inside the greeting: it keeps out
//! other users' processes and stray connections, not an attacker who can read the job's
//! network traffic.

mod backoff;
mod handshake;
mod lobby;
mod poll;
mod refusals;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ::mpi::ffi;

use crate::error::BridgeError;
use crate::failure::Failure;
use crate::sleep::Sleeper;

use super::calls::{allgather_text, check, uint8};
use super::emulated_hosts;
use super::process::SIGTERM_READ;
use handshake::{Refusal, Secret};
use lobby::Lobby;
use poll::poll;
use refusals::RefusalLog;

/// Children per rank in the watchdog's tree.
pub const FANOUT: usize = 8;
/// How long a panicking rank waits for its neighbours to confirm that the failure was passed on.
pub(crate) const ECHO_WAIT: Duration = Duration::from_secs(2);
/// How long after a failure the process is ended if it has not ended by itself.
pub(crate) const EXIT_DEADLINE: Duration = Duration::from_secs(5);
/// With ULFM, how long after a lost process this process is ended if it has not ended by
/// itself: the recovery it joins has a deadline of its own from the moment the rank thread
/// reaches it, and this one bounds a rank thread that never does.
#[cfg(feature = "ulfm")]
pub(crate) const LOSS_DEADLINE: Duration = Duration::from_secs(30);
/// How long a SIGTERM waits for the name of the failed rank before exiting anyway.
pub(crate) const TERM_GRACE: Duration = Duration::from_millis(700);
/// How long connecting the tree may take at start-up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(60);
/// Bytes of one rank's published listening address (`ip:port`, nul-padded).
const ADDR_LEN: usize = 64;
/// Environment variable: when `1`, each listening rank prints its address on stderr.
const VERBOSE_ENV: &str = "PGAS_MPI_WATCHDOG_VERBOSE";
/// Environment variable, for tests of the start-up against strangers: milliseconds a rank
/// waits before connecting to its parent, so that a test can connect first.
const CONNECT_DELAY_ENV: &str = "PGAS_MPI_WATCHDOG_CONNECT_DELAY_MS";

/// Rank `r`'s parent in the tree.
fn parent(r: usize) -> Option<usize> {
    (r > 0).then(|| (r - 1) / FANOUT)
}

/// Rank `r`'s children in a tree of `ranks` ranks.
fn children(r: usize, ranks: usize) -> std::ops::Range<usize> {
    let first = (r * FANOUT + 1).min(ranks);
    first..(first + FANOUT).min(ranks)
}

/// What the rank thread and the watchdog thread share.
#[derive(Debug, Default)]
pub(crate) struct Shared {
    pub(crate) failure: Failure,
    /// The rank thread's sleeper; woken when a failure is recorded.
    pub(crate) sleeper: Sleeper,
    /// Neighbours that confirmed this rank's own FAIL (and passed it on).
    echoes: AtomicUsize,
    /// Neighbours whose connection closed.
    closed: AtomicUsize,
    /// This rank is leaving normally: end-of-file from a neighbour is expected now.
    leaving: AtomicBool,
    deadline_armed: AtomicBool,
    /// The first failure was a deliberate stop (`STOP`), already reported by the program:
    /// nothing about it is printed.
    stopped: AtomicBool,
    /// Set when a recovery took the job over (`disarm`): the exit deadline a loss armed
    /// then does nothing when it expires.
    disarmed: Arc<AtomicBool>,
}

impl Shared {
    /// The state of a rank whose thread waits with `sleeper`.
    pub(crate) fn with_sleeper(sleeper: Sleeper) -> Self {
        Shared {
            sleeper,
            ..Shared::default()
        }
    }

    /// Records a failure (the first one wins), says so on stderr (unless it is a deliberate
    /// stop, `stopped`) and arms the exit deadline.
    pub(crate) fn fail(&self, me: usize, rank: usize, message: String, stopped: bool) {
        let first = !self.failure.is_failed();
        if first && stopped {
            self.stopped.store(true, Ordering::Release);
        }
        // With ULFM a lost process is answered by the recovery, which reports it.
        let recovering = cfg!(feature = "ulfm") && message == lost_message(rank);
        #[cfg(feature = "ulfm")]
        let deadline = if recovering {
            LOSS_DEADLINE
        } else {
            EXIT_DEADLINE
        };
        #[cfg(not(feature = "ulfm"))]
        let deadline = EXIT_DEADLINE;
        if first && rank != me && !stopped && !recovering {
            crate::stderr_line::stderr_line(format_args!(
                "gasnet-bridge (mpi conduit): rank {me}: rank {rank} failed: {message}; \
                 this rank gives up"
            ));
        }
        self.failure.record(rank, message);
        self.sleeper.wake();
        if !self.deadline_armed.swap(true, Ordering::AcqRel) {
            let info = self.failure.first();
            let quiet = self.stopped.load(Ordering::Acquire);
            let disarmed = self.disarmed.clone();
            let _ = std::thread::Builder::new()
                .name("gasnet-bridge exit deadline".into())
                .spawn(move || {
                    std::thread::sleep(deadline);
                    if disarmed.load(Ordering::Acquire) {
                        return;
                    }
                    let (rank, message) = info.unwrap_or((rank, String::new()));
                    if !quiet {
                        crate::stderr_line::stderr_line(format_args!(
                            "gasnet-bridge (mpi conduit): rank {me}: ending the process {} s \
                             after rank {rank} failed ({message})",
                            deadline.as_secs()
                        ));
                    }
                    crate::exit_cleanup::run();
                    // SAFETY: _exit ends the process at once; nothing of ours needs running.
                    unsafe { libc::_exit(1) };
                });
        }
    }
}

impl Shared {
    /// Cancels the exit deadline a failure armed (or will arm): a recovery rebuilt the job,
    /// and this state belongs to the job before it.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(crate) fn disarm(&self) {
        self.disarmed.store(true, Ordering::Release);
    }
}

/// One job's watchdog: the connections and the thread that watches them.
#[derive(Debug)]
pub(crate) struct Watchdog {
    me: usize,
    pub(crate) shared: Arc<Shared>,
    /// The connections to this rank's neighbours in the tree, by their rank.
    writers: Arc<Mutex<Vec<(usize, TcpStream)>>>,
    stop: Arc<AtomicBool>,
    /// Leave at once, without `BYE` and without waiting for the neighbours' (`abandon`).
    abandon: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn conduit_err(what: &str, e: impl std::fmt::Display) -> BridgeError {
    BridgeError::Conduit(format!("failure detector: {what}: {e}"))
}

/// Broadcasts `bytes` from rank 0 over `comm` (collective).
fn bcast(comm: ffi::MPI_Comm, bytes: &mut [u8], what: &str) -> Result<(), BridgeError> {
    // SAFETY: `bytes` is a live buffer of the given length on every rank; `comm` is valid.
    let rc = unsafe {
        ffi::MPI_Bcast(
            bytes.as_mut_ptr().cast(),
            bytes.len() as i32,
            uint8(),
            0,
            comm,
        )
    };
    check(rc, what)
}

/// Every rank's published listening address (empty for ranks without children).
fn exchange_addresses(
    comm: ffi::MPI_Comm,
    ranks: usize,
    mine: Option<SocketAddr>,
) -> Result<Vec<Option<SocketAddr>>, BridgeError> {
    let text = mine.map(|a| a.to_string()).unwrap_or_default();
    let all = allgather_text(
        comm,
        ranks,
        &text,
        ADDR_LEN,
        "MPI_Allgather(watchdog addresses)",
    )?;
    Ok(all.iter().map(|t| t.parse().ok()).collect())
}

/// Connects to the parent at `addr` and greets it.
fn connect_parent(me: usize, addr: SocketAddr, secret: &Secret) -> Result<TcpStream, BridgeError> {
    let start = Instant::now();
    let mut stream = loop {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(s) => break s,
            Err(e) if start.elapsed() > CONNECT_TIMEOUT => {
                return Err(conduit_err(&format!("connect to the parent at {addr}"), e));
            }
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let _ = stream.set_nodelay(true);
    stream
        .write_all(&handshake::hello(me, secret))
        .map_err(|e| conduit_err("greeting the parent", e))?;
    Ok(stream)
}

/// Accepts this rank's children in `lobby`, refusing and reporting anything else, within
/// [`CONNECT_TIMEOUT`] in all.
fn accept_children(
    me: usize,
    ranks: usize,
    lobby: &mut Lobby,
    secret: &Secret,
    log: &mut RefusalLog,
) -> Result<Vec<(usize, TcpStream)>, BridgeError> {
    let expected = children(me, ranks);
    let mut conns: Vec<(usize, TcpStream)> = Vec::with_capacity(expected.len());
    let start = Instant::now();
    while conns.len() < expected.len() {
        if start.elapsed() > CONNECT_TIMEOUT {
            let cause = lobby
                .last_error()
                .map_or_else(String::new, |e| format!(" (last accept error: {e})"));
            return Err(conduit_err(
                "accept",
                format!(
                    "only {} of rank {me}'s {} children connected within {} s{cause}",
                    conns.len(),
                    expected.len(),
                    CONNECT_TIMEOUT.as_secs()
                ),
            ));
        }
        let mut fds = Vec::new();
        lobby.watch(Instant::now(), &mut fds);
        poll(&mut fds);
        let now = Instant::now();
        for g in lobby.step(&fds, now, log) {
            let judged = handshake::verify(&g.hello, secret).and_then(|r| {
                usize::try_from(r)
                    .ok()
                    .filter(|r| expected.contains(r) && !conns.iter().any(|c| c.0 == *r))
                    .ok_or(Refusal::Unexpected(r))
            });
            match judged {
                Ok(child) => {
                    g.stream
                        .set_nonblocking(false)
                        .map_err(|e| conduit_err("accept", e))?;
                    let _ = g.stream.set_nodelay(true);
                    conns.push((child, g.stream));
                }
                Err(why) => log.refused(g.from, &why, now),
            }
        }
        log.tick(now);
    }
    Ok(conns)
}

impl Watchdog {
    /// Connects the job's ranks in the tree (collective over `comm`); `hosts[r]` is rank `r`'s
    /// host name.
    pub(crate) fn start(
        comm: ffi::MPI_Comm,
        me: usize,
        hosts: &[String],
        shared: Arc<Shared>,
    ) -> Result<Watchdog, BridgeError> {
        let ranks = hosts.len();
        let mut secret: Secret = if me == 0 {
            handshake::new_secret()?
        } else {
            [0; handshake::SECRET_LEN]
        };
        bcast(comm, &mut secret, "MPI_Bcast(watchdog secret)")?;
        let kids = children(me, ranks);
        let mut lobby = if kids.is_empty() {
            None
        } else {
            // Emulated hosts share the machine: their loopback address reaches them.
            let machine = |r: usize| emulated_hosts::machine(&hosts[r]);
            let elsewhere = kids.clone().any(|c| machine(c) != machine(me));
            let ip = handshake::listen_ip(machine(me), elsewhere)?;
            let l = TcpListener::bind((ip, 0)).map_err(|e| conduit_err("bind", e))?;
            Some(Lobby::new(l).map_err(|e| conduit_err("listen", e))?)
        };
        let mine = match &lobby {
            Some(l) => Some(
                l.local_addr()
                    .map_err(|e| conduit_err("local address", e))?,
            ),
            None => None,
        };
        if let Some(a) = mine.filter(|_| std::env::var(VERBOSE_ENV).is_ok_and(|v| v == "1")) {
            crate::stderr_line::stderr_line(format_args!(
                "gasnet-bridge (mpi conduit): rank {me}: watchdog listening on {a}"
            ));
        }
        let addrs = exchange_addresses(comm, ranks, mine)?;
        let mut conns = Vec::new();
        if let Some(p) = parent(me) {
            if let Some(ms) = std::env::var(CONNECT_DELAY_ENV)
                .ok()
                .and_then(|v| v.trim().parse().ok())
            {
                std::thread::sleep(Duration::from_millis(ms));
            }
            let addr = addrs[p]
                .ok_or_else(|| conduit_err("connect", format!("rank {p} published no address")))?;
            conns.push((p, connect_parent(me, addr, &secret)?));
        }
        let mut log = RefusalLog::new(me);
        if let Some(l) = &mut lobby {
            conns.extend(accept_children(me, ranks, l, &secret, &mut log)?);
        }
        Self::spawn(me, shared, conns, lobby, log, secret)
    }

    fn spawn(
        me: usize,
        shared: Arc<Shared>,
        conns: Vec<(usize, TcpStream)>,
        lobby: Option<Lobby>,
        log: RefusalLog,
        secret: Secret,
    ) -> Result<Watchdog, BridgeError> {
        let mut readers = Vec::with_capacity(conns.len());
        for (rank, s) in &conns {
            readers.push((*rank, s.try_clone().map_err(|e| conduit_err("clone", e))?));
        }
        let writers = Arc::new(Mutex::new(conns));
        let stop = Arc::new(AtomicBool::new(false));
        let abandon = Arc::new(AtomicBool::new(false));
        let watcher = Watcher {
            me,
            shared: shared.clone(),
            writers: writers.clone(),
            stop: stop.clone(),
            abandon: abandon.clone(),
            secret,
        };
        let thread = std::thread::Builder::new()
            .name(format!("gasnet-bridge watchdog {me}"))
            .spawn(move || watcher.run(readers, lobby, log))
            .map_err(|e| conduit_err("thread", e))?;
        Ok(Watchdog {
            me,
            shared,
            writers,
            stop,
            abandon,
            thread: Some(thread),
        })
    }

    /// Tells every rank (through the tree) that this rank's body failed with `message` (or,
    /// when `stopped`, ended the job deliberately: the others then print nothing), and waits a
    /// bounded time for its neighbours to confirm.
    pub(crate) fn report_failure(&self, message: &str, stopped: bool) {
        let me = self.me;
        self.shared.fail(me, me, message.to_string(), stopped);
        let kind = if stopped { "STOP" } else { "FAIL" };
        let line = format!("{kind} {me} {}\n", message.replace('\n', " | "));
        let links = send_all(&self.writers, &line, None);
        let start = Instant::now();
        while self.shared.echoes.load(Ordering::Acquire)
            + self.shared.closed.load(Ordering::Acquire)
            < links
            && start.elapsed() < ECHO_WAIT
        {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Leaves normally: says goodbye and stops watching (after every neighbour said goodbye
    /// too, boundedly, so that nobody mistakes this rank's leaving for a loss).
    pub(crate) fn shutdown(mut self) {
        self.shared.leaving.store(true, Ordering::Release);
        send_all(&self.writers, "BYE\n", None);
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Watchdog {
    /// Leaves a tree that a loss broke, for a recovery that connects a new one: no `BYE`
    /// (the neighbours leave it too, each on its own), no wait for theirs, the exit deadline
    /// the loss armed cancelled, the thread joined (within one poll round) and the
    /// connections closed. A neighbour's end-of-file seen meanwhile is not news any more.
    #[cfg_attr(not(feature = "ulfm"), allow(dead_code))]
    pub(crate) fn abandon(mut self) {
        self.shared.leaving.store(true, Ordering::Release);
        self.shared.disarm();
        self.abandon.store(true, Ordering::Release);
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Writes `line` to every neighbour but `except`; returns how many connections there are.
fn send_all(writers: &Mutex<Vec<(usize, TcpStream)>>, line: &str, except: Option<usize>) -> usize {
    let mut w = writers.lock().unwrap_or_else(|e| e.into_inner());
    for (rank, s) in w.iter_mut() {
        if Some(*rank) != except {
            let _ = s.write_all(line.as_bytes());
        }
    }
    w.len()
}

/// Writes `line` to neighbour `to`.
fn send_to(writers: &Mutex<Vec<(usize, TcpStream)>>, line: &str, to: usize) {
    let mut w = writers.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, s)) = w.iter_mut().find(|(r, _)| *r == to) {
        let _ = s.write_all(line.as_bytes());
    }
}

struct Watcher {
    me: usize,
    shared: Arc<Shared>,
    writers: Arc<Mutex<Vec<(usize, TcpStream)>>>,
    stop: Arc<AtomicBool>,
    abandon: Arc<AtomicBool>,
    secret: Secret,
}

struct Peer {
    rank: usize,
    stream: TcpStream,
    buf: Vec<u8>,
    open: bool,
    said_bye: bool,
}

impl Watcher {
    fn run(self, readers: Vec<(usize, TcpStream)>, mut lobby: Option<Lobby>, mut log: RefusalLog) {
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
            if self.abandon.load(Ordering::Acquire) {
                return;
            }
            if self.stop.load(Ordering::Acquire) {
                let since = *stop_at.get_or_insert_with(Instant::now);
                // Stay until every neighbour said goodbye (or 10 s passed).
                let waiting = peers.iter().any(|p| p.open && !p.said_bye)
                    && since.elapsed() < Duration::from_secs(10);
                if !waiting {
                    log.finish();
                    return;
                }
            }
            if let Some(t) = term_at {
                if self.shared.failure.is_failed() || t.elapsed() > TERM_GRACE {
                    self.exit_on_term();
                }
            }
            let watch = |fd: i32| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            let mut fds: Vec<libc::pollfd> = peers
                .iter()
                .filter(|p| p.open)
                .map(|p| watch(p.stream.as_raw_fd()))
                .chain((term_fd >= 0).then(|| watch(term_fd)))
                .collect();
            let own = fds.len();
            if let Some(l) = &lobby {
                l.watch(Instant::now(), &mut fds);
            }
            poll(&mut fds);
            let (own_fds, lobby_fds) = fds.split_at(own);
            let ready = |fd: i32| own_fds.iter().any(|f| f.fd == fd && f.revents != 0);
            if term_fd >= 0 && ready(term_fd) {
                let mut b = [0u8; 16];
                // SAFETY: reading into a local buffer from the non-blocking pipe.
                unsafe { libc::read(term_fd, b.as_mut_ptr().cast(), b.len()) };
                term_at.get_or_insert_with(Instant::now);
            }
            let now = Instant::now();
            if let Some(l) = &mut lobby {
                // The tree is complete: every greeting is refused, even with the secret.
                for g in l.step(lobby_fds, now, &mut log) {
                    let why = match handshake::verify(&g.hello, &self.secret) {
                        Ok(r) => Refusal::Unexpected(r),
                        Err(why) => why,
                    };
                    log.refused(g.from, &why, now);
                }
            }
            log.tick(now);
            for peer in peers.iter_mut() {
                if peer.open && ready(peer.stream.as_raw_fd()) {
                    self.read_peer(peer);
                }
            }
        }
    }

    fn read_peer(&self, peer: &mut Peer) {
        let mut chunk = [0u8; 4096];
        match peer.stream.read(&mut chunk) {
            Ok(0) | Err(_) => {
                peer.open = false;
                self.shared.closed.fetch_add(1, Ordering::AcqRel);
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
                        self.line(peer.rank, &line);
                    }
                }
            }
        }
    }

    fn closed(&self, rank: usize, said_bye: bool) {
        if said_bye || self.shared.leaving.load(Ordering::Acquire) {
            return;
        }
        send_all(&self.writers, &format!("LOST {rank}\n"), Some(rank));
        self.shared.fail(self.me, rank, lost_message(rank), false);
    }

    /// Handles a line from neighbour `from`, passing failures on to the other neighbours.
    fn line(&self, from: usize, line: &str) {
        let mut parts = line.splitn(3, ' ');
        let (kind, rank) = (parts.next(), parts.next().and_then(|r| r.parse().ok()));
        let Some(rank) = rank else { return };
        match kind {
            Some(kind @ ("FAIL" | "STOP")) => {
                let message = parts.next().unwrap_or("").to_string();
                send_all(&self.writers, &format!("{line}\n"), Some(from));
                if from == rank {
                    send_to(&self.writers, &format!("ECHO {rank}\n"), from);
                }
                if rank != self.me {
                    // The panic message as the rank gave it (launch's error says "panicked").
                    self.shared.fail(self.me, rank, message, kind == "STOP");
                }
            }
            Some("LOST") => {
                send_all(&self.writers, &format!("{line}\n"), Some(from));
                self.shared.fail(self.me, rank, lost_message(rank), false);
            }
            Some("ECHO") if rank == self.me => {
                self.shared.echoes.fetch_add(1, Ordering::AcqRel);
            }
            _ => {}
        }
    }

    fn exit_on_term(&self) -> ! {
        let me = self.me;
        let code = match self.shared.failure.first() {
            // A deliberate stop was reported by the program that stopped.
            Some(_) if self.shared.stopped.load(Ordering::Acquire) => 1,
            Some((rank, message)) => {
                crate::stderr_line::stderr_line(format_args!(
                    "gasnet-bridge (mpi conduit): rank {me}: terminated by the launcher after \
                     rank {rank} failed: {message}"
                ));
                1
            }
            None => {
                crate::stderr_line::stderr_line(format_args!(
                    "gasnet-bridge (mpi conduit): rank {me}: terminated by SIGTERM; no rank \
                     failure was reported to this rank"
                ));
                143
            }
        };
        crate::exit_cleanup::run();
        // SAFETY: _exit ends the process at once; MPI cannot be finalized in this state.
        unsafe { libc::_exit(code) }
    }
}

pub(crate) fn lost_message(rank: usize) -> String {
    format!("rank {rank} was lost: its process ended without leaving the job (killed, or crashed)")
}
