//! Who may join the watchdog's tree: the per-job secret, the greeting a rank sends when it
//! connects to its parent, the reasons a connection is refused, and the address a parent
//! listens on.
//!
//! Rank 0 draws a 32-byte secret from the operating system's random source at start-up and
//! broadcasts it over the job's MPI communicator, so only the job's own processes know it. A
//! rank connecting to its parent first sends [`HELLO_LEN`] bytes: [`MAGIC`], its rank
//! (little-endian u64) and the secret. The parent compares the secret in constant time and
//! accepts the connection only from a child it expects and has not heard from yet; anything
//! else is closed and reported on stderr (rate-limited, `refusals.rs`), and the job goes on.

use std::fmt;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr, ToSocketAddrs};

use crate::error::BridgeError;

/// Bytes of the per-job secret.
pub(crate) const SECRET_LEN: usize = 32;
/// The first bytes of every greeting: the protocol and its version.
pub(crate) const MAGIC: [u8; 8] = *b"PGASWD01";
/// Bytes of a greeting: magic, rank, secret.
pub(crate) const HELLO_LEN: usize = 8 + 8 + SECRET_LEN;
/// Environment variable naming the address a rank's watchdog listens on when some of its
/// children run on another host (default: the first non-loopback address of its host name).
pub const WATCHDOG_ADDR_ENV: &str = "PGAS_MPI_WATCHDOG_ADDR";

/// The job's shared secret.
pub(crate) type Secret = [u8; SECRET_LEN];

/// A fresh secret from the operating system's random source.
pub(crate) fn new_secret() -> Result<Secret, BridgeError> {
    let mut secret = [0u8; SECRET_LEN];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut secret))
        .map_err(|e| {
            BridgeError::Conduit(format!(
                "failure detector: reading the job secret from /dev/urandom: {e}"
            ))
        })?;
    Ok(secret)
}

/// The greeting of rank `rank`.
pub(crate) fn hello(rank: usize, secret: &Secret) -> [u8; HELLO_LEN] {
    let mut h = [0u8; HELLO_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8..16].copy_from_slice(&(rank as u64).to_le_bytes());
    h[16..].copy_from_slice(secret);
    h
}

/// Why a connection to the watchdog was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The first bytes are not a watchdog greeting.
    Garbage,
    /// A greeting with a secret that is not this job's.
    WrongSecret,
    /// A greeting with the right secret from a rank this listener does not expect (not one
    /// of its children, or one already connected).
    Unexpected(u64),
    /// The peer closed the connection after this many bytes, before a whole greeting.
    Closed(usize),
    /// No whole greeting arrived in time.
    Silent,
    /// Closed unread to make room: too many connections were waiting to greet.
    Crowded,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Garbage => write!(f, "garbage (not a watchdog greeting)"),
            Refusal::WrongSecret => write!(f, "wrong secret"),
            Refusal::Unexpected(r) => {
                write!(f, "unexpected connection claiming rank {r}")
            }
            Refusal::Closed(n) => {
                write!(f, "closed after {n} bytes, before a whole greeting")
            }
            Refusal::Silent => write!(f, "no greeting in time"),
            Refusal::Crowded => write!(f, "dropped: too many connections waiting to greet"),
        }
    }
}

/// Checks the first bytes received so far: an error as soon as they cannot start a greeting.
pub(crate) fn check_prefix(bytes: &[u8]) -> Result<(), Refusal> {
    let n = bytes.len().min(MAGIC.len());
    if bytes[..n] == MAGIC[..n] {
        Ok(())
    } else {
        Err(Refusal::Garbage)
    }
}

/// The rank a whole greeting claims, if it carries this job's secret.
pub(crate) fn verify(bytes: &[u8; HELLO_LEN], secret: &Secret) -> Result<u64, Refusal> {
    check_prefix(bytes)?;
    // Constant time in the secret's bytes: no early exit on the first difference.
    let diff = bytes[16..]
        .iter()
        .zip(secret)
        .fold(0u8, |acc, (a, b)| acc | (a ^ b));
    if diff != 0 {
        return Err(Refusal::WrongSecret);
    }
    Ok(u64::from_le_bytes(
        bytes[8..16].try_into().expect("8 bytes"),
    ))
}

/// The address a rank on `host` listens on for its children: the loopback address when
/// they all run on its own host (no other machine can reach it), otherwise
/// [`WATCHDOG_ADDR_ENV`] or the first non-loopback address `host` resolves to.
pub(crate) fn listen_ip(host: &str, children_elsewhere: bool) -> Result<IpAddr, BridgeError> {
    if !children_elsewhere {
        return Ok(IpAddr::V4(Ipv4Addr::LOCALHOST));
    }
    if let Ok(v) = std::env::var(WATCHDOG_ADDR_ENV) {
        return v.trim().parse().map_err(|e| {
            BridgeError::Conduit(format!(
                "failure detector: {WATCHDOG_ADDR_ENV}={v:?} is not an IP address: {e}"
            ))
        });
    }
    let addrs: Vec<IpAddr> = (host, 0)
        .to_socket_addrs()
        .map(|a| a.map(|s| s.ip()).collect())
        .unwrap_or_default();
    addrs
        .iter()
        .find(|a| a.is_ipv4() && !a.is_loopback())
        .or_else(|| addrs.iter().find(|a| !a.is_loopback()))
        .copied()
        .ok_or_else(|| {
            BridgeError::Conduit(format!(
                "failure detector: host {host} resolves to no address other hosts can reach; \
                 set {WATCHDOG_ADDR_ENV} to this host's address on the job's network"
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greetings_are_checked() {
        let secret = [7u8; SECRET_LEN];
        assert_eq!(verify(&hello(5, &secret), &secret), Ok(5));
        assert_eq!(
            verify(&hello(5, &[8u8; SECRET_LEN]), &secret),
            Err(Refusal::WrongSecret)
        );
        let mut garbage = [b'x'; HELLO_LEN];
        garbage[..4].copy_from_slice(b"GET ");
        assert_eq!(verify(&garbage, &secret), Err(Refusal::Garbage));
        assert_eq!(check_prefix(b"PGAS"), Ok(()));
        assert_eq!(check_prefix(b"GET /"), Err(Refusal::Garbage));
        assert_ne!(new_secret().unwrap(), new_secret().unwrap());
    }

    #[test]
    fn local_children_mean_loopback() {
        assert!(listen_ip("anything", false).unwrap().is_loopback());
    }
}
