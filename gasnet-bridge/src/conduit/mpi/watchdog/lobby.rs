//! Where connections wait for their greeting: the watchdog's listener and the connections
//! it accepted that have not sent a whole greeting yet.
//!
//! Anyone on the host can connect to a listening watchdog, so no connection may hold up
//! another or the watchdog itself. Every socket here is non-blocking and watched by the
//! caller's `poll`, at start-up as during the run:
//!
//! * each connection has [`GREETING_DEADLINE`] from its accept to send its whole greeting,
//!   however it spreads the bytes;
//! * a quarter of the process's descriptor limit (at least [`WAITING_MIN`], at most
//!   [`WAITING_MAX`]) may wait at once; a newcomer over that cap closes the oldest one. A rank
//!   writes its greeting right after its connect, so by the time it is accepted the greeting
//!   is usually there and it never waits; otherwise it is read on its first readiness, while
//!   the strangers ahead of it are the ones closed;
//! * one round accepts at most [`ACCEPT_BATCH`] connections, so a flood cannot keep the
//!   watchdog from its neighbours;
//! * a failing `accept` pauses the listener ([`Backoff`]) instead of spinning on it, and when
//!   descriptors ran out the oldest waiting connection is closed so that the queue moves.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use super::backoff::Backoff;
use super::handshake::{self, HELLO_LEN, Refusal};
use super::refusals::RefusalLog;

/// How long a new connection has, from its accept, to send its whole greeting.
const GREETING_DEADLINE: Duration = Duration::from_secs(2);
/// The most connections that wait for their greeting at once.
const WAITING_MAX: usize = 1024;
/// The fewest, whatever the descriptor limit.
const WAITING_MIN: usize = 16;
/// The most connections one round accepts.
const ACCEPT_BATCH: usize = 64;

/// A whole greeting (its magic checked, nothing else) and the connection it came on.
#[derive(Debug)]
pub(super) struct Greeting {
    pub(super) stream: TcpStream,
    pub(super) from: SocketAddr,
    pub(super) hello: [u8; HELLO_LEN],
}

/// A connection accepted, not greeted yet.
#[derive(Debug)]
struct Waiting {
    stream: TcpStream,
    from: SocketAddr,
    buf: [u8; HELLO_LEN],
    got: usize,
    since: Instant,
}

impl Waiting {
    /// Reads what has arrived: `Ok(true)` once the greeting is whole, `Ok(false)` while more
    /// is due, an error as soon as the connection cannot be a greeting.
    fn read(&mut self) -> Result<bool, Refusal> {
        while self.got < HELLO_LEN {
            match self.stream.read(&mut self.buf[self.got..]) {
                Ok(0) => return Err(Refusal::Closed(self.got)),
                Ok(k) => {
                    self.got += k;
                    handshake::check_prefix(&self.buf[..self.got])?;
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Err(Refusal::Closed(self.got)),
            }
        }
        Ok(true)
    }
}

/// A listener and the connections waiting on it.
#[derive(Debug)]
pub(super) struct Lobby {
    listener: TcpListener,
    waiting: VecDeque<Waiting>,
    cap: usize,
    backoff: Backoff,
    /// The last error `accept` returned, for the start-up's error message.
    last_error: Option<std::io::Error>,
}

impl Lobby {
    /// Waits for connections on `listener`.
    pub(super) fn new(listener: TcpListener) -> std::io::Result<Self> {
        listener.set_nonblocking(true)?;
        Ok(Lobby {
            listener,
            waiting: VecDeque::new(),
            cap: (descriptor_limit() / 4).clamp(WAITING_MIN, WAITING_MAX),
            backoff: Backoff::new(),
            last_error: None,
        })
    }

    /// The address connections come to.
    pub(super) fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// How many connections wait for their greeting.
    #[cfg(test)]
    pub(super) fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The last error `accept` returned, if any.
    pub(super) fn last_error(&self) -> Option<&std::io::Error> {
        self.last_error.as_ref()
    }

    /// Appends what to poll at `now`: the listener (unless it is paused), then each waiting
    /// connection. The caller polls them and hands the same entries to [`Lobby::step`].
    pub(super) fn watch(&self, now: Instant, fds: &mut Vec<libc::pollfd>) {
        let watch = |fd: i32| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        if self.backoff.ready(now) {
            fds.push(watch(self.listener.as_raw_fd()));
        }
        fds.extend(self.waiting.iter().map(|w| watch(w.stream.as_raw_fd())));
    }

