//! Read buffers lent per thread, as HAProxy lends its buffers: a connection holds one only while
//! it reads, gives it back when it goes idle, and the next read anywhere on the thread takes the
//! one most recently given back, its memory still in the cache.
//!
//! Why (issue 49): the lean server and the lean client each let go of their read buffer between
//! requests (an idle connection holds none), so every proxied GET allocated a 4 KiB and an 8 KiB
//! buffer anew. Blocks that size take mimalloc's general path, not its small-block free list:
//! keeping both buffers instead took 1,100 of 32,500 instructions off a GET (callgrind).
//!
//! A buffer given back may still be shared: the head just parsed from it, or a body chunk on its
//! way to the client, holds part of its memory. It is kept all the same, and [`Pool::take`]
//! hands out only one whose memory it can reclaim whole (`BytesMut::try_reclaim`: nothing else
//! refers to it); one still shared waits its turn or is dropped when [`KEEP`] newer ones came
//! after it. Never a buffer in use: bytes another handle still reads are not overwritten.

use bytes::BytesMut;
use std::cell::RefCell;

/// Buffers a pool keeps per thread at most ([`crate::spare::KEEP`]); the oldest goes when one
/// more is given. A take looks at the four most recently given for one it can reclaim.
pub const KEEP: usize = crate::spare::KEEP;

thread_local! {
    /// Each size's buffers on this thread (two sizes in the proxy: a lookup among two).
    static POOLS: RefCell<Vec<(usize, Vec<BytesMut>)>> = const { RefCell::new(Vec::new()) };
}

/// The read buffers of one size, each thread its own list of them; a `static` used through
/// [`Pool::take`] and [`Pool::give`].
#[derive(Debug)]
pub struct Pool {
    size: usize,
}

impl Pool {
    /// The pool of buffers of `size` bytes.
    pub const fn new(size: usize) -> Self {
        Self { size }
    }

    /// Runs `f` on this thread's list of the pool's buffers.
    fn with<R>(&self, f: impl FnOnce(&mut Vec<BytesMut>) -> R) -> R {
        POOLS.with_borrow_mut(|pools| {
            let at = match pools.iter().position(|(size, _)| *size == self.size) {
                Some(at) => at,
                None => {
                    pools.push((self.size, Vec::new()));
                    pools.len() - 1
                }
            };
            f(&mut pools[at].1)
        })
    }

    /// An empty buffer with room for at least the pool's size: the most recently given one
    /// nothing else refers to any more, or a new one.
    pub fn take(&self) -> BytesMut {
        let size = self.size;
        let reused = self.with(|bufs| crate::spare::take_fitting(bufs, |b| b.try_reclaim(size)));
        reused.unwrap_or_else(|| BytesMut::with_capacity(size))
    }

    /// Gives `buf` back, emptied; a buffer grown past twice the pool's size is let go (a long
    /// head's), as is the oldest kept when the pool is full.
    pub fn give(&self, mut buf: BytesMut) {
        if buf.capacity() == 0 || buf.capacity() > 2 * self.size {
            return;
        }
        buf.clear();
        self.with(|bufs| crate::spare::keep(bufs, buf));
    }
}

#[cfg(test)]
mod tests {
    use super::{Pool, KEEP};
    use bytes::BytesMut;

    static POOL: Pool = Pool::new(64);

    fn kept() -> usize {
        POOL.with(|bufs| bufs.len())
    }

    #[test]
    fn a_buffer_given_back_is_taken_again_whole() {
        let mut buf = POOL.take();
        assert!(buf.capacity() >= 64);
        let first = buf.as_ptr();
        buf.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let head = buf.split_to(18).freeze();
        drop(head);
        POOL.give(buf);
        let again = POOL.take();
        assert_eq!(again.as_ptr(), first, "the same memory, from its start");
        assert!(again.is_empty() && again.capacity() >= 64);
        assert_eq!(kept(), 0);
    }

    #[test]
    fn a_buffer_still_shared_is_not_handed_out() {
        let mut buf = POOL.take();
        buf.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\nok\n");
        let body = buf.split_to(22).freeze();
        let shared = buf.as_ptr();
        POOL.give(buf);
        let other = POOL.take();
        assert_ne!(other.as_ptr(), shared);
        assert_eq!(
            &body[..],
            b"HTTP/1.1 200 OK\r\n\r\nok\n",
            "what it holds is untouched"
        );
        assert_eq!(kept(), 1, "kept for when it is free");
        drop(body);
        let freed = POOL.take();
        assert_eq!(kept(), 0);
        assert!(freed.capacity() >= 64);
        drop((other, freed));
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_and_lets_large_ones_go() {
        for _ in 0..KEEP + 5 {
            POOL.give(BytesMut::with_capacity(64));
        }
        assert_eq!(kept(), KEEP);
        POOL.give(BytesMut::with_capacity(1024));
        assert_eq!(kept(), KEEP);
        POOL.with(Vec::clear);
    }
}
