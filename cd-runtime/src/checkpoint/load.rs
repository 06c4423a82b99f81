//! Reading a checkpoint back: the candidates in a directory, newest first, and one rank's
//! state from its part or, when that is missing or damaged, the part's copy. Every
//! refusal is a [`CheckpointError`] naming the file and the reason.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::checkpoint::format::{
    CheckpointError, MANIFEST, Manifest, RankFile, buddy_file, own_file, parse_checkpoint_name,
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

/// A rank's entries, and the line to print when its part was refused and the part's copy
/// served.
pub(crate) type Loaded = (BTreeMap<String, Vec<u8>>, Option<String>);

/// Rank `rank`'s entries in the checkpoint `dir` of `manifest`.
pub(crate) fn load_rank(
    dir: &Path,
    manifest: &Manifest,
    rank: usize,
) -> Result<Loaded, CheckpointError> {
    load_rank_with(dir, manifest, rank, read_checked)
}

/// Rank `rank`'s entries in the checkpoint `dir` of `manifest`, the part's copy (when the part
/// is refused) read by `read_copy` (given the copy's path and the rank's place in the part):
/// from the file, or fetched from the buddy that keeps it (node-local directories).
pub(crate) fn load_rank_with(
    dir: &Path,
    manifest: &Manifest,
    rank: usize,
    read_copy: impl FnOnce(&Path, &RankFile) -> Result<BTreeMap<String, Vec<u8>>, CheckpointError>,
) -> Result<Loaded, CheckpointError> {
    let info = &manifest.rank[rank];
    let own = own_file(dir, info.part);
    let own_err = match read_checked(&own, info) {
        Ok(e) => return Ok((e, None)),
        Err(e) => e,
    };
    let copy = buddy_file(dir, info.part, info.buddy);
    match read_copy(&copy, info) {
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

/// The entries of the rank `info` describes, from the part file `path`: refused unless the
/// file has the part's length and the rank's range its CRC-32.
fn read_checked(
    path: &Path,
    info: &RankFile,
) -> Result<BTreeMap<String, Vec<u8>>, CheckpointError> {
    let io = |source| CheckpointError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = crate::private_files::open_file(path).map_err(io)?;
    let got = f.metadata().map_err(io)?.len();
    if got != info.file_len {
        return Err(CheckpointError::Length {
            path: path.to_path_buf(),
            want: info.file_len,
            got,
        });
    }
    f.seek(SeekFrom::Start(info.offset)).map_err(io)?;
    let mut bytes = vec![0u8; info.len as usize];
    if let Err(e) = f.read_exact(&mut bytes) {
        return Err(match e.kind() {
            // Shortened since its length was read.
            std::io::ErrorKind::UnexpectedEof => CheckpointError::Length {
                path: path.to_path_buf(),
                want: info.file_len,
                got: f.metadata().map_or(0, |m| m.len()),
            },
            _ => io(e),
        });
    }
    check_range(path, info, &bytes)
}

/// The entries of the rank `info` describes from `bytes`, its range of the part `path`:
/// refused unless the range has its CRC-32 and decodes.
fn check_range(
    path: &Path,
    info: &RankFile,
    bytes: &[u8],
) -> Result<BTreeMap<String, Vec<u8>>, CheckpointError> {
    if crc32fast::hash(bytes) != info.crc {
        return Err(CheckpointError::Checksum {
            path: path.to_path_buf(),
        });
    }
    decode_entries(bytes).map_err(|reason| CheckpointError::Decode {
        path: path.to_path_buf(),
        reason,
    })
}

/// The entries of the rank `info` describes from `part`, the whole bytes of the part `path`
/// (a copy fetched from its buddy): refused unless it has the part's length and the rank's
/// range its CRC-32.
pub(crate) fn check_part(
    path: &Path,
    info: &RankFile,
    part: &[u8],
) -> Result<BTreeMap<String, Vec<u8>>, CheckpointError> {
    if part.len() as u64 != info.file_len {
        return Err(CheckpointError::Length {
            path: path.to_path_buf(),
            want: info.file_len,
            got: part.len() as u64,
        });
    }
    check_range(
        path,
        info,
        &part[info.offset as usize..(info.offset + info.len) as usize],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::format::{FORMAT_VERSION, checkpoint_dir, rank_dir};
    use crate::checkpoint::writer::write_file;
    use crate::resume::encode_entries;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cd-ckpt-load-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    /// A two-rank checkpoint, one process per rank, whose ranks are each other's buddies.
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
                part: r,
                buddy: 1 - r,
                file_len: bytes.len() as u64,
                offset: 0,
                len: bytes.len() as u64,
                crc: crc32fast::hash(&bytes),
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
    fn a_part_of_two_ranks_is_judged_rank_by_rank_and_as_a_file() {
        let root = scratch("part");
        let dir = checkpoint_dir(&root, "step", 3);
        let states: Vec<BTreeMap<String, Vec<u8>>> = (0..2u8)
            .map(|r| BTreeMap::from([("x".to_string(), vec![r; 50])]))
            .collect();
        let encoded: Vec<Vec<u8>> = states.iter().map(encode_entries).collect();
        let part = encoded.concat();
        write_file(&own_file(&dir, 0), &part).unwrap();
        write_file(&buddy_file(&dir, 0, 1), &part).unwrap();
        let a = encoded[0].len() as u64;
        let rank = |offset: u64, bytes: &[u8]| RankFile {
            part: 0,
            buddy: 1,
            file_len: part.len() as u64,
            offset,
            len: bytes.len() as u64,
            crc: crc32fast::hash(bytes),
        };
        let m = Manifest {
            version: FORMAT_VERSION,
            program: "t".into(),
            seed: "0x0".into(),
            ranks: 2,
            cd: "step".into(),
            level: 1,
            iteration: 3,
            step: 3,
            rank: vec![rank(0, &encoded[0]), rank(a, &encoded[1])],
        };
        // A byte of rank 1's range: rank 0 keeps the part, rank 1 reads the copy.
        let mut flipped = part.clone();
        flipped[a as usize + 4] ^= 1;
        write_file(&own_file(&dir, 0), &flipped).unwrap();
        assert_eq!(load_rank(&dir, &m, 0).unwrap(), (states[0].clone(), None));
        let (got, line) = load_rank(&dir, &m, 1).unwrap();
        assert_eq!(got, states[1]);
        assert!(line.unwrap().contains("copy-of-rank0.bin"));
        // One byte short: the whole part is refused, for both ranks.
        write_file(&own_file(&dir, 0), &part[..part.len() - 1]).unwrap();
        for (r, state) in states.iter().enumerate() {
            let (got, line) = load_rank(&dir, &m, r).unwrap();
            assert_eq!(&got, state);
            assert!(line.unwrap().contains("truncated"));
        }
        std::fs::remove_dir_all(&root).unwrap();
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
