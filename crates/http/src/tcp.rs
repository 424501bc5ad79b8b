//! TCP sockets with `TCP_NODELAY` set, accepted or dialed.
//!
//! # Example
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! use tailguard_http::tcp;
//! let listener = tcp::bind("127.0.0.1:0".parse().unwrap()).await?;
//! let addr = listener.local_addr()?;
//! let dialed = tcp::connect(addr, tcp::Nagle::Off).await?;
//! let (accepted, _) = tcp::accept(&listener, tcp::Nagle::Off).await?;
//! assert!(dialed.nodelay()? && accepted.nodelay()?);
//! # Ok(()) }
//! ```

use std::io;
use std::net::SocketAddr;
use tokio::net::{TcpListener, TcpSocket, TcpStream};

/// Whether Nagle's algorithm runs on a socket. `Off` (TCP_NODELAY set) everywhere by default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Nagle {
    /// TCP_NODELAY set: small writes leave at once.
    #[default]
    Off,
    /// Nagle's algorithm left on, for demonstrating its latency cost.
    On,
}

impl Nagle {
    fn nodelay(self) -> bool {
        self == Nagle::Off
    }
}

/// Binds a listener with `SO_REUSEADDR` (so restarted servers rebind at once) and a deep backlog.
pub async fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    listen(addr, false)
}

/// A listener on `addr` with `SO_REUSEADDR`, `SO_REUSEPORT` when `share`, and a deep backlog.
fn listen(addr: SocketAddr, share: bool) -> io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    if share {
        socket.set_reuseport(true)?;
    }
    socket.bind(addr)?;
    socket.listen(4096)
}

/// Binds `n` listeners on one address with `SO_REUSEPORT` (the kernel spreads new connections
/// over them), for `n` threads that each accept on their own; port 0 binds the first to a free
/// port and the others to the same. One listener is [`bind`]'s, without `SO_REUSEPORT`, so no
/// other socket can share its port.
///
/// # Errors
/// The first bind's error (the address in use, not permitted), or a later one's.
pub async fn bind_many(addr: SocketAddr, n: usize) -> io::Result<Vec<TcpListener>> {
    if n <= 1 {
        return Ok(vec![bind(addr).await?]);
    }
    let mut out: Vec<TcpListener> = Vec::with_capacity(n);
    let mut at = addr;
    for _ in 0..n {
        let listener = listen(at, true)?;
        at = listener.local_addr()?;
        out.push(listener);
    }
    Ok(out)
}

/// Accepts one connection and sets `TCP_NODELAY` on it per `nagle`.
pub async fn accept(listener: &TcpListener, nagle: Nagle) -> io::Result<(TcpStream, SocketAddr)> {
    let (stream, peer) = listener.accept().await?;
    stream.set_nodelay(nagle.nodelay())?;
    Ok((stream, peer))
}

/// Dials `addr` and sets `TCP_NODELAY` per `nagle`.
pub async fn connect(addr: SocketAddr, nagle: Nagle) -> io::Result<TcpStream> {
    let stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(nagle.nodelay())?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn nagle_on_leaves_nodelay_unset() {
        let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let dialed = connect(addr, Nagle::On).await.unwrap();
        let (accepted, _) = accept(&listener, Nagle::On).await.unwrap();
        assert!(!dialed.nodelay().unwrap());
        assert!(!accepted.nodelay().unwrap());
        let dialed = connect(addr, Nagle::Off).await.unwrap();
        let (accepted, _) = accept(&listener, Nagle::Off).await.unwrap();
        assert!(dialed.nodelay().unwrap());
        assert!(accepted.nodelay().unwrap());
    }

    #[tokio::test]
    async fn listeners_bound_together_share_a_port_and_one_alone_shares_it_with_none() {
        let many = bind_many("127.0.0.1:0".parse().unwrap(), 3).await.unwrap();
        let port = many[0].local_addr().unwrap().port();
        assert!(many.iter().all(|l| l.local_addr().unwrap().port() == port));
        let alone = bind_many("127.0.0.1:0".parse().unwrap(), 1).await.unwrap();
        assert_eq!(alone.len(), 1);
        let taken = alone[0].local_addr().unwrap();
        assert!(
            bind_many(taken, 2).await.is_err(),
            "a single listener's port was shared"
        );
    }
}
