//! Where a job keeps its files (the file medium's arenas, spilled relaxed logs, the copies
//! the memory budget moves out): a directory of its own that no other local user can read,
//! replace or redirect.
//!
//! **The directory.** Each launch creates a fresh directory with a random name, at mode 0700,
//! atomically: `mkdir` fails if the name exists, so a directory or symbolic link another user
//! planted under a name they guessed is never taken over (the `tempfile` crate's builder: it
//! retries with a new name on a collision and re-seeds from the system's randomness when
//! collisions persist; `libc::mkdtemp` would do the same through `unsafe` and C strings). It is
//! made in the system's temporary directory, or inside the directory the configuration names
//! (`file_dir`), never in that directory itself, so a user's `file_dir` is never filled with
//! or emptied of anything but the job's own subdirectory.
//!
//! **The parent it is made in** must not let another user swap it: it is refused when it is a
//! symbolic link (its owner could point it elsewhere), a directory others may write to without
//! the sticky bit (they could rename the job's directory away and put their own in its place),
//! or a directory owned by another user (its owner could do the same). A directory owned by
//! root is accepted: root can do all of this anyway, and the system's temporary directory is
//! root's (with the sticky bit).
//!
//! **Files** inside are created with `O_CREAT | O_EXCL | O_NOFOLLOW` at mode 0600 and opened for
//! reading with `O_NOFOLLOW`: a name that already exists (a symbolic link above all) is an
//! error, never followed or truncated.
//!
//! **Removal.** [`PrivateDir`] removes the directory and everything in it when dropped (every
//! exit path that unwinds), and registers it with [`gasnet_bridge::for_runtimes::exit_cleanup`] meanwhile, so
//! the mpi conduit's watchdog removes it too before it ends the process with `_exit`. A process
//! killed outright (SIGKILL, the out-of-memory killer) removes nothing, so the name carries the
//! host and process id before its random part (`cd-files-HOST-PID-RANDOM`), and each new
//! directory's creation first removes the ones its parent holds from this host whose process
//! is gone (Linux: no `/proc/PID`), if they are this user's directories. A reused process id
//! only keeps a stale directory longer; one on another host (a shared `file_dir`) is never
//! judged here.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use thiserror::Error;

/// Mode of the job's directories: the owner alone may list, enter or change them.
const DIR_MODE: u32 = 0o700;
/// Mode of the job's files: the owner alone may read or write them.
const FILE_MODE: u32 = 0o600;
/// Prefix of the job's directory names (the rest is random).
const PREFIX: &str = "cd-files-";
/// Random characters in a directory name (62 possibilities each).
const RANDOM_CHARS: usize = 12;

/// Why a directory cannot hold the job's private files.
#[derive(Debug, Error)]
pub enum PrivateDirError {
    /// The path is a symbolic link.
    #[error(
        "{} is a symbolic link, which its owner can point anywhere: name the directory it \
         points to, if you own it",
        path.display()
    )]
    Symlink {
        /// The path given.
        path: PathBuf,
    },
    /// The path exists and is not a directory.
    #[error("{} is not a directory (the file medium keeps its copies there)", path.display())]
    NotADirectory {
        /// The path given.
        path: PathBuf,
    },
    /// Other users may write to the directory, and it has no sticky bit.
    #[error(
        "{} is writable by other users (mode {mode:o}) and has no sticky bit, so they could \
         replace the job's files: remove their write permission (chmod go-w) or name a \
         directory only you can write to",
        path.display()
    )]
    WritableByOthers {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The directory belongs to another user.
    #[error(
        "{} is owned by user id {owner}, not by this user ({me}), who could read or redirect \
         the job's files: name a directory you own",
        path.display()
    )]
    OwnedByOther {
        /// The directory.
        path: PathBuf,
        /// Its owner's user id.
        owner: u32,
        /// This process's effective user id.
        me: u32,
    },
    /// The directory (or the job's own inside it) could not be created or inspected.
    #[error("cannot create or inspect the directory {}: {source}", path.display())]
    Io {
        /// The directory.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

/// This process's effective user id.
#[allow(unsafe_code)]
fn effective_uid() -> u32 {
    // SAFETY: geteuid takes no argument, cannot fail and touches no memory of ours.
    unsafe { libc::geteuid() }
}

/// Checks that `dir` can hold the job's private directory (module doc), creating it (and its
/// missing parents) at mode 0700 when it does not exist.
pub fn check_parent(dir: &Path) -> Result<(), PrivateDirError> {
    // Without a trailing slash: `lstat("link/")` would follow the link.
    let dir: PathBuf = dir.components().collect();
    let io = |source| PrivateDirError::Io {
        path: dir.clone(),
        source,
    };
    let meta = match std::fs::symlink_metadata(&dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            DirBuilder::new()
                .recursive(true)
                .mode(DIR_MODE)
                .create(&dir)
                .map_err(io)?;
            // Inspected again: another user may have made it between the two calls.
            std::fs::symlink_metadata(&dir).map_err(io)?
        }
        other => other.map_err(io)?,
    };
    judge(dir, &meta, effective_uid())
}

