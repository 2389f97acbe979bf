//! The binaries driven by the official MCP conformance suite.
//!
//! This crate (not published) will hold `conformance-server` and
//! `conformance-client`, written only against tern's public API, which meet the
//! contracts of the suite's server and client scenarios for revision 2026-07-28.
//!
//! Status: reserved. The server arrives with the HTTP issue, the client with the
//! client issue.
