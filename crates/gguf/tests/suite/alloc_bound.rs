//! No allocation is sized by what a header merely claims: with a counting allocator, hostile
//! inputs of a few dozen bytes that claim 2^60 entries, bytes or elements never cause an
//! allocation much larger than the input itself.

use crate::common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use common::Raw;
use tessera_gguf::{GgufFile, StreamParser};

struct MaxAlloc;

thread_local! {
    /// Largest single allocation on this thread since the last reset.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator unchanged; only records the largest size asked for.
unsafe impl GlobalAlloc for MaxAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = LARGEST.try_with(|m| m.set(m.get().max(layout.size())));
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = LARGEST.try_with(|m| m.set(m.get().max(new_size)));
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOC: MaxAlloc = MaxAlloc;

/// Largest allocation made while reading `file` with the slice reader and the stream parser
/// (both modes, 7-byte chunks).
fn largest_allocation(file: &[u8]) -> usize {
    let copy = file.to_vec();
    LARGEST.with(|m| m.set(0));
    let _ = GgufFile::from_bytes(copy);
    for mut p in [StreamParser::new(), StreamParser::pieces()] {
        for c in file.chunks(7) {
            if p.feed(c).is_err() {
                break;
            }
        }
        let _ = p.finish();
    }
    LARGEST.with(|m| m.get())
}

#[test]
fn hostile_claims_do_not_size_allocations() {
    let huge = 1u64 << 60;
    let cases = [
        ("2^60 entries", Raw::header(3, 0, huge).bytes(&[0; 64])),
        ("2^60 tensors", Raw::header(3, huge, 0).bytes(&[0; 64])),
        (
            "2^60-byte key",
            Raw::header(3, 0, 1).u64(huge).bytes(&[b'k'; 64]),
        ),
        (
            "2^60-byte string value",
            Raw::header(3, 0, 1)
                .str("k")
                .u32(8)
                .u64(huge)
                .bytes(&[0; 64]),
        ),
        (
            "2^60 u8 array",
            Raw::header(3, 0, 1)
                .str("k")
                .u32(9)
                .u32(0)
                .u64(huge)
                .bytes(&[0; 64]),
        ),
        (
            "2^60 string array",
            Raw::header(3, 0, 1)
                .str("k")
                .u32(9)
                .u32(8)
                .u64(huge)
                .bytes(&[0; 64]),
        ),
        (
            "2^60 nested arrays",
            Raw::header(3, 0, 1)
                .str("k")
                .u32(9)
                .u32(9)
                .u64(huge)
                .bytes(&[0; 64]),
        ),
        (
            "2^40-element tensor",
            Raw::header(3, 1, 0)
                .tensor("t", &[1 << 40], 0, 0)
                .data(32, 64),
        ),
        (
            "tensor at 2^50",
            Raw::header(3, 1, 0)
                .tensor("t", &[8], 0, 1 << 50)
                .data(32, 64),
        ),
    ];
    for (what, raw) in cases {
        let largest = largest_allocation(&raw.0);
        // Small fixed-size bookkeeping is fine; anything near the claims is not.
        assert!(
            largest <= 4096,
            "{what}: allocated {largest} bytes for a {}-byte input",
            raw.len()
        );
    }
}

#[test]
fn arrays_that_fit_allocate_in_proportion_to_the_input() {
    // A real array of 4000 u8s: one Value each (the in-memory form is bigger than one byte,
    // but bounded by a fixed factor of the input).
    let raw = Raw::header(3, 0, 1)
        .str("k")
        .u32(9)
        .u32(0)
        .u64(4000)
        .bytes(&[1; 4000]);
    let largest = largest_allocation(&raw.0);
    assert!(largest <= 4000 * 40, "allocated {largest}");
}

#[test]
fn the_counting_allocator_sees_allocations() {
    LARGEST.with(|m| m.set(0));
    let v = std::hint::black_box(vec![0u8; 100_000]);
    drop(v);
    assert!(LARGEST.with(|m| m.get()) >= 100_000);
}
