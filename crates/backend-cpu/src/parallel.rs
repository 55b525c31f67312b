//! Splitting work over the injected thread pool.

use tessera_core::threading::ThreadPool;

/// A raw pointer to an output buffer that tasks write to at disjoint indices.
#[derive(Clone, Copy)]
pub struct SharedOut<T> {
    ptr: *mut T,
    len: usize,
}

// SAFETY: tasks only write through `write`, each to indices no other task touches (the callers
// split outputs by disjoint ranges), and the buffer outlives the pool's `run`, which joins all
// tasks before returning.
unsafe impl<T: Send> Send for SharedOut<T> {}
unsafe impl<T: Send> Sync for SharedOut<T> {}

impl<T> SharedOut<T> {
    pub fn new(buf: &mut [T]) -> Self {
        SharedOut {
            ptr: buf.as_mut_ptr(),
            len: buf.len(),
        }
    }

    /// Writes `value` at `i`. Callers guarantee no other task writes or reads index `i`
    /// during the same `run`.
    #[inline(always)]
    pub fn write(&self, i: usize, value: T) {
        assert!(i < self.len);
        // SAFETY: in bounds (checked above); disjointness across tasks is the caller's contract.
        unsafe { self.ptr.add(i).write(value) }
    }

    /// A mutable view of `start .. start + n`. Callers guarantee the range is disjoint from
    /// every other task's during the same `run`.
    #[allow(clippy::mut_from_ref)]
    pub fn slice(&self, start: usize, n: usize) -> &mut [T] {
        assert!(start <= self.len && n <= self.len - start);
        // SAFETY: in bounds (checked above); disjointness across tasks is the caller's contract.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(start), n) }
    }
}

/// Splits `0..n` into at most `n_tasks` contiguous chunks whose sizes are multiples of `align`
/// (except the last) and runs `f(range)` for each on the pool.
pub fn for_each_chunk(
    pool: &dyn ThreadPool,
    n: usize,
    n_tasks: usize,
    align: usize,
    f: &(dyn Fn(std::ops::Range<usize>) + Sync),
) {
    if n == 0 {
        return;
    }
    let align = align.max(1);
    let per = n.div_ceil(n_tasks.max(1)).div_ceil(align) * align;
    let chunks = n.div_ceil(per);
    if chunks == 1 {
        f(0..n);
        return;
    }
    pool.run(chunks, &|c| {
        let start = c * per;
        f(start..(start + per).min(n));
    });
}

/// Elements per task below which a row-wise op is not split: waking a thread costs more than
/// a decode step's few thousand elements take.
pub const MIN_TASK_ELEMENTS: usize = 1 << 14;

/// Runs `f(rows, out_rows)` over `out` viewed as rows of `width` floats: `out_rows` is the part
/// of `out` holding `rows`. Long batches are split over the pool's threads at row boundaries, so
/// each row is computed exactly as in one call; short ones run on the calling thread.
pub fn for_each_row_range(
    pool: &dyn ThreadPool,
    out: &mut [f32],
    width: usize,
    f: &(dyn Fn(std::ops::Range<usize>, &mut [f32]) + Sync),
) {
    if width == 0 || out.is_empty() {
        return;
    }
    let n_rows = out.len() / width;
    let n_tasks = pool.n_threads().min(out.len() / MIN_TASK_ELEMENTS).max(1);
    if n_tasks == 1 {
        f(0..n_rows, out);
        return;
    }
    let shared = SharedOut::new(out);
    for_each_chunk(pool, n_rows, n_tasks, 1, &|rows| {
        let dst = shared.slice(rows.start * width, rows.len() * width);
        f(rows, dst);
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::ReversePool;

    #[test]
    fn row_ranges_cover_every_row_once_at_row_boundaries() {
        for (n_rows, width) in [(1, 7), (3, 5), (200, 300), (1001, 64)] {
            let mut out = vec![0.0f32; n_rows * width];
            for_each_row_range(&ReversePool(3), &mut out, width, &|rows, dst| {
                assert_eq!(dst.len(), rows.len() * width);
                for (r, row) in rows.zip(dst.chunks_exact_mut(width)) {
                    for (i, x) in row.iter_mut().enumerate() {
                        *x += (r * width + i) as f32;
                    }
                }
            });
            for (i, x) in out.iter().enumerate() {
                assert_eq!(*x, i as f32);
            }
        }
    }
}
