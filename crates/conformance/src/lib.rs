//! The binaries the official MCP conformance suite drives (not published).
//!
//! `conformance-server` meets the suite's server contract for revision
//! 2026-07-28 (the tools, prompts and resources its server scenarios call,
//! as `@modelcontextprotocol/conformance` defines them; `scripts/conformance`
//! runs it), written only against tern's public API. `conformance-client`
//! arrives with the client issue.
