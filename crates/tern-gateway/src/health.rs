//! An HTTP upstream's health: nothing tells the gateway when it goes away
//! but a request, so one that is up is probed (`server/discover`) every
//! `healthInterval` (default 10 s). A probe it cannot answer — refused,
//! lost, or silent past its `timeout` — marks it down: its entries leave
//! the lists (list-changed sent; in fleet mode they stay, their calls
//! failing fast), and it is tried again with backoff, its entries back
//! once it answers. An answer, even an error, is health.

use crate::upstream::Upstream;

/// Probes `upstream` every `healthInterval` until a probe fails (why) or it
/// is closed (an empty reason, unused).
pub(crate) async fn until_unhealthy(upstream: &Upstream) -> String {
    let every = upstream.config().health_interval;
    loop {
        tokio::time::sleep(every).await;
        if upstream.is_closed() {
            return String::new();
        }
        if let Err(why) = upstream.probe().await {
            tracing::warn!(upstream = %upstream.name(), %why, "health probe failed");
            return why;
        }
    }
}
