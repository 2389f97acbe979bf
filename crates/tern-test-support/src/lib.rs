//! Fixtures the workspace's tests share (`publish = false`): nothing here
//! ships in a library.
//!
//! - [`layers`]: each crate's floors, checked from its sources — a module
//!   may use the modules of its own floor and the floors below, never one
//!   above.

pub mod layers;
