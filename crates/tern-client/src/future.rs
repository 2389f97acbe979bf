//! Boxed futures: what a trait object's async methods return (the
//! transport, the handlers, a token store). A leaf: it uses nothing of the
//! crate. Public as [`crate::transport::BoxFuture`].

use std::future::Future;
use std::pin::Pin;

/// A boxed, sendable future.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;