/// The rule of [`check_parent`] for `dir` as `meta` describes it, for the user `me`.
fn judge(dir: PathBuf, meta: &std::fs::Metadata, me: u32) -> Result<(), PrivateDirError> {
    if meta.file_type().is_symlink() {
        return Err(PrivateDirError::Symlink { path: dir });
    }
    if !meta.is_dir() {
        return Err(PrivateDirError::NotADirectory { path: dir });
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 && mode & 0o1000 == 0 {
        return Err(PrivateDirError::WritableByOthers { path: dir, mode });
    }
    if meta.uid() != me && meta.uid() != 0 {
        return Err(PrivateDirError::OwnedByOther {
            path: dir,
            owner: meta.uid(),
            me,
        });
    }
    Ok(())
}

/// The job's private directory: created fresh (module doc), removed with everything in it when
/// dropped, and meanwhile registered for removal before the mpi conduit's `_exit`.
#[derive(Debug)]
pub struct PrivateDir {
    path: PathBuf,
}

impl PrivateDir {
    /// Creates the directory inside `parent` (checked first, [`check_parent`]), or inside the
    /// system's temporary directory when `parent` is `None`.
    pub fn create(parent: Option<&Path>) -> Result<PrivateDir, PrivateDirError> {
        let parent = parent.map_or_else(std::env::temp_dir, Path::to_path_buf);
        check_parent(&parent)?;
        let host = host_name();
        remove_stale(&parent, &host);
        let dir = tempfile::Builder::new()
            .prefix(&format!("{PREFIX}{host}-{}-", std::process::id()))
            .rand_bytes(RANDOM_CHARS)
            .permissions(Permissions::from_mode(DIR_MODE))
            .tempdir_in(&parent)
            .map_err(|source| PrivateDirError::Io {
                path: parent.clone(),
                source,
            })?;
        // Removed by this value's drop (below), after the exit registry lets go of it.
        let path = dir.keep();
        gasnet_bridge::for_runtimes::exit_cleanup::register(&path);
        Ok(PrivateDir { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateDir {
    fn drop(&mut self) {
        // Removed before it is unregistered: an `_exit` in between finds it still registered.
        let _ = std::fs::remove_dir_all(&self.path);
        gasnet_bridge::for_runtimes::exit_cleanup::unregister(&self.path);
    }
}

/// This host's name as a directory name may hold it (`host` where it cannot be read).
fn host_name() -> String {
    let name = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        .collect();
    if name.is_empty() { "host".into() } else { name }
}

/// The process id in the name of a private directory made on `host`, if `name` is one.
fn creator_on(name: &str, host: &str) -> Option<u32> {
    let rest = name
        .strip_prefix(PREFIX)?
        .strip_prefix(host)?
        .strip_prefix('-')?;
    let (pid, random) = rest.split_once('-')?;
    (random.len() == RANDOM_CHARS && random.chars().all(|c| c.is_ascii_alphanumeric()))
        .then(|| pid.parse().ok())
        .flatten()
}

/// Removes the private directories in `parent` made on `host` by processes that are gone
/// (module doc, "Removal"): never a symbolic link, never another user's directory. Best
/// effort: an error leaves the directory where it is.
fn remove_stale(parent: &Path, host: &str) {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    let me = effective_uid();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| creator_on(n, host)) else {
            continue;
        };
        if pid == std::process::id() || Path::new("/proc").join(pid.to_string()).exists() {
            continue;
        }
        let path = entry.path();
        let ours =
            std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_dir() && m.uid() == me);
        if ours {
            let _ = std::fs::remove_dir_all(&path);
        }
    }
}

/// Creates `dir` and its missing parents at mode 0700 (inside the job's private directory,
/// where no one else can have made them).
pub fn create_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(DIR_MODE).create(dir)
}

/// Creates the file `path` for reading and writing, at mode 0600; fails if anything exists
/// under that name (a symbolic link included), instead of following or truncating it.
pub fn create_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

/// Opens the file `path` for reading; fails on a symbolic link instead of following it.
pub fn open_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cd-private-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_fresh_directory_is_0700_randomly_named_and_removed_on_drop() {
        let parent = scratch("fresh");
        std::fs::create_dir_all(&parent).unwrap();
        let a = PrivateDir::create(Some(&parent)).unwrap();
        let b = PrivateDir::create(Some(&parent)).unwrap();
        for d in [&a, &b] {
            assert_eq!(d.path().parent(), Some(parent.as_path()));
            let meta = std::fs::symlink_metadata(d.path()).unwrap();
            assert!(meta.is_dir());
            assert_eq!(meta.mode() & 0o7777, 0o700, "{}", d.path().display());
            let name = d.path().file_name().unwrap().to_str().unwrap();
            let pid = std::process::id();
            let prefix = format!("{PREFIX}{}-{pid}-", host_name());
            let random = name.strip_prefix(&prefix).expect("prefixed");
            assert_eq!(random.len(), RANDOM_CHARS, "{name}");
            assert_eq!(creator_on(name, &host_name()), Some(pid));
            assert!(
                gasnet_bridge::for_runtimes::exit_cleanup::registered()
                    .contains(&d.path().to_path_buf())
            );
        }
        assert_ne!(a.path(), b.path(), "two launches, two directories");
        let f = a.path().join("x.bin");
        create_file(&f).unwrap();
        assert_eq!(
            std::fs::metadata(&f).unwrap().mode() & 0o777,
            0o600,
            "files are the owner's alone"
        );
        let (pa, pb) = (a.path().to_path_buf(), b.path().to_path_buf());
        drop(a);
        drop(b);
        assert!(!pa.exists() && !pb.exists(), "removed with their contents");
        let registered = gasnet_bridge::for_runtimes::exit_cleanup::registered();
        assert!(!registered.contains(&pa) && !registered.contains(&pb));
        std::fs::remove_dir(&parent).unwrap();
    }

    #[test]
    fn a_planted_symlink_is_neither_followed_nor_truncated() {
        let dir = scratch("planted");
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, b"precious").unwrap();
        let planted = dir.join("level1.bin");
        std::os::unix::fs::symlink(&victim, &planted).unwrap();
        let e = create_file(&planted).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists, "{e}");
        assert!(open_file(&planted).is_err(), "not followed when read");
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn unsafe_parents_are_refused_naming_the_path_and_the_reason() {
        let base = scratch("parents");
        std::fs::create_dir_all(&base).unwrap();
        let real = base.join("real");
        std::fs::create_dir(&real).unwrap();
        let link = base.join("link");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        for path in [link.clone(), base.join("link/")] {
            let e = PrivateDir::create(Some(&path)).unwrap_err();
            assert!(matches!(e, PrivateDirError::Symlink { .. }), "{e}");
            assert!(e.to_string().contains(&link.display().to_string()), "{e}");
        }
        let open = base.join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, Permissions::from_mode(0o777)).unwrap();
        let e = PrivateDir::create(Some(&open)).unwrap_err();
        assert!(matches!(e, PrivateDirError::WritableByOthers { .. }), "{e}");
        assert!(
            e.to_string().contains("open") && e.to_string().contains("777"),
            "{e}"
        );
        // With the sticky bit, as /tmp: others cannot rename what is not theirs.
        std::fs::set_permissions(&open, Permissions::from_mode(0o1777)).unwrap();
        drop(PrivateDir::create(Some(&open)).unwrap());
        let file = base.join("file");
        std::fs::write(&file, b"x").unwrap();
        let e = PrivateDir::create(Some(&file)).unwrap_err();
        assert!(matches!(e, PrivateDirError::NotADirectory { .. }), "{e}");
        // A missing directory is made, for this user alone.
        let missing = base.join("new/deeper");
        drop(PrivateDir::create(Some(&missing)).unwrap());
        let mode = std::fs::metadata(&missing).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o700);
        assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0, "nothing made");
        std::fs::remove_dir_all(&base).unwrap();
    }

    #[test]
    fn a_directory_of_another_user_is_refused_and_roots_is_accepted() {
        let dir = scratch("owner");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, Permissions::from_mode(0o700)).unwrap();
        let me = effective_uid();
        if me == 0 {
            // Root can give it away for real: refused by the whole check.
            std::os::unix::fs::chown(&dir, Some(4242), None).unwrap();
            let e = PrivateDir::create(Some(&dir)).unwrap_err();
            assert!(matches!(e, PrivateDirError::OwnedByOther { .. }), "{e}");
        }
        let meta = std::fs::symlink_metadata(&dir).unwrap();
        let owner = meta.uid();
        // Another user's view (not root's): the directory is someone else's.
        let viewer = if me == 0 { 0 } else { owner + 1 };
        let e = judge(dir.clone(), &meta, viewer).unwrap_err();
        assert!(matches!(e, PrivateDirError::OwnedByOther { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(&dir.display().to_string()), "{text}");
        assert!(text.contains(&format!("user id {owner}")), "{text}");
        judge(dir.clone(), &meta, owner).unwrap();
        // The system's temporary directory is root's and sticky: accepted.
        check_parent(Path::new("/tmp")).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_killed_processs_directory_goes_at_the_next_creation_and_nothing_else_does() {
        let parent = scratch("stale");
        std::fs::create_dir_all(&parent).unwrap();
        let host = host_name();
        let gone = {
            let mut child = std::process::Command::new("true").spawn().unwrap();
            let pid = child.id();
            child.wait().unwrap();
            pid
        };
        let live = std::process::id();
        let name = |host: &str, pid: u32| format!("{PREFIX}{host}-{pid}-abcdefABCDEF");
        let stale = parent.join(name(&host, gone));
        let kept = [
            parent.join(name(&host, live)),
            parent.join(name("another-host", gone)),
            parent.join(format!("{PREFIX}{host}-{gone}-short")),
            parent.join(format!("{PREFIX}0lQ9xcCbfde1")),
        ];
        for d in kept.iter().chain([&stale]) {
            create_dir(d).unwrap();
            create_file(&d.join("arena.bin")).unwrap();
        }
        // A symbolic link with a stale name is not followed, nor removed.
        let target = scratch("stale-target");
        create_dir(&target).unwrap();
        let link = parent.join(name(&host, gone + 1_000_000));
        std::os::unix::fs::symlink(&target, &link).unwrap();

        let fresh = PrivateDir::create(Some(&parent)).unwrap();
        assert!(
            !stale.exists(),
            "the directory of a process that is gone is removed"
        );
        for d in &kept {
            assert!(d.join("arena.bin").exists(), "{} kept", d.display());
        }
        assert!(std::fs::symlink_metadata(&link).is_ok() && target.exists());
        drop(fresh);
        std::fs::remove_dir_all(&parent).unwrap();
        std::fs::remove_dir_all(&target).unwrap();
    }
}
