//! Reuse of preservation buffers.
//!
//! A CD that runs every iteration preserves the same arrays every time. Allocating a fresh
//! buffer per array and freeing it at completion lets the allocator hand large blocks back to
//! the kernel and fault them in again on the next iteration: every preservation then pays a
//! page fault per page. Released copies come here instead, and the next preservation of a
//! similar size takes one back.

use std::cell::RefCell;

/// Most buffers kept for reuse; beyond that released buffers are freed.
const MAX_POOLED: usize = 64;

/// Free preservation buffers of one rank.
#[derive(Debug, Default)]
pub(crate) struct BufferPool {
    free: RefCell<Vec<Vec<u8>>>,
}

impl BufferPool {
    /// A buffer holding a copy of `bytes`, reusing the smallest free buffer that fits without
    /// wasting more than half of it.
    pub(crate) fn copy_of(&self, bytes: &[u8]) -> Vec<u8> {
        let mut buf = self.take(bytes.len());
        buf.extend_from_slice(bytes);
        buf
    }

    /// An empty buffer with room for `len` bytes: the smallest free one that fits without
    /// wasting more than half of it, or a new one.
    pub(crate) fn take(&self, len: usize) -> Vec<u8> {
        let reused = {
            let mut free = self.free.borrow_mut();
            free.iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= len && b.capacity() / 2 <= len)
                .min_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i)
                .map(|i| free.swap_remove(i))
        };
        let mut buf = reused.unwrap_or_else(|| Vec::with_capacity(len));
        buf.clear();
        buf
    }

    /// A buffer of `len` zero bytes, reused like [`BufferPool::copy_of`]'s (a fresh large
    /// block is faulted in page by page; a reused one is not).
    pub(crate) fn zeroed(&self, len: usize) -> Vec<u8> {
        let mut buf = self.take(len);
        buf.resize(len, 0);
        buf
    }

    /// Takes back a buffer whose copy is no longer needed.
    pub(crate) fn give_back(&self, buf: Vec<u8>) {
        let mut free = self.free.borrow_mut();
        if free.len() < MAX_POOLED && buf.capacity() > 0 {
            free.push(buf);
        }
    }

    /// Forgets every pooled buffer (the rank lost its memory).
    pub(crate) fn clear(&self) {
        self.free.borrow_mut().clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_buffers_are_reused_by_size() {
        let pool = BufferPool::default();
        let a = pool.copy_of(&[1u8; 1000]);
        let a_ptr = a.as_ptr();
        pool.give_back(a);
        let small = pool.copy_of(&[2u8; 10]);
        assert_ne!(
            small.as_ptr(),
            a_ptr,
            "a 1000-byte buffer is not wasted on 10 bytes"
        );
        let b = pool.copy_of(&[3u8; 900]);
        assert_eq!(
            b.as_ptr(),
            a_ptr,
            "a similar size reuses the released buffer"
        );
        assert_eq!(b, vec![3u8; 900]);
        pool.clear();
        assert!(pool.free.borrow().is_empty());
    }
}
