//! The binaries the official MCP conformance suite drives (not published).
//!
//! `conformance-server` meets the suite's server contract for revision
//! 2026-07-28 (`../shared/spec/conformance.md` §5), written only against
//! tern's public API. `conformance-client` arrives with the client issue.
