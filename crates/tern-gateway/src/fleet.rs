//! Fleet mode (the `fleet` feature): gateway replicas behind a load
//! balancer, each with the same servers file and key ring. What must be
//! shared is: the key ring seals the relayed `requestState`s and keys the
//! list cursors and task ids (any replica continues a round, pages a list,
//! polls a task), the replay store of `dedupe` upstreams lives in Redis (a
//! duplicate retry through another replica finds the first one's claim),
//! and the lists do not vary per replica — a down upstream's entries stay
//! listed (as it last listed them) and their calls fail fast with
//! `data.retryAfterMs`.
//!
//! ```no_run
//! # async fn run() -> Result<(), String> {
//! use tern_gateway::{GatewayOptions, fleet};
//!
//! let options = fleet::options(GatewayOptions::default(), "redis://127.0.0.1:6379", None).await?;
//! assert!(options.fleet);
//! # Ok(()) }
//! ```

use std::path::Path;
use std::sync::Arc;

use tern_redis::{RedisOptions, RedisReplayStore};

use crate::gateway::GatewayOptions;

/// The key prefix of the gateway's records in Redis (apart from a tern
/// server's own).
pub const PREFIX: &str = "tern-gateway";

/// `options` in fleet mode, with the replay store in the Redis at `url`
/// (`redis://` or `rediss://`, trusting `ca_file` when given).
///
/// # Errors
/// Redis cannot be reached, or the URL is not one.
pub async fn options(
    options: GatewayOptions,
    url: &str,
    ca_file: Option<&Path>,
) -> Result<GatewayOptions, String> {
    let mut redis = RedisOptions::new().prefix(PREFIX);
    if let Some(ca) = ca_file {
        redis = redis.ca_file(ca);
    }
    let store = RedisReplayStore::connect(url, redis)
        .await
        .map_err(|e| format!("cannot reach Redis at {url}: {e}"))?;
    Ok(options.replay_store(Arc::new(store)).fleet(true))
}
