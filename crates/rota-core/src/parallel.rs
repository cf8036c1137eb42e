//! Work split over the machine's cores where items are independent (reading a 10,000-cluster
//! fleet's files, its notes): contiguous chunks, one scoped thread each, results in the
//! items' order, so a caller that joins them gets what one pass would have given.

/// At most this many threads: past it, reading a fleet waits on the disk and the allocator.
const MAX_THREADS: usize = 8;

/// Below this many items one thread does the work (spawning costs more than it saves).
pub const PARALLEL_FROM: usize = 256;

/// `work` applied to contiguous chunks of `items` covering them in order, one chunk per core
/// (a single chunk, on this thread, for fewer than [`PARALLEL_FROM`] items or one core). A
/// panic in a chunk is the caller's panic.
pub fn in_chunks<T: Sync, R: Send>(items: &[T], work: impl Fn(&[T]) -> R + Sync) -> Vec<R> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(MAX_THREADS);
    if threads < 2 || items.len() < PARALLEL_FROM {
        return vec![work(items)];
    }
    let work = &work;
    std::thread::scope(|s| {
        let handles: Vec<_> = items
            .chunks(items.len().div_ceil(threads))
            .map(|part| s.spawn(move || work(part)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_items_in_order() {
        for n in [0, 1, PARALLEL_FROM - 1, PARALLEL_FROM, 10_001] {
            let items: Vec<usize> = (0..n).collect();
            let joined: Vec<usize> = in_chunks(&items, |part| part.to_vec())
                .into_iter()
                .flatten()
                .collect();
            assert_eq!(joined, items, "{n} items");
        }
    }
}