    /// One round after a poll of what [`Lobby::watch`] appended (`polled`): reads the ready
    /// connections, refuses the late ones, accepts new ones; returns the whole greetings
    /// (which leave the lobby). Refusals go to `log`.
    pub(super) fn step(
        &mut self,
        polled: &[libc::pollfd],
        now: Instant,
        log: &mut RefusalLog,
    ) -> Vec<Greeting> {
        let listener_fd = self.listener.as_raw_fd();
        let (listener_ready, rest) = match polled.split_first() {
            Some((l, rest)) if l.fd == listener_fd => (l.revents != 0, rest),
            _ => (false, polled),
        };
        let mut greetings = Vec::new();
        let before = std::mem::take(&mut self.waiting);
        for (i, mut w) in before.into_iter().enumerate() {
            let ready = rest
                .get(i)
                .is_some_and(|p| p.fd == w.stream.as_raw_fd() && p.revents != 0);
            let verdict = if ready { w.read() } else { Ok(false) };
            match verdict {
                Ok(false) if now.duration_since(w.since) > GREETING_DEADLINE => {
                    log.refused(w.from, &Refusal::Silent, now);
                }
                Ok(false) => self.waiting.push_back(w),
                Ok(true) => greetings.push(Greeting {
                    stream: w.stream,
                    from: w.from,
                    hello: w.buf,
                }),
                Err(why) => log.refused(w.from, &why, now),
            }
        }
        if listener_ready {
            self.accept(now, log, &mut greetings);
        }
        greetings
    }

    /// Accepts up to [`ACCEPT_BATCH`] connections, reading each at once.
    fn accept(&mut self, now: Instant, log: &mut RefusalLog, greetings: &mut Vec<Greeting>) {
        for _ in 0..ACCEPT_BATCH {
            match self.listener.accept() {
                Ok((stream, from)) => {
                    if stream.set_nonblocking(true).is_err() {
                        log.refused(from, &Refusal::Closed(0), now);
                        continue;
                    }
                    let mut w = Waiting {
                        stream,
                        from,
                        buf: [0; HELLO_LEN],
                        got: 0,
                        since: now,
                    };
                    match w.read() {
                        Ok(true) => greetings.push(Greeting {
                            stream: w.stream,
                            from,
                            hello: w.buf,
                        }),
                        Ok(false) => {
                            if self.waiting.len() >= self.cap {
                                self.drop_oldest(now, log);
                            }
                            self.waiting.push_back(w);
                        }
                        Err(why) => log.refused(from, &why, now),
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    self.backoff.drained();
                    return;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Interrupted | ErrorKind::ConnectionAborted
                    ) => {}
                Err(e) => {
                    if matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE)) {
                        self.drop_oldest(now, log);
                    }
                    self.backoff.failed(now);
                    self.last_error = Some(e);
                    return;
                }
            }
        }
    }

    /// Closes the connection that has waited longest.
    fn drop_oldest(&mut self, now: Instant, log: &mut RefusalLog) {
        if let Some(w) = self.waiting.pop_front() {
            log.refused(w.from, &Refusal::Crowded, now);
        }
    }
}

