//! Copies into, out of and within memory that other ranks may access at the same moment.
//!
//! Segment bytes are shared by design: while one rank's thread copies into them, another may
//! be reading them, copying into them, or running a remote atomic on them, and a program
//! with a race (a bug in PGAS terms, but one a safe API must survive) may do so on the very
//! same bytes. Under Rust's memory model a data race between two non-atomic accesses is
//! undefined behaviour whether or not references exist, so a plain `copy_nonoverlapping` or a
//! volatile access cannot be used on such memory. Every access to segment bytes therefore
//! goes through this module or through an [`AtomicU64`](std::sync::atomic::AtomicU64) view.
//!
//! # Model (x86-64), and what it does not cover
//!
//! The copies are inline assembly (`mov` / `movdqu` for up to 64 bytes, 32-byte `vmovdqu`
//! loops when the CPU has AVX, `rep movsb` from 32 KiB on CPUs with fast strings (ERMS) and
//! over 64 bytes on CPUs without AVX; `rep stosb` to fill). To the Rust abstract machine an `asm!`
//! block is an opaque operation on the memory its pointers reach, like a call into foreign
//! code: the compiler neither sees nor reorders its accesses and assumes nothing about the
//! bytes afterwards. Two such copies racing on the same bytes are two hardware accesses, and
//! x86-64 defines them: each aligned load or store of up to 8 bytes is single-copy atomic,
//! wider and unaligned ones may tear at any byte boundary, and nothing else can happen. The
//! observable effect of each copy is a sequence of per-byte relaxed accesses in unspecified
//! order. Memory ordering is the caller's business: these copies order nothing (they are
//! relaxed); completion flags, counters and barriers supply the happens-before edges, as
//! GASNet's and UPC++'s memory models say.
//!
//! **What this does not make defined in Rust's model.** A racy program can also mix these
//! byte-granular copies with [`AtomicU64`](std::sync::atomic::AtomicU64) read-modify-writes
//! (remote atomics) on the same word at the same time. That is a *mixed-size* race, which
//! Rust's memory model does not allow (atomic accesses of different sizes to overlapping
//! bytes must not race); its outcome here is the one x86-64 gives (each byte is either
//! before or after the atomic update; the atomic is never lost or torn), relied on as a
//! property of the hardware, not promised by the language. A correctly synchronized program,
//! one that does not mix plain transfers and atomics on a word without synchronization (the
//! rule UPC++ and GASNet-EX state for their atomic domains), never reaches that case.
//!
//! # Other architectures
//!
//! Only x86-64 is supported, and other targets fail to compile. A portable fallback through
//! per-byte `AtomicU8` views is not sound as safe code would use it: the private side of a
//! copy is an ordinary `&[u8]`, whose pointer lacks the write provenance an atomic view
//! requires, and the mixed-size race above would become one between Rust atomics, which the
//! language leaves undefined rather than to the hardware. A port needs its own assembly
//! copies with the same per-byte model, argued for that architecture.
//!
//! # Safety contract of every function here
//!
//! Each shared pointer must be valid for the stated number of bytes for the whole call (in
//! bounds of a live segment or shared window); no alignment is required. The private side is
//! an ordinary Rust slice, so it can never overlap shared memory (no reference to shared
//! memory exists anywhere).

use bytemuck::Pod;

/// Copies `src` into shared memory at `dst`.
///
/// # Safety
/// `dst .. dst + src.len()` is valid shared memory (module contract).
#[inline]
pub unsafe fn copy_in(dst: *mut u8, src: &[u8]) {
    // SAFETY: the caller's contract; `src` is a live slice of the same length.
    unsafe { arch::copy(dst, src.as_ptr(), src.len()) }
}

/// Copies shared memory at `src` into `dst`.
///
/// # Safety
/// `src .. src + dst.len()` is valid shared memory (module contract).
#[inline]
pub unsafe fn copy_out(src: *const u8, dst: &mut [u8]) {
    // SAFETY: the caller's contract; `dst` is a live, exclusive slice of the same length.
    unsafe { arch::copy(dst.as_mut_ptr(), src, dst.len()) }
}

/// Sets `len` shared bytes at `dst` to `byte`.
///
/// # Safety
/// `dst .. dst + len` is valid shared memory (module contract).
pub unsafe fn fill(dst: *mut u8, byte: u8, len: usize) {
    // SAFETY: the caller's contract.
    unsafe { arch::fill(dst, byte, len) }
}

