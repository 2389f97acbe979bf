//! The demo's ledger in a fleet: the transfers of every replica in one
//! Redis list (`demo://ledger` reads it back), each appended once per call.
//! Below both the demo's tools (`transfer_funds` records into it) and the
//! fleet wiring (`demo_fleet` connects it). Without the `fleet` feature
//! there is no fleet, so no such ledger: [`Ledger`] has no value and the
//! demo keeps its transfers in the process.

#[cfg(feature = "fleet")]
use std::sync::Arc;
#[cfg(feature = "fleet")]
use std::time::Duration;

#[cfg(feature = "fleet")]
use redis::aio::ConnectionManager;
#[cfg(feature = "fleet")]
use tern_redis::RedisOptions;
use tern_server::CallId;
#[cfg(feature = "fleet")]
use tern_server::Changes;

/// The ledger's resource.
pub const LEDGER_URI: &str = "demo://ledger";

#[cfg(feature = "fleet")]
/// KEYS: the call's mark, the ledger. ARGV: the line, how long the mark
/// is kept (ms). The call's number in the ledger, appended once.
const APPEND: &str = r"
if not redis.call('SET', KEYS[1], '0', 'NX', 'PX', ARGV[2]) then
  return tonumber(redis.call('GET', KEYS[1]))
end
local n = redis.call('RPUSH', KEYS[2], ARGV[1])
redis.call('SET', KEYS[1], n, 'KEEPTTL')
return n
";

#[cfg(feature = "fleet")]
/// How long a call's ledger mark is kept: as long as a call may live
/// ([`CallLimits::max_lifetime`]'s default, 1 hour).
const CALL_KEPT_MS: u64 = 3_600_000;

#[cfg(feature = "fleet")]
/// The transfers of a fleet, in one Redis list every replica appends to.
#[derive(Clone)]
pub struct Ledger {
    conn: ConnectionManager,
    append: Arc<redis::Script>,
    key: String,
    /// Told of every transfer (`demo://ledger` updated), on every replica
    /// through the fleet's change bus.
    pub(crate) changes: Arc<std::sync::OnceLock<Changes>>,
}

#[cfg(feature = "fleet")]
impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

#[cfg(feature = "fleet")]
impl Ledger {
    /// Connects to the ledger of the Redis at `url`, under `options`'
    /// prefix (trusting its CA file, for `rediss://`).
    ///
    /// # Errors
    /// Redis cannot be reached (or the URL is malformed).
    pub async fn connect(url: &str, options: &RedisOptions) -> Result<Self, String> {
        let prefix = &options.prefix;
        let conn = tern_redis::open_connection(url, options)
            .await
            .map_err(|e| unreachable(url, &e))?;
        Ok(Self {
            conn,
            append: Arc::new(redis::Script::new(APPEND)),
            key: format!("{prefix}:ledger"),
            changes: Arc::default(),
        })
    }

    /// Appends one transfer (`AMOUNT_CENTS RECIPIENT`) of the call `call`;
    /// its number in the ledger. Idempotent per call: one script marks the
    /// call done (`SET NX` on a key of its own, kept as long as a call may
    /// live) and appends only if it was not, so the write is retried once
    /// after a connection error (the first command after a Redis restart
    /// fails on the dead socket; before, that failure was the transfer's
    /// stored outcome for good) and a retry whose first reply was lost
    /// answers the same number without a second line.
    ///
    /// # Errors
    /// Redis failed, twice or otherwise.
    pub async fn record(&self, call: CallId, amount: u64, to: &str) -> Result<u64, String> {
        let done = format!("{}:call:{call}", self.key);
        let line = format!("{amount} {to}");
        let n = tern_redis::retry_once(|| {
            let mut conn = self.conn.clone();
            let mut invoke = self.append.prepare_invoke();
            invoke.key(&done).key(&self.key);
            invoke.arg(&line).arg(CALL_KEPT_MS);
            async move { invoke.invoke_async(&mut conn).await }
        })
        .await
        .map_err(|e| format!("the ledger is unreachable: {e}"))?;
        if let Some(changes) = self.changes.get() {
            changes.resource_updated(LEDGER_URI);
        }
        Ok(n)
    }

    /// Every transfer, one line each, oldest first.
    ///
    /// # Errors
    /// Redis failed (a read is retried once after a connection error).
    pub async fn lines(&self) -> Result<Vec<String>, String> {
        tern_redis::retry_once(|| {
            let mut conn = self.conn.clone();
            let key = self.key.clone();
            async move {
                redis::cmd("LRANGE")
                    .arg(key)
                    .arg(0)
                    .arg(-1)
                    .query_async(&mut conn)
                    .await
            }
        })
        .await
        .map_err(|e| format!("the ledger is unreachable: {e}"))
    }

    /// Redis answers `PING` within `within`.
    pub(crate) async fn reachable(&self, within: Duration) -> bool {
        let mut conn = self.conn.clone();
        let ping = async move {
            redis::cmd("PING")
                .query_async::<String>(&mut conn)
                .await
                .is_ok()
        };
        tokio::time::timeout(within, ping).await.unwrap_or(false)
    }
}

#[cfg(feature = "fleet")]
pub(crate) fn unreachable(url: &str, e: &tern_redis::ConnectError) -> String {
    use std::error::Error as _;
    match e.source() {
        Some(why) => format!("cannot reach Redis at {url}: {why}"),
        None => format!("cannot reach Redis at {url}: {e}"),
    }
}

/// Without the `fleet` feature: no fleet, no fleet ledger (no value of
/// this type exists; the demo's `Option<Ledger>` is always `None`).
#[cfg(not(feature = "fleet"))]
#[derive(Debug, Clone)]
pub enum Ledger {}

#[cfg(not(feature = "fleet"))]
impl Ledger {
    /// Never called: no ledger exists.
    ///
    /// # Errors
    /// None.
    #[expect(clippy::unused_async, reason = "the fleet ledger's signature")]
    pub async fn record(&self, _call: CallId, _amount: u64, _to: &str) -> Result<u64, String> {
        match *self {}
    }

    /// Never called: no ledger exists.
    ///
    /// # Errors
    /// None.
    #[expect(clippy::unused_async, reason = "the fleet ledger's signature")]
    pub async fn lines(&self) -> Result<Vec<String>, String> {
        match *self {}
    }
}
