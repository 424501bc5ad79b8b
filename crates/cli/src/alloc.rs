//! The process-wide allocator: mimalloc.
//!
//! Why: hyper's HTTP/1.1 client allocates a few small blocks per request (the request and
//! response header maps, the dispatch callback, the body channel). Under `tailguard load
//! --rate 0` glibc's malloc and free were the largest user-space cost after hyper itself;
//! mimalloc's thread-local free lists make each of them a few instructions. Every verb gets
//! it (the proxy and `serve` allocate per request the same way).

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