/// Reads a plain-old-data value from shared memory (one `mov` for 1, 2, 4 and 8 bytes).
///
/// # Safety
/// `src .. src + size_of::<T>()` is valid shared memory (module contract); any alignment.
#[inline]
pub unsafe fn load<T: Pod>(src: *const T) -> T {
    let mut value = T::zeroed();
    // SAFETY: the caller's contract; every bit pattern is a valid `T` (`Pod`).
    unsafe { copy_out(src.cast(), bytemuck::bytes_of_mut(&mut value)) };
    value
}

/// Writes a plain-old-data value into shared memory (one `mov` for 1, 2, 4 and 8 bytes).
///
/// # Safety
/// `dst .. dst + size_of::<T>()` is valid shared memory (module contract); any alignment.
#[inline]
pub unsafe fn store<T: Pod>(dst: *mut T, value: T) {
    // SAFETY: the caller's contract.
    unsafe { copy_in(dst.cast(), bytemuck::bytes_of(&value)) }
}

/// Bytes from which the x86-64 copy uses `rep movsb` where the CPU has fast strings (ERMS):
/// for large copies it beats the AVX loop, from the caches and to them alike, but its
/// start-up cost makes it lose on small ones (`bridge-bench`'s `put_bandwidth` lines show
/// where the two cross).
const REP_MOVSB_MIN: usize = 32 << 10;

#[cfg(target_arch = "x86_64")]
mod arch {
    use std::arch::asm;

    // Each helper below is one instruction on memory reached only through its pointer
    // operands; none touches the stack or the flags. The direction flag is clear on entry
    // to every `asm!` block (a Rust guarantee), so the string instructions copy forwards.

    macro_rules! scalar {
        ($load:ident, $store:ident, $t:ty, $class:ident, $reg:literal, $width:literal) => {
            /// # Safety
            /// `p` is valid for the access (module contract).
            #[inline(always)]
            unsafe fn $load(p: *const u8) -> $t {
                let v: $t;
                // SAFETY: the caller's contract.
                unsafe {
                    asm!(concat!("mov {v", $reg, "}, ", $width, " ptr [{p}]"),
                        p = in(reg) p, v = lateout($class) v,
                        options(nostack, preserves_flags, readonly))
                };
                v
            }
            /// # Safety
            /// `p` is valid for the access (module contract).
            #[inline(always)]
            unsafe fn $store(p: *mut u8, v: $t) {
                // SAFETY: the caller's contract.
                unsafe {
                    asm!(concat!("mov ", $width, " ptr [{p}], {v", $reg, "}"),
                        p = in(reg) p, v = in($class) v,
                        options(nostack, preserves_flags))
                };
            }
        };
    }
    scalar!(load8, store8, u8, reg_byte, "", "byte");
    scalar!(load16, store16, u16, reg, ":x", "word");
    scalar!(load32, store32, u32, reg, ":e", "dword");
    scalar!(load64, store64, u64, reg, ":r", "qword");

    /// Copies `16 < len <= 32` bytes: the first and the last 16 (overlapping), all loads
    /// before all stores in one block (separate load-store pairs serialize on each other).
    ///
    /// # Safety
    /// Both ranges valid for `len` bytes, not overlapping; `16 <= len`.
    #[inline(always)]
    unsafe fn copy_upto32(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract: `[0, 16)` and `[len - 16, len)` lie in both ranges.
        // SSE2 is part of x86-64.
        unsafe {
            asm!(
                "movdqu {a}, xmmword ptr [{s}]",
                "movdqu {b}, xmmword ptr [{se} - 16]",
                "movdqu xmmword ptr [{d}], {a}",
                "movdqu xmmword ptr [{de} - 16], {b}",
                s = in(reg) src, d = in(reg) dst,
                se = in(reg) src.add(len), de = in(reg) dst.add(len),
                a = out(xmm_reg) _, b = out(xmm_reg) _,
                options(nostack, preserves_flags))
        };
    }

