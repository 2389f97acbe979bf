//! Fixtures the workspace's tests share (`publish = false`): nothing here
//! ships in a library.
//!
//! - [`layers`]: each crate's floors, checked from its sources — a module
//!   may use the modules of its own floor and the floors below, never one
//!   above.
//! - [`deps`]: what a crate pulls in under a set of features (`cargo tree`).

pub mod deps;
pub mod layers;