/// The process's soft limit on open file descriptors.
fn descriptor_limit() -> usize {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one rlimit into the local `lim`, which outlives the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return 1024;
    }
    usize::try_from(lim.rlim_cur).unwrap_or(usize::MAX)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::Ipv4Addr;

    use super::super::poll::poll;
    use super::*;

    fn lobby() -> Lobby {
        Lobby::new(TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap()).unwrap()
    }

    /// Polls and steps `lobby` as the watchdog does, with `now` as the time of the round,
    /// until `done` or 5 s; returns the greetings and the rounds taken.
    fn run(
        lobby: &mut Lobby,
        now: impl Fn() -> Instant,
        mut done: impl FnMut(&Lobby, &[Greeting]) -> bool,
    ) -> (Vec<Greeting>, usize) {
        let mut log = RefusalLog::new(0);
        let mut got = Vec::new();
        let start = Instant::now();
        let mut rounds = 0;
        while !done(lobby, &got) && start.elapsed() < Duration::from_secs(5) {
            let mut fds = Vec::new();
            lobby.watch(now(), &mut fds);
            poll(&mut fds);
            got.extend(lobby.step(&fds, now(), &mut log));
            rounds += 1;
        }
        (got, rounds)
    }

    /// Whether the other end of `s` closed it (end of file, or reset, within a second).
    fn closed(s: &mut TcpStream) -> bool {
        s.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
        match s.read(&mut [0u8; 1]) {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => e.kind() == ErrorKind::ConnectionReset,
        }
    }

    #[test]
    fn a_greeting_gets_past_strangers_whose_deadline_spans_all_their_reads() {
        let mut lobby = lobby();
        let addr = lobby.local_addr().unwrap();
        let mut dripping = TcpStream::connect(addr).unwrap();
        dripping.write_all(&handshake::MAGIC).unwrap();
        let mut silent = TcpStream::connect(addr).unwrap();
        let t0 = Instant::now();
        let (_, _) = run(&mut lobby, || t0, |l, _| l.waiting() == 2);
        assert_eq!(lobby.waiting(), 2);
        let mut rank = TcpStream::connect(addr).unwrap();
        rank.write_all(&handshake::hello(1, &[9; handshake::SECRET_LEN]))
            .unwrap();
        let (got, _) = run(&mut lobby, || t0, |_, g| !g.is_empty());
        assert_eq!(
            got.len(),
            1,
            "the rank's greeting, while the strangers wait"
        );
        assert_eq!(
            got[0].hello,
            handshake::hello(1, &[9; handshake::SECRET_LEN])
        );
        assert_eq!(lobby.waiting(), 2);
        // One more byte just before the deadline keeps the dripping stranger waiting, but
        // not past the deadline: it counts from the accept, not from the last byte.
        dripping.write_all(&[0]).unwrap();
        let almost = t0 + GREETING_DEADLINE - Duration::from_millis(100);
        let start = Instant::now();
        let (_, rounds) = run(
            &mut lobby,
            || almost,
            |_, _| start.elapsed() > Duration::from_millis(100),
        );
        assert!(rounds > 0);
        assert_eq!(lobby.waiting(), 2);
        dripping.write_all(&[0]).unwrap();
        let late = t0 + GREETING_DEADLINE + Duration::from_millis(100);
        run(&mut lobby, || late, |l, _| l.waiting() == 0);
        assert_eq!(lobby.waiting(), 0);
        assert!(closed(&mut dripping) && closed(&mut silent));
    }

    #[test]
    fn a_newcomer_over_the_cap_closes_the_oldest() {
        let mut lobby = lobby();
        lobby.cap = 4;
        let addr = lobby.local_addr().unwrap();
        let mut strangers = Vec::new();
        for _ in 0..6 {
            strangers.push(TcpStream::connect(addr).unwrap());
            let start = Instant::now();
            run(&mut lobby, Instant::now, |_, _| {
                start.elapsed() > Duration::from_millis(50)
            });
        }
        assert_eq!(lobby.waiting(), 4);
        assert!(closed(&mut strangers[0]) && closed(&mut strangers[1]));
        assert!(!closed(&mut strangers[2]));
        let mut rank = TcpStream::connect(addr).unwrap();
        rank.write_all(&handshake::hello(1, &[9; handshake::SECRET_LEN]))
            .unwrap();
        let (got, _) = run(&mut lobby, Instant::now, |_, g| !g.is_empty());
        assert_eq!(got.len(), 1, "a rank gets in while the lobby is full");
    }

    /// Runs [`at_the_descriptor_limit`] in a process of its own: it lowers the process's
    /// descriptor limit.
    #[test]
    fn accept_failures_back_off_and_free_a_descriptor() {
        let path = module_path!().split_once("::").unwrap().1;
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", &format!("{path}::at_the_descriptor_limit")])
            .args(["--ignored", "--test-threads=1", "--nocapture"])
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// With every descriptor taken, a stranger waiting and a rank's greeting and another
    /// stranger in the accept queue: the waiting stranger is closed so that the rank gets in,
    /// and the listener, readable as long as the other stranger stays queued, is not polled
    /// in a spin.
    #[test]
    #[ignore = "lowers the descriptor limit: run in a process of its own by \
                accept_failures_back_off_and_free_a_descriptor"]
    fn at_the_descriptor_limit() {
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit and setrlimit read and write one rlimit in the local `lim`.
        unsafe {
            assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim), 0);
            lim.rlim_cur = 64;
            assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &lim), 0);
        }
        let mut lobby = lobby();
        let addr = lobby.local_addr().unwrap();
        let mut waiting = TcpStream::connect(addr).unwrap();
        run(&mut lobby, Instant::now, |l, _| l.waiting() == 1);
        assert_eq!(lobby.waiting(), 1);
        let mut rank = TcpStream::connect(addr).unwrap();
        rank.write_all(&handshake::hello(1, &[9; handshake::SECRET_LEN]))
            .unwrap();
        let _queued = TcpStream::connect(addr).unwrap();
        let mut hoard = Vec::new();
        loop {
            match std::fs::File::open("/dev/null") {
                Ok(f) => hoard.push(f),
                Err(e) if e.raw_os_error() == Some(libc::EMFILE) => break,
                Err(e) => panic!("{e}"),
            }
        }
        let start = Instant::now();
        let (got, rounds) = run(&mut lobby, Instant::now, |_, _| {
            start.elapsed() > Duration::from_millis(500)
        });
        assert_eq!(got.len(), 1, "the rank's greeting got in");
        assert!(
            closed(&mut waiting),
            "the oldest waiting stranger was closed"
        );
        assert!(
            lobby
                .last_error()
                .is_some_and(|e| e.raw_os_error() == Some(libc::EMFILE))
        );
        // Polls time out after POLL_MS and the paused listener is retried at most every
        // MAX_PAUSE, so rounds are few; a spinning listener makes them by the thousand.
        assert!(
            rounds < 100,
            "{rounds} rounds in 500 ms: the listener spins"
        );
        drop(hoard);
    }
}