    /// Copies `32 < len <= 64` bytes: the first and the last 32, as in [`copy_upto32`].
    ///
    /// # Safety
    /// Both ranges valid for `len` bytes, not overlapping; `32 <= len`.
    #[inline(always)]
    unsafe fn copy_upto64(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract: `[0, 32)` and `[len - 32, len)` lie in both ranges.
        unsafe {
            asm!(
                "movdqu {a}, xmmword ptr [{s}]",
                "movdqu {b}, xmmword ptr [{s} + 16]",
                "movdqu {c}, xmmword ptr [{se} - 32]",
                "movdqu {e}, xmmword ptr [{se} - 16]",
                "movdqu xmmword ptr [{d}], {a}",
                "movdqu xmmword ptr [{d} + 16], {b}",
                "movdqu xmmword ptr [{de} - 32], {c}",
                "movdqu xmmword ptr [{de} - 16], {e}",
                s = in(reg) src, d = in(reg) dst,
                se = in(reg) src.add(len), de = in(reg) dst.add(len),
                a = out(xmm_reg) _, b = out(xmm_reg) _, c = out(xmm_reg) _, e = out(xmm_reg) _,
                options(nostack, preserves_flags))
        };
    }

    /// Whether the CPU has enhanced `rep movsb` (ERMS), detected once as [`has_avx`] is.
    #[inline(always)]
    fn has_erms() -> bool {
        std::arch::is_x86_feature_detected!("ermsb")
    }

    /// Whether the 32-byte loop may run: AVX in the CPU and enabled by the OS, detected once
    /// (std caches the answer; the check is one relaxed load).
    #[inline(always)]
    fn has_avx() -> bool {
        std::arch::is_x86_feature_detected!("avx")
    }

    /// Copies `len > 64` bytes with 32-byte loads and stores: 128 bytes per iteration, then
    /// 32 at a time, the last 32 bytes overlapping what came before (written twice, with the
    /// same values). One `asm!` block, so the upper halves are cleaned once (`vzeroupper`).
    ///
    /// # Safety
    /// Both ranges valid for `len` bytes and not overlapping; `len > 64`; the CPU has AVX.
    #[inline(always)]
    unsafe fn copy_avx(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract. Every load reads `[s, s + 32)` with `s + 32 <= src +
        // len` (the loops run while at least 128, then more than 32, bytes remain), the last
        // pair reads and writes the final 32 bytes, and the stores mirror the loads at `dst`.
        // The ymm registers used are declared clobbered.
        unsafe {
            std::arch::asm!(
                "cmp {n}, 128",
                "jb 3f",
                "2:",
                "vmovdqu ymm0, ymmword ptr [{s}]",
                "vmovdqu ymm1, ymmword ptr [{s} + 32]",
                "vmovdqu ymm2, ymmword ptr [{s} + 64]",
                "vmovdqu ymm3, ymmword ptr [{s} + 96]",
                "vmovdqu ymmword ptr [{d}], ymm0",
                "vmovdqu ymmword ptr [{d} + 32], ymm1",
                "vmovdqu ymmword ptr [{d} + 64], ymm2",
                "vmovdqu ymmword ptr [{d} + 96], ymm3",
                "add {s}, 128",
                "add {d}, 128",
                "sub {n}, 128",
                "cmp {n}, 128",
                "jae 2b",
                "3:",
                "cmp {n}, 32",
                "jbe 4f",
                "vmovdqu ymm0, ymmword ptr [{s}]",
                "vmovdqu ymmword ptr [{d}], ymm0",
                "add {s}, 32",
                "add {d}, 32",
                "sub {n}, 32",
                "jmp 3b",
                "4:",
                "vmovdqu ymm0, ymmword ptr [{se}]",
                "vmovdqu ymmword ptr [{de}], ymm0",
                "vzeroupper",
                s = inout(reg) src => _,
                d = inout(reg) dst => _,
                n = inout(reg) len => _,
                se = in(reg) src.add(len - 32),
                de = in(reg) dst.add(len - 32),
                out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
                options(nostack),
            );
        }
    }

    /// # Safety
    /// Both ranges valid for `len` bytes and not overlapping.
    #[inline(always)]
    unsafe fn rep_movsb(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract; DF is clear on entry to `asm!`.
        unsafe {
            asm!("rep movsb",
                inout("rcx") len => _, inout("rdi") dst => _, inout("rsi") src => _,
                options(nostack, preserves_flags))
        };
    }

