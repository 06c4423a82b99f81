//! A fresh private directory for a benchmark's checkpoints to disk: in the working directory
//! (where a job's checkpoints go by default, on the disk they would use), at mode 0700, removed
//! on drop.

use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

/// The directory (`<name>.<pid>` in the working directory).
pub struct CheckpointDir(PathBuf);

impl CheckpointDir {
    /// Creates `<name>.<pid>` in the working directory, empty.
    ///
    /// # Panics
    /// If it cannot be created.
    pub fn new(name: &str) -> CheckpointDir {
        let path = std::env::current_dir()
            .expect("a working directory")
            .join(format!("{name}.{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        CheckpointDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// The checkpoints' directory inside it (`ck`), removed first: a run that writes there
    /// starts with no earlier run's checkpoints to replace.
    pub fn fresh_checkpoints(&self) -> PathBuf {
        let ck = self.0.join("ck");
        let _ = std::fs::remove_dir_all(&ck);
        ck
    }

    /// The `checkpoint` key of a CD writing every `every` executions into `ck` (two kept).
    pub fn key(&self, every: u64) -> String {
        format!(
            "checkpoint = {{ dir = {:?}, every = {every}, keep = 2 }}\n",
            self.0.join("ck").display().to_string()
        )
    }
}

impl Drop for CheckpointDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Seconds to write `bytes` bytes as one new file in `dir` with one `write` and one `fsync`
/// (dd-like): the baseline of a checkpoint writer's rate.
pub fn sequential_write(dir: &Path, bytes: usize) -> f64 {
    use std::io::Write;
    let data = vec![0x5au8; bytes];
    let path = dir.join("sequential.bin");
    let _ = std::fs::remove_file(&path);
    let start = std::time::Instant::now();
    let mut f = std::fs::File::create(&path).expect("create the sequential file");
    f.write_all(&data).expect("write the sequential file");
    f.sync_all().expect("fsync the sequential file");
    let t = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&path);
    t
}

/// Seconds to write `bytes` bytes as a checkpoint part and its copy are written: two new files
/// of `bytes / 2` each in two new directories of `dir`, written by two threads at once, then
/// both files and both directories `fsync`ed at once. The baseline that does the durability
/// work a checkpoint writer must do (two files, their directory entries), where
/// [`sequential_write`] does the least any writer of these bytes does.
pub fn sequential_write_pair(dir: &Path, bytes: usize) -> f64 {
    use std::io::Write;
    let data = vec![0x5au8; bytes / 2];
    let dirs = [dir.join("pair-a"), dir.join("pair-b")];
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    let start = std::time::Instant::now();
    let files: Vec<std::fs::File> = std::thread::scope(|s| {
        let writers: Vec<_> = dirs
            .iter()
            .map(|d| {
                let data = &data;
                s.spawn(move || {
                    std::fs::create_dir(d).expect("create a pair directory");
                    let mut f =
                        std::fs::File::create(d.join("part.bin")).expect("create a pair file");
                    f.write_all(data).expect("write a pair file");
                    f
                })
            })
            .collect();
        writers
            .into_iter()
            .map(|h| h.join().expect("a pair writer"))
            .collect()
    });
    std::thread::scope(|s| {
        for f in &files {
            s.spawn(move || f.sync_all().expect("fsync a pair file"));
        }
        for d in &dirs {
            s.spawn(move || {
                std::fs::File::open(d)
                    .and_then(|d| d.sync_all())
                    .expect("fsync a pair directory")
            });
        }
    });
    let t = start.elapsed().as_secs_f64();
    for d in &dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    t
}
