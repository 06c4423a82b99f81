//! How many spare processes the program asks for: its own option (`--spares S`, set with
//! [`request_spares`] before the job starts) or, without one, `PGAS_SPARES`. The mpi conduit
//! reads it when it starts (`conduit/mpi/spares.rs`, which checks it); a runtime above asks it
//! ([`spares_wanted`]) to decide whether to keep the state a replacement would need.

use std::sync::OnceLock;

/// Environment variable: the number of spare processes among `mpirun -n N+S`'s.
pub(crate) const SPARES_ENV: &str = "PGAS_SPARES";

/// The count a program's own option set; it wins over the environment.
static REQUESTED: OnceLock<usize> = OnceLock::new();

/// Asks for `spares` spare processes (a program's `--spares S`), in place of `PGAS_SPARES`.
/// Call it before the first job starts (the mpi conduit reads the count once); a second call
/// with another count is refused, returning the count in force.
pub fn request_spares(spares: usize) -> Result<(), usize> {
    let set = *REQUESTED.get_or_init(|| spares);
    if set == spares { Ok(()) } else { Err(set) }
}

/// The spare count as given: the program's request, else the variable's text (`None`: unset).
pub(crate) fn raw() -> Option<String> {
    resolve(REQUESTED.get().copied(), || std::env::var(SPARES_ENV).ok())
}

/// The text of the count a request (`requested`) or else the variable (`env`) gives.
fn resolve(requested: Option<usize>, env: impl FnOnce() -> Option<String>) -> Option<String> {
    match requested {
        Some(n) => Some(n.to_string()),
        None => env(),
    }
}

/// The number of spares the job asks for (0 when none, or when the variable is not a number,
/// which the mpi conduit refuses with an error of its own when the job starts).
pub fn spares_wanted() -> usize {
    raw().and_then(|v| v.trim().parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_wins_over_the_variable() {
        assert_eq!(resolve(Some(2), || Some("5".into())).as_deref(), Some("2"));
        assert_eq!(resolve(None, || Some("5".into())).as_deref(), Some("5"));
        assert_eq!(resolve(None, || None), None);
    }
}
