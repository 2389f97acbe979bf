//! `tern-client`: call Model Context Protocol (2026-07-28) servers.
//!
//! This crate will hold the client transports (a child process over stdio, and
//! Streamable HTTP), the input handlers (elicitation, sampling, roots) from which
//! honest per-request capabilities are derived, the MRTR driver that answers
//! `input_required` rounds within bounds, task polling, and era detection for
//! 2025-11-25 servers.
//!
//! Status: reserved. It is filled by the client issue.
