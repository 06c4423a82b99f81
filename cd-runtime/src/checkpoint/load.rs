//! Reading a checkpoint back: the candidates in a directory, newest first, and one rank's
//! state from its own file or, when that is missing or damaged, its buddy's copy. Every
//! refusal is a [`CheckpointError`] naming the file and the reason.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::checkpoint::format::{
    CheckpointError, MANIFEST, Manifest, buddy_file, own_file, parse_checkpoint_name,
};
use crate::resume::decode_entries;

/// The checkpoints to try for a restart from `path`, newest first, and whether `path` named
/// one checkpoint (then it alone is tried: no fallback).
pub(crate) fn candidates(path: &Path) -> (Vec<PathBuf>, bool) {
    if path.join(MANIFEST).is_file() {
        return (vec![path.to_path_buf()], true);
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return (Vec::new(), false);
    };
    let mut found: Vec<(u64, PathBuf)> = entries
        .filter_map(|e| {
            let e = e.ok()?;
            let name = e.file_name().into_string().ok()?;
            let (_, it) = parse_checkpoint_name(&name)?;
            let p = e.path();
            p.join(MANIFEST).is_file().then_some((it, p))
        })
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    (found.into_iter().map(|(_, p)| p).collect(), false)
}

/// A rank's entries, and the line to print when its own file was refused and the buddy's copy
/// served.
pub(crate) type Loaded = (BTreeMap<String, Vec<u8>>, Option<String>);

/// Rank `rank`'s entries in the checkpoint `dir` of `manifest`.
pub(crate) fn load_rank(
    dir: &Path,
    manifest: &Manifest,
    rank: usize,
) -> Result<Loaded, CheckpointError> {
    let info = &manifest.rank[rank];
    let own = own_file(dir, rank);
    let own_err = match read_checked(&own, info.len, info.crc) {
        Ok(e) => return Ok((e, None)),
        Err(e) => e,
    };
    let copy = buddy_file(dir, rank, info.buddy);
    match read_checked(&copy, info.len, info.crc) {
        Ok(e) => Ok((
            e,
            Some(format!(
                "{own_err}; rank {rank} uses its copy {}",
                copy.display()
            )),
        )),
        Err(copy_err) => Err(CheckpointError::RankLost {
            rank,
            own: Box::new(own_err),
            copy: Box::new(copy_err),
        }),
    }
}

/// The entries of the file `path`, if it has `len` bytes whose CRC-32 is `crc`.
fn read_checked(
    path: &Path,
    len: u64,
    crc: u32,
) -> Result<BTreeMap<String, Vec<u8>>, CheckpointError> {
    let io = |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = crate::private_files::open_file(path).map_err(io)?;
    let got = f.metadata().map_err(io)?.len();
    if got != len {
        return Err(CheckpointError::Length {
            path: path.to_path_buf(),
            want: len,
            got,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 != len {
        return Err(CheckpointError::Length {
            path: path.to_path_buf(),
            want: len,
            got: bytes.len() as u64,
        });
    }
    if crc32fast::hash(&bytes) != crc {
        return Err(CheckpointError::Checksum {
            path: path.to_path_buf(),
        });
    }
    decode_entries(&bytes).map_err(|reason| CheckpointError::Decode {
        path: path.to_path_buf(),
        reason,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::format::{FORMAT_VERSION, RankFile, checkpoint_dir, rank_dir};
    use crate::checkpoint::writer::write_file;
    use crate::resume::encode_entries;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cd-ckpt-load-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A two-rank checkpoint whose ranks are each other's buddies.
    fn two_ranks(root: &Path, it: u64) -> (PathBuf, Manifest, Vec<BTreeMap<String, Vec<u8>>>) {
        let dir = checkpoint_dir(root, "step", it);
        let mut states = Vec::new();
        let mut files = Vec::new();
        for r in 0..2usize {
            let mut m = BTreeMap::new();
            m.insert("x".to_string(), vec![r as u8; 100]);
            let bytes = encode_entries(&m);
            write_file(&own_file(&dir, r), &bytes).unwrap();
            write_file(&buddy_file(&dir, r, 1 - r), &bytes).unwrap();
            files.push(RankFile {
                len: bytes.len() as u64,
                crc: crc32fast::hash(&bytes),
                buddy: 1 - r,
            });
            states.push(m);
        }
        let manifest = Manifest {
            version: FORMAT_VERSION,
            program: "t".into(),
            seed: "0x0".into(),
            ranks: 2,
            cd: "step".into(),
            level: 1,
            iteration: it,
            step: it,
            rank: files,
        };
        write_file(&dir.join(MANIFEST), manifest.to_text().as_bytes()).unwrap();
        (dir, manifest, states)
    }

    #[test]
    fn damaged_files_fall_back_to_the_buddy_copy_and_both_damaged_is_refused() {
        let root = scratch("damaged");
        let (dir, m, states) = two_ranks(&root, 10);
        let (newer, ..) = two_ranks(&root, 20);
        assert_eq!(candidates(&root), (vec![newer.clone(), dir.clone()], false));
        assert_eq!(candidates(&dir), (vec![dir.clone()], true));
        assert_eq!(load_rank(&dir, &m, 0).unwrap(), (states[0].clone(), None));
        // One byte flipped.
        let own0 = own_file(&dir, 0);
        let mut b = std::fs::read(&own0).unwrap();
        b[5] ^= 1;
        write_file(&own0, &b).unwrap();
        let (got, line) = load_rank(&dir, &m, 0).unwrap();
        assert_eq!(got, states[0]);
        let line = line.unwrap();
        assert!(
            line.contains("state.bin") && line.contains("checksum"),
            "{line}"
        );
        // Truncated.
        write_file(&own_file(&dir, 1), &b[..3]).unwrap();
        let line = load_rank(&dir, &m, 1).unwrap().1.unwrap();
        assert!(line.contains("truncated"), "{line}");
        // A rank's whole directory gone: rank 1's own file and its copy of rank 0.
        std::fs::remove_dir_all(rank_dir(&dir, 1)).unwrap();
        let e = load_rank(&dir, &m, 0).unwrap_err();
        assert!(
            matches!(e, CheckpointError::RankLost { rank: 0, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("copy-of-rank0"), "{e}");
        // The manifest gone: no longer a candidate.
        std::fs::remove_file(newer.join(MANIFEST)).unwrap();
        assert_eq!(candidates(&root).0, vec![dir.clone()]);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
