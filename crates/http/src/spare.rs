//! Header maps and head buffers lent per thread, as [`crate::bufpool`] lends read buffers: the
//! request's and the response's header maps and the bytes of the two heads a proxied exchange
//! writes are given back once done with, and the next exchange on the thread takes the most
//! recently given, its memory still in the cache.
//!
//! Why (issue 49): each proxied GET made six such allocations (two maps of two blocks each, two
//! head buffers), each a trip through the allocator's size-class tables and page headers, which
//! a GET otherwise does not touch: about four L1 data misses apiece in callgrind's model. Only
//! empty maps and buffers are kept (a map's values, which share the read buffers' memory, go
//! when it is given back), at most [`KEEP`] of each per thread, and none grown past a bound.

use http::HeaderMap;
use std::cell::RefCell;

/// Maps, and head buffers, kept per thread at most.
pub const KEEP: usize = 16;

/// A map with room for more fields than this is let go when given back (a long head's).
pub const MAX_FIELDS: usize = 64;

/// A head buffer of more bytes than this is let go when given back (one that carried a body).
pub const MAX_HEAD: usize = 4096;

thread_local! {
    static MAPS: RefCell<Vec<HeaderMap>> = const { RefCell::new(Vec::new()) };
    static HEADS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// How many of the most recently given maps (or heads) a take looks at for one with the room
/// asked for (a request's and a response's differ in room, and they are given back in turn).
const LOOK: usize = 4;

/// An empty header map with room for `fields` fields: the most recently given back of those
/// with the room, or a new one.
pub fn map(fields: usize) -> HeaderMap {
    MAPS.with_borrow_mut(|maps| take_fitting(maps, |map| map.capacity() >= fields))
        .unwrap_or_else(|| HeaderMap::with_capacity(fields))
}

/// Gives `map` back, emptied (its values dropped here); one with room for more than
/// [`MAX_FIELDS`] is let go, as is the oldest kept once [`KEEP`] are.
pub fn give_map(mut map: HeaderMap) {
    if map.capacity() == 0 || map.capacity() > MAX_FIELDS {
        return;
    }
    map.clear();
    MAPS.with_borrow_mut(|maps| keep(maps, map));
}

/// An empty buffer with room for at least `bytes` bytes: the most recently given back of those
/// with the room, or a new one.
pub fn head(bytes: usize) -> Vec<u8> {
    HEADS
        .with_borrow_mut(|heads| take_fitting(heads, |head| head.capacity() >= bytes))
        .unwrap_or_else(|| Vec::with_capacity(bytes))
}

/// Gives `out` back, emptied; one grown past [`MAX_HEAD`] bytes is let go, as is any beyond
/// [`KEEP`] (the oldest kept).
pub fn give_head(mut out: Vec<u8>) {
    if out.capacity() == 0 || out.capacity() > MAX_HEAD {
        return;
    }
    out.clear();
    HEADS.with_borrow_mut(|heads| keep(heads, out));
}

/// `item` kept as the most recent; the oldest goes when [`KEEP`] already are. Shared with
/// [`crate::bufpool`], whose lists follow the same rules.
pub(crate) fn keep<T>(kept: &mut Vec<T>, item: T) {
    if kept.len() == KEEP {
        kept.remove(0);
    }
    kept.push(item);
}

/// The most recently given of the last [`LOOK`] in `kept` that `fits`, taken out (`fits` may
/// ready it: `bufpool` reclaims a buffer's memory as it looks).
pub(crate) fn take_fitting<T>(
    kept: &mut Vec<T>,
    mut fits: impl FnMut(&mut T) -> bool,
) -> Option<T> {
    let from = kept.len().saturating_sub(LOOK);
    let at = (from..kept.len()).rev().find(|&i| fits(&mut kept[i]))?;
    Some(kept.remove(at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::{HeaderValue, HOST};

    #[test]
    fn a_map_given_back_is_taken_again_empty_with_its_room() {
        let mut first = map(8);
        first.insert(HOST, HeaderValue::from_static("a"));
        let room = first.capacity();
        give_map(first);
        let again = map(4);
        assert!(again.is_empty(), "given back emptied");
        assert_eq!(again.capacity(), room, "the same map's room");
        assert_eq!(MAPS.with_borrow(Vec::len), 0);
    }

    #[test]
    fn a_map_without_the_room_asked_for_is_not_handed_out() {
        give_map(map(4));
        let big = map(40);
        assert!(big.capacity() >= 40);
        assert_eq!(MAPS.with_borrow(Vec::len), 1, "the small one stays");
        // Given back after the small one, the big one is found for a small request too, and
        // the small one under it for another.
        let small_room = MAPS.with_borrow(|maps| maps[0].capacity());
        give_map(big);
        assert!(map(30).capacity() >= 40);
        give_map(map(40));
        let _taken = map(40);
        assert_eq!(map(small_room).capacity(), small_room, "the one under it");
        MAPS.with_borrow_mut(Vec::clear);
    }

    #[test]
    fn maps_and_heads_are_bounded_in_number_and_size() {
        for _ in 0..KEEP + 3 {
            give_map(HeaderMap::with_capacity(8));
            give_head(Vec::with_capacity(64));
        }
        assert_eq!(MAPS.with_borrow(Vec::len), KEEP);
        assert_eq!(HEADS.with_borrow(Vec::len), KEEP);
        MAPS.with_borrow_mut(Vec::clear);
        HEADS.with_borrow_mut(Vec::clear);
        give_map(HeaderMap::with_capacity(MAX_FIELDS * 2));
        give_head(Vec::with_capacity(MAX_HEAD * 2));
        assert_eq!(MAPS.with_borrow(Vec::len), 0, "a long head's map is let go");
        assert_eq!(HEADS.with_borrow(Vec::len), 0, "a body's buffer is let go");
    }

    #[test]
    fn a_head_given_back_is_taken_again_empty() {
        let mut out = head(100);
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\n");
        let at = out.as_ptr();
        give_head(out);
        let again = head(50);
        assert!(again.is_empty() && again.capacity() >= 100);
        assert_eq!(again.as_ptr(), at);
        let more = head(5000);
        assert!(more.capacity() >= 5000, "room as asked, whatever was kept");
    }
}