    /// Copies `len` bytes between non-overlapping ranges, at least one of them shared.
    /// A word (8 bytes; aligned, it is one single-copy-atomic `mov`) is copied inline; every
    /// other size is one call away, so that a put's or get's whole path stays small enough to
    /// be inlined into its caller (a put that is not inlined pays a store-forwarding stall on
    /// its returned ack, which dominates an 8-byte put).
    ///
    /// # Safety
    /// Both ranges valid for `len` bytes and not overlapping.
    #[inline(always)]
    pub(super) unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY: the caller's contract; `len` is 8 in the first arm.
        unsafe {
            if len == 8 {
                store64(dst, load64(src));
            } else {
                copy_any(dst, src, len);
            }
        }
    }

    /// [`copy`] for any length: two possibly overlapping moves up to 64 bytes, then a 32-byte
    /// AVX loop, or `rep movsb` from [`super::REP_MOVSB_MIN`] bytes with ERMS (and without AVX).
    ///
    /// # Safety
    /// Both ranges valid for `len` bytes and not overlapping.
    #[inline(never)]
    unsafe fn copy_any(dst: *mut u8, src: *const u8, len: usize) {
        // SAFETY (the whole body): every access lies in `[0, len)` of its range, which the
        // caller guarantees valid; each arm's moves are no wider than the arm's least `len`.
        unsafe {
            match len {
                0 => {}
                1 => store8(dst, load8(src)),
                2..=3 => {
                    let (a, b) = (load16(src), load16(src.add(len - 2)));
                    store16(dst, a);
                    store16(dst.add(len - 2), b);
                }
                4..=7 => {
                    let (a, b) = (load32(src), load32(src.add(len - 4)));
                    store32(dst, a);
                    store32(dst.add(len - 4), b);
                }
                8..=16 => {
                    let (a, b) = (load64(src), load64(src.add(len - 8)));
                    store64(dst, a);
                    store64(dst.add(len - 8), b);
                }
                17..=32 => copy_upto32(dst, src, len),
                33..=64 => copy_upto64(dst, src, len),
                _ if len >= super::REP_MOVSB_MIN && has_erms() => rep_movsb(dst, src, len),
                _ if has_avx() => copy_avx(dst, src, len),
                _ => rep_movsb(dst, src, len),
            }
        }
    }

    /// Sets `len` bytes at `dst` to `byte`.
    ///
    /// # Safety
    /// `dst` valid for `len` bytes.
    pub(super) unsafe fn fill(dst: *mut u8, byte: u8, len: usize) {
        // SAFETY: the caller's contract; DF is clear on entry to `asm!`.
        unsafe {
            asm!("rep stosb",
                inout("rcx") len => _, inout("rdi") dst => _, in("al") byte,
                options(nostack, preserves_flags))
        };
    }
}

