//! Boxed futures: what the stores' and handlers' trait methods return. A
//! leaf; public as [`crate::replay::BoxFuture`].

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
