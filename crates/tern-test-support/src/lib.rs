//! Fixtures the workspace's tests share (`publish = false`): nothing here
//! ships in a library.
//!
//! - [`layers`]: each crate's floors, checked from its sources — a module
//!   may use the modules of its own floor and the floors below, never one
//!   above.
//! - [`deps`]: what a crate pulls in under a set of features (`cargo tree`);
//! - real servers: [`redis_server::RedisServer`], [`nginx::Nginx`] (round robin
//!   over replicas, or one re-chunking upstream), and [`ports`] (free loopback
//!   ports, scratch folders);
//! - [`ca::TestCa`]: a test certificate authority and the certificates it signs;
//! - [`logs`]: logs a test reads back (a shared buffer, the global DEBUG
//!   subscriber);
//! - `mrtr` (feature `server`): the MRTR handlers and question types both
//!   fixture servers register.

pub mod ca;
pub mod deps;
pub mod layers;
pub mod logs;
#[cfg(feature = "server")]
pub mod mrtr;
pub mod nginx;
pub mod ports;
pub mod redis_server;
