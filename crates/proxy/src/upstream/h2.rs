//! HTTP/2 upstream connections: one multiplexed connection per endpoint.

use super::connect::{Connector, SendError};
use crate::body::ProxyBody;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use tailguard_http::client;

/// HTTP/2 (prior knowledge) connections, one per endpoint, shared by every request to it (a
/// `SendRequest` is a cheap handle onto the multiplexed connection). A closed connection is
/// replaced by the next request; concurrent first requests may each dial, and the one that
/// finishes last keeps its connection in the slot while the others' close when done.
#[derive(Debug)]
pub(super) struct H2Pool {
    pub(super) connector: Connector,
    pub(super) per: Mutex<HashMap<SocketAddr, H2Sender>>,
}

pub(super) type H2Sender = hyper::client::conn::http2::SendRequest<ProxyBody>;

impl H2Pool {
    /// The endpoint's connection, ready for a request.
    pub(super) async fn checkout(&self, addr: SocketAddr) -> Result<H2Sender, SendError> {
        let cached = {
            let per = self.per.lock().unwrap_or_else(|p| p.into_inner());
            per.get(&addr).filter(|tx| !tx.is_closed()).cloned()
        };
        let mut tx = match cached {
            Some(tx) => tx,
            None => self.dial(addr).await?,
        };
        if tx.ready().await.is_err() {
            // Closed between the check and now (GOAWAY, reset): nothing was sent; one redial.
            tx = self.dial(addr).await?;
            tx.ready().await.map_err(|e| SendError::Connect(e.into()))?;
        }
        Ok(tx)
    }

    /// A new connection to `addr`, its task spawned, put in the endpoint's slot.
    pub(super) async fn dial(&self, addr: SocketAddr) -> Result<H2Sender, SendError> {
        let conn = self.connector.connect(addr).await?;
        let tx = client::h2(conn, addr)
            .await
            .map_err(|e| SendError::Connect(e.into()))?;
        let mut per = self.per.lock().unwrap_or_else(|p| p.into_inner());
        per.retain(|_, tx| !tx.is_closed());
        per.insert(addr, tx.clone());
        Ok(tx)
    }
}
