//! The bench's integration tests, one binary (a module per area).

mod html_chromium;
mod scenarios;
