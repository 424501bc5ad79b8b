//! The ping services' messages, written by hand with prost's derive (no code generation); a
//! test in [`super`] holds them to the repository's `proto/` files, field by field.

/// fortio's ping message, both ways.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PingMessage {
    /// Sequence number, echoed.
    #[prost(int64, tag = "1")]
    pub seq: i64,
    /// The sender's clock (Unix nanoseconds); the answer carries the server's.
    #[prost(int64, tag = "2")]
    pub ts: i64,
    /// Extra data, echoed.
    #[prost(string, tag = "3")]
    pub payload: String,
    /// How long the server should wait before answering (honoured under `--overrides`).
    #[prost(int64, tag = "4")]
    pub delay_nanos: i64,
}

/// Ping request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PingRequest {
    /// Echoed back.
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
    /// `Stream`: how many answers (0: 10).
    #[prost(uint32, tag = "2")]
    pub count: u32,
}

/// Ping response.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PingResponse {
    /// The request's payload.
    #[prost(bytes = "vec", tag = "1")]
    pub payload: Vec<u8>,
    /// The backend that answered.
    #[prost(string, tag = "2")]
    pub backend: String,
    /// `Stream` and `Echo`: this answer's number, from 1; `Collect`: the messages read.
    #[prost(uint32, tag = "3")]
    pub count: u32,
}
