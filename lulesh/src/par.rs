//! Thread execution: either everything inline on the calling thread (the
//! bit-exact serial mode) or element ranges split over a rayon pool.
//! Splits are by index ranges and every element's arithmetic is the same in
//! both modes, so results do not depend on how the work is divided.

use rayon::ThreadPool;

use crate::error::LuleshError;

/// A group of equally long mutable slices that can be cut at the same index.
pub trait SplitMut: Sized + Send {
    /// Number of items (elements or nodes) in the group.
    fn split_len(&self) -> usize;
    /// Cuts every slice at `mid`.
    fn split_at(self, mid: usize) -> (Self, Self);
}

impl<T: Send> SplitMut for &mut [T] {
    fn split_len(&self) -> usize {
        self.len()
    }
    fn split_at(self, mid: usize) -> (Self, Self) {
        self.split_at_mut(mid)
    }
}

macro_rules! split_tuple {
    ($($name:ident),+) => {
        impl<$($name: SplitMut),+> SplitMut for ($($name,)+) {
            fn split_len(&self) -> usize {
                #[allow(non_snake_case)]
                let ($($name,)+) = self;
                let lens = [$($name.split_len()),+];
                debug_assert!(lens.iter().all(|&l| l == lens[0]));
                lens[0]
            }
            fn split_at(self, mid: usize) -> (Self, Self) {
                #[allow(non_snake_case)]
                let ($($name,)+) = self;
                #[allow(non_snake_case)]
                let ($($name,)+) = ($($name.split_at(mid),)+);
                (($($name.0,)+), ($($name.1,)+))
            }
        }
    };
}

split_tuple!(A);
split_tuple!(A, B);
split_tuple!(A, B, C);
split_tuple!(A, B, C, D);
split_tuple!(A, B, C, D, E);
split_tuple!(A, B, C, D, E, F);

/// How loops are executed.
pub struct Exec {
    pool: Option<ThreadPool>,
    threads: usize,
}

/// Items per task below which a range is not split further.
pub const MIN_CHUNK: usize = 256;

impl Exec {
    /// Everything on the calling thread, forces scatter-added (serial reference).
    pub fn serial() -> Self {
        Exec {
            pool: None,
            threads: 1,
        }
    }

    /// A pool of `threads` workers; 1 means [`Exec::serial`].
    pub fn with_threads(threads: usize) -> Result<Self, LuleshError> {
        if threads <= 1 {
            return Ok(Self::serial());
        }
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .map_err(|e| LuleshError::ThreadPool {
                threads,
                reason: e.to_string(),
            })?;
        Ok(Exec {
            pool: Some(pool),
            threads,
        })
    }

    /// Number of threads in use.
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether the threaded (per-element corner forces + gather) mode is on.
    pub fn is_parallel(&self) -> bool {
        self.pool.is_some()
    }

    /// Calls `f(first_index, piece)` on disjoint pieces covering `parts`,
    /// in parallel when a pool exists. Returns the error of the lowest
    /// failing piece, if any.
    pub fn for_each_split<S, F>(&self, parts: S, f: F) -> Result<(), LuleshError>
    where
        S: SplitMut,
        F: Fn(usize, S) -> Result<(), LuleshError> + Sync,
    {
        match &self.pool {
            // A small range is not worth the hop into the pool.
            Some(pool) if parts.split_len() > MIN_CHUNK => pool.install(|| split_rec(parts, 0, &f)),
            _ => f(0, parts),
        }
    }
}

fn split_rec<S, F>(parts: S, offset: usize, f: &F) -> Result<(), LuleshError>
where
    S: SplitMut,
    F: Fn(usize, S) -> Result<(), LuleshError> + Sync,
{
    let len = parts.split_len();
    if len <= MIN_CHUNK {
        return f(offset, parts);
    }
    let mid = len / 2;
    let (a, b) = parts.split_at(mid);
    let (ra, rb) = rayon::join(|| split_rec(a, offset, f), || split_rec(b, offset + mid, f));
    ra.and(rb)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_cover_everything_once() {
        for threads in [1, 3] {
            let exec = Exec::with_threads(threads).unwrap();
            let mut a = vec![0usize; 5000];
            let mut b = vec![0usize; 5000];
            exec.for_each_split((&mut a[..], &mut b[..]), |start, (a, b)| {
                for (i, (x, y)) in a.iter_mut().zip(b.iter_mut()).enumerate() {
                    *x += start + i;
                    *y += 1;
                }
                Ok(())
            })
            .unwrap();
            assert!(a.iter().enumerate().all(|(i, &v)| v == i));
            assert!(b.iter().all(|&v| v == 1));
        }
    }
}