#[cfg(not(target_arch = "x86_64"))]
compile_error!(
    "gasnet-bridge supports only x86-64: its shared-memory copies are x86-64 assembly whose \
     per-byte model is argued for that architecture (see the `shared_copy` module doc)"
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

    /// A page-aligned heap buffer standing in for a segment, reached by raw pointer only.
    struct Shared {
        base: *mut u8,
        len: usize,
    }
    // SAFETY: the bytes are only touched through this module's functions and atomics.
    unsafe impl Send for Shared {}
    // SAFETY: as above.
    unsafe impl Sync for Shared {}
    impl Shared {
        fn new(len: usize) -> Shared {
            let layout = std::alloc::Layout::from_size_align(len, 4096).unwrap();
            // SAFETY: non-zero size.
            let base = unsafe { std::alloc::alloc_zeroed(layout) };
            assert!(!base.is_null());
            Shared { base, len }
        }
    }
    impl Drop for Shared {
        fn drop(&mut self) {
            let layout = std::alloc::Layout::from_size_align(self.len, 4096).unwrap();
            // SAFETY: allocated in `new` with this layout.
            unsafe { std::alloc::dealloc(self.base, layout) };
        }
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    /// Every length that picks a different path (and its neighbours) at every alignment of
    /// both ends: exactly the bytes asked for move, and the bytes around them stay.
    #[test]
    fn every_size_class_at_every_alignment() {
        let s = Shared::new(128 << 10);
        let lens = [
            0usize,
            1,
            2,
            3,
            4,
            5,
            7,
            8,
            9,
            15,
            16,
            17,
            31,
            32,
            33,
            63,
            64,
            127,
            128,
            129,
            255,
            256,
            300,
            1000,
            4095,
            // Either side of `rep movsb`'s threshold.
            super::REP_MOVSB_MIN - 1,
            super::REP_MOVSB_MIN,
            super::REP_MOVSB_MIN + 1,
            100_003,
        ];
        for &len in &lens {
            for off in 0..9 {
                let src = pattern(len, off as u8);
                // SAFETY: 0xAA fill and the copy stay inside the 128 KiB buffer.
                unsafe {
                    fill(s.base, 0xAA, s.len);
                    copy_in(s.base.add(64 + off), &src);
                }
                let mut all = vec![0u8; s.len];
                // SAFETY: the whole buffer.
                unsafe { copy_out(s.base, &mut all) };
                assert_eq!(
                    &all[64 + off..64 + off + len],
                    &src[..],
                    "len {len} off {off}"
                );
                assert!(
                    all[..64 + off].iter().all(|&b| b == 0xAA),
                    "before, len {len}"
                );
                assert!(
                    all[64 + off + len..].iter().all(|&b| b == 0xAA),
                    "after, len {len}"
                );
                let mut back = vec![0u8; len];
                // SAFETY: inside the buffer.
                unsafe { copy_out(s.base.add(64 + off), &mut back) };
                assert_eq!(back, src);
            }
        }
    }

    #[test]
    fn typed_load_and_store_any_alignment() {
        let s = Shared::new(4096);
        // SAFETY: inside the buffer.
        unsafe {
            store(s.base.add(3).cast::<f64>(), 1.5f64);
            assert_eq!(load(s.base.add(3).cast::<f64>()), 1.5);
            store(s.base.add(16).cast::<[u32; 5]>(), [1, 2, 3, 4, 5]);
            assert_eq!(load(s.base.add(16).cast::<[u32; 5]>()), [1, 2, 3, 4, 5]);
        }
    }

    /// The edge of the contract: two threads copying different patterns into the same bytes,
    /// a third reading them and a fourth doing atomic adds on an aligned word in the middle,
    /// all at once. The program is racy on purpose; what may come out is torn data, and the
    /// test checks only what the model promises: aligned 8-byte stores are never torn, and
    /// every byte read is one some writer wrote.
    #[test]
    fn racing_copies_tear_but_never_invent() {
        racing_copies(1024);
    }

    /// [`racing_copies_tear_but_never_invent`] with blocks that `rep movsb` copies.
    #[test]
    fn racing_large_copies_tear_but_never_invent() {
        racing_copies(super::REP_MOVSB_MIN + 8);
    }

    fn racing_copies(block_len: usize) {
        let word_at = block_len.next_multiple_of(64) + 1024;
        let add_at = word_at + 1024;
        let s = Arc::new(Shared::new(add_at + 1024));
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for value in [0x1111_1111_1111_1111u64, 0x2222_2222_2222_2222] {
            let (s, stop) = (s.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                let block = vec![value.to_ne_bytes()[0]; block_len];
                while !stop.load(Ordering::Relaxed) {
                    // SAFETY: inside the buffer.
                    unsafe {
                        copy_in(s.base, &block);
                        store(s.base.add(word_at).cast::<u64>(), value);
                    }
                }
            }));
        }
        let adder = {
            let s = s.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                // SAFETY: `add_at` is 64-byte aligned and inside the buffer.
                let word = unsafe { AtomicU64::from_ptr(s.base.add(add_at).cast()) };
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    word.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
                n
            })
        };
        let mut block = vec![0u8; block_len];
        for _ in 0..20_000 {
            // SAFETY: inside the buffer.
            let word: u64 = unsafe {
                copy_out(s.base, &mut block);
                load(s.base.add(word_at).cast::<u64>())
            };
            assert!(block.iter().all(|&b| b == 0 || b == 0x11 || b == 0x22));
            assert!(
                [0, 0x1111_1111_1111_1111, 0x2222_2222_2222_2222].contains(&word),
                "aligned 8-byte store torn: {word:#x}"
            );
        }
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
        let adds = adder.join().unwrap();
        // SAFETY: the writers have been joined.
        let counted: u64 = unsafe { load(s.base.add(add_at).cast::<u64>()) };
        assert_eq!(counted, adds, "no atomic add lost to the copies around it");
    }
}
