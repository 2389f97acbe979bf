//! Integration tests of `tern-seal`: one test binary, one module per concern.

mod bindings;
mod common;
mod keys;
mod limits;
mod t2;
mod tamper;
mod vectors;
