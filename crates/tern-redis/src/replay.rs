//! [`RedisReplayStore`]: the engine's replay store contract
//! ([`tern_server::replay`]) kept by one Redis that every replica shares.
//!
//! # Keys
//!
//! Everything of one caller's share lives under the hash tag of its scope, so
//! each script touches one slot of a Redis Cluster:
//!
//! | key | type | what |
//! |---|---|---|
//! | `P:{S}:r:ID` | string, expires at the claim's `expires_at` | the record: `r|OWNER|LEASE_UNTIL_MS`, `d|OUTCOME` or `u` |
//! | `P:{S}:z` | sorted set, score = `expires_at` ms | the scope's live record ids |
//! | `P:{S}:b` | hash | bytes per record id |
//! | `P:{S}:n` | string | the scope's bytes in use |
//! | `P:{total}:z`, `P:{total}:n` | as above | the store's total (a slot of its own) |
//!
//! `P` is the store's prefix (default `tern`), `S` the scope's key (a digest of
//! the principal or the anonymous peer, never the identity itself), `ID` the
//! state id in hex.
//!
//! # How the contract holds
//!
//! - `begin` is one Lua script: it reads the record, settles a lapsed lease
//!   into `u` (compared with Redis's own `TIME`, one clock for every
//!   replica), and only when there is no live record checks the scope's bytes
//!   and writes `r|…` with `PXAT expires_at` — `SET NX` semantics inside the
//!   script, so two replicas can never both read `First`.
//! - `renew` and `finish` are scripts that check the owner and the lease
//!   before they write; `finish` then `PUBLISH`es the id on `P:replay`.
//! - Waiters subscribe to `P:replay` once per store (a background task that
//!   reconnects by itself); a lost message only delays a waiter until the
//!   engine's slow re-check.
//! - The total bound lives in a slot of its own, so it is reserved in a
//!   separate step before the scope's script (and given back when the claim
//!   did not happen): it may briefly overshoot under races, never undercount.
//!   Redis's own `maxmemory` with `noeviction` is the hard stop; a Redis that
//!   is out of memory answers `OOM`, read as "full".
//! - Expired records leave the byte counts lazily: every script first drops
//!   up to 64 expired ids of its scope.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis::Script;
use redis::aio::ConnectionManager;
use tern_server::replay::{
    Begin, BoxFuture, ClaimSpec, Outcome, Owner, RECORD_OVERHEAD, RecordKey, ReplayStore, Scope,
    StateId, StoreError, StoreLimits,
};
use tokio::sync::broadcast;

/// Drops up to 64 expired ids of a scope: KEYS[1] = zset, KEYS[2] = bytes
/// hash, KEYS[3] = bytes counter; ARGV[1] = now ms. Shared by every script.
const SWEEP: &str = r"
local function sweep(z, b, n, now)
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 64)
  for _, id in ipairs(gone) do
    local bytes = tonumber(redis.call('HGET', b, id) or '0')
    redis.call('HDEL', b, id)
    redis.call('ZREM', z, id)
    redis.call('DECRBY', n, bytes)
  end
end
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
";

/// KEYS: record, zset, bytes hash, counter. ARGV: owner, lease ms, expires
/// at ms, overhead, scope limit, id.
const BEGIN: &str = r"
local now = now_ms()
sweep(KEYS[2], KEYS[3], KEYS[4], now)
local v = redis.call('GET', KEYS[1])
if v then
  local kind = string.sub(v, 1, 1)
  if kind == 'r' then
    local owner, until_ms = string.match(v, '^r|(%x+)|(%d+)$')
    if tonumber(until_ms) <= now then
      redis.call('SET', KEYS[1], 'u', 'KEEPTTL')
      return 'unknown'
    end
    -- The same owner again: a retry of a begin whose reply was lost.
    if owner == ARGV[1] then return 'first' end
    return 'inflight'
  elseif kind == 'd' then
    return v
  end
  return 'unknown'
end
local used = tonumber(redis.call('GET', KEYS[4]) or '0')
if used + tonumber(ARGV[4]) > tonumber(ARGV[5]) then
  return 'full'
end
redis.call('SET', KEYS[1], 'r|' .. ARGV[1] .. '|' .. (now + tonumber(ARGV[2])), 'PXAT', ARGV[3])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[6])
redis.call('HSET', KEYS[3], ARGV[6], ARGV[4])
redis.call('INCRBY', KEYS[4], ARGV[4])
return 'first'
";

/// KEYS: record. ARGV: owner, lease ms.
const RENEW: &str = r"
local now = now_ms()
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 1) ~= 'r' then return 0 end
local owner, until_ms = string.match(v, '^r|(%x+)|(%d+)$')
if tonumber(until_ms) <= now then
  redis.call('SET', KEYS[1], 'u', 'KEEPTTL')
  return 0
end
if owner ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], 'r|' .. owner .. '|' .. (now + tonumber(ARGV[2])), 'KEEPTTL')
return 1
";

/// KEYS: record, zset, bytes hash, counter. ARGV: owner, outcome ('' for
/// unknown), scope limit, max outcome bytes, id, channel, keep (1 when the
/// total has room).
const FINISH: &str = r"
local now = now_ms()
sweep(KEYS[2], KEYS[3], KEYS[4], now)
local v = redis.call('GET', KEYS[1])
if not v or string.sub(v, 1, 1) ~= 'r' then return 0 end
local owner, until_ms = string.match(v, '^r|(%x+)|(%d+)$')
if tonumber(until_ms) <= now then
  redis.call('SET', KEYS[1], 'u', 'KEEPTTL')
  redis.call('PUBLISH', ARGV[6], ARGV[5])
  return 0
end
if owner ~= ARGV[1] then return 0 end
local len = string.len(ARGV[2])
local used = tonumber(redis.call('GET', KEYS[4]) or '0')
if len > 0 and ARGV[7] == '1' and len <= tonumber(ARGV[4]) and used + len <= tonumber(ARGV[3]) then
  redis.call('SET', KEYS[1], 'd|' .. ARGV[2], 'KEEPTTL')
  redis.call('HINCRBY', KEYS[3], ARGV[5], len)
  redis.call('INCRBY', KEYS[4], len)
else
  redis.call('SET', KEYS[1], 'u', 'KEEPTTL')
end
redis.call('PUBLISH', ARGV[6], ARGV[5])
return 1
";

/// KEYS: record. Read-only: a lapsed lease reads unknown.
const STATUS: &str = r"
local now = now_ms()
local v = redis.call('GET', KEYS[1])
if not v then return 'none' end
local kind = string.sub(v, 1, 1)
if kind == 'r' then
  local until_ms = tonumber(string.match(v, '|(%d+)$'))
  if until_ms <= now then return 'unknown' end
  return 'inflight'
elseif kind == 'd' then
  return v
end
return 'unknown'
";

/// The total's slot. KEYS: zset, bytes hash, counter. ARGV: id, bytes, limit,
/// expires at ms (0: add to an existing id), mode ('reserve' or 'release').
const TOTAL: &str = r"
local now = now_ms()
sweep(KEYS[1], KEYS[2], KEYS[3], now)
if ARGV[5] == 'release' then
  local bytes = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
  redis.call('HDEL', KEYS[2], ARGV[1])
  redis.call('ZREM', KEYS[1], ARGV[1])
  redis.call('DECRBY', KEYS[3], bytes)
  return 1
end
-- A record's reservation made twice (a retried call) counts once.
if ARGV[4] ~= '0' and redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 1 end
local used = tonumber(redis.call('GET', KEYS[3]) or '0')
if used + tonumber(ARGV[2]) > tonumber(ARGV[3]) then return 0 end
if ARGV[4] ~= '0' then redis.call('ZADD', KEYS[1], ARGV[4], ARGV[1]) end
redis.call('HINCRBY', KEYS[2], ARGV[1], ARGV[2])
redis.call('INCRBY', KEYS[3], ARGV[2])
return 1
";

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn unhex(text: &str) -> Option<StateId> {
    let mut out = [0u8; 16];
    if text.len() != 32 {
        return None;
    }
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(out)
}

fn unix_ms(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// A Redis error, or "full" when Redis is out of memory (`maxmemory` with
/// `noeviction`: the store's hard bound).
fn store_error(e: &redis::RedisError) -> StoreError {
    if e.code() == Some("OOM") {
        return StoreError::full(format!("redis: {e}"));
    }
    StoreError::new(format!("redis: {e}"))
}

/// How a [`RedisReplayStore`] is set up.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct RedisOptions {
    /// Prefix of every key and of the change channel (default `tern`): give
    /// each logical server its own when they share one Redis.
    pub prefix: String,
    /// The store's byte bounds (default [`StoreLimits::default`]).
    pub limits: StoreLimits,
    /// How long one Redis command may take before it fails (default 2 s):
    /// during an outage requests fail within this, never hang.
    pub response_timeout: Duration,
    /// How long connecting may take (default 2 s).
    pub connect_timeout: Duration,
    /// For `rediss://`: a PEM file of the CA certificates to trust instead
    /// of the system's roots (a Redis behind a private CA). Needs the `tls`
    /// feature; read at connect.
    pub ca_file: Option<std::path::PathBuf>,
}

impl Default for RedisOptions {
    fn default() -> Self {
        Self {
            prefix: "tern".into(),
            limits: StoreLimits::default(),
            response_timeout: Duration::from_secs(2),
            connect_timeout: Duration::from_secs(2),
            ca_file: None,
        }
    }
}

impl RedisOptions {
    /// The defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`Self::prefix`].
    #[must_use]
    pub fn prefix(mut self, prefix: impl Into<String>) -> Self {
        self.prefix = prefix.into();
        self
    }

    /// Sets [`Self::limits`].
    #[must_use]
    pub fn limits(mut self, limits: StoreLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Sets [`Self::response_timeout`].
    #[must_use]
    pub fn response_timeout(mut self, timeout: Duration) -> Self {
        self.response_timeout = timeout;
        self
    }

    /// Sets [`Self::ca_file`].
    #[must_use]
    pub fn ca_file(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }
}

struct Scripts {
    begin: Script,
    renew: Script,
    finish: Script,
    status: Script,
    total: Script,
}

impl Scripts {
    fn new() -> Self {
        let with_sweep = |body: &str| Script::new(&format!("{SWEEP}\n{body}"));
        Self {
            begin: with_sweep(BEGIN),
            renew: with_sweep(RENEW),
            finish: with_sweep(FINISH),
            status: with_sweep(STATUS),
            total: with_sweep(TOTAL),
        }
    }
}

/// The replay store of a fleet: every replica that shares one Redis sees
/// every claim, so a duplicate retry that reaches another replica never runs
/// its effect again. See the [module docs](self) for the keys and scripts.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use tern_redis::{RedisOptions, RedisReplayStore};
/// use tern_server::{KeyRing, Server};
///
/// let store = RedisReplayStore::connect("redis://127.0.0.1:6379", RedisOptions::new()).await?;
/// let keys = KeyRing::parse(&std::fs::read_to_string("/etc/tern/keys")?)?;
/// let server = Server::builder("inventory", "1.0.0")
///     .keys(keys)
///     .replay_store(Arc::new(store))
///     .multi_instance()
///     .build()?;
/// # drop(server); Ok(()) }
/// ```
pub struct RedisReplayStore {
    conn: ConnectionManager,
    scripts: Arc<Scripts>,
    options: RedisOptions,
    channel: String,
    /// Ids announced on the change channel, fanned out to waiters.
    changes: broadcast::Sender<StateId>,
    listener: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for RedisReplayStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisReplayStore")
            .field("prefix", &self.options.prefix)
            .field("limits", &self.options.limits)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisReplayStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// A client and a connection manager for `url`, set up with `options`'
/// timeouts (shared by every store of this crate).
pub(crate) async fn connect(
    url: &str,
    options: &RedisOptions,
) -> Result<(redis::Client, ConnectionManager), ConnectError> {
    let client = open_client(url, options)?;
    let config = redis::aio::ConnectionManagerConfig::new()
        .set_response_timeout(Some(options.response_timeout))
        .set_connection_timeout(Some(options.connect_timeout))
        .set_number_of_retries(1);
    let conn = client
        .get_connection_manager_with_config(config)
        .await
        .map_err(ConnectError)?;
    Ok((client, conn))
}

/// A connection manager for `url` as the stores open theirs: `options`'
/// CA file, connect and response timeouts, one retry. For a connection of
/// your own beside them.
///
/// After an outage (Redis restarted, a proxy or a network dropped the
/// connection) the manager learns that its socket is dead only when a
/// command fails on it: **the first command after an outage may fail**
/// (an I/O error such as "broken pipe") although Redis is back, and the
/// manager reconnects behind it. The stores run every command as an
/// idempotent Lua script and send it once more after such a failure; do
/// the same with [`retry_once`], and only for a command that is safe to
/// run twice (a read, or a write made idempotent — a script that does its
/// effect once per key, e.g. `SET NX` on a per-call key, then the effect
/// only if that `SET` succeeded). A plain `RPUSH` or `INCR` is not: its
/// first attempt may have run before the reply was lost.
///
/// # Errors
/// As [`open_client`], or Redis cannot be reached.
pub async fn open_connection(
    url: &str,
    options: &RedisOptions,
) -> Result<ConnectionManager, ConnectError> {
    connect(url, options).await.map(|(_, conn)| conn)
}

/// A `redis::Client` for `url` that trusts [`RedisOptions::ca_file`] when
/// one is set (`rediss://` with the `tls` feature), as the stores connect:
/// for a connection of your own beside them.
///
/// # Errors
/// A malformed URL, an unreadable CA file, or a CA file without the `tls`
/// feature.
pub fn open_client(url: &str, options: &RedisOptions) -> Result<redis::Client, ConnectError> {
    #[cfg(feature = "tls")]
    crate::install_crypto_provider();
    let Some(ca) = &options.ca_file else {
        return redis::Client::open(url).map_err(ConnectError);
    };
    #[cfg(feature = "tls")]
    {
        let pem = std::fs::read(ca).map_err(|e| ConnectError(e.into()))?;
        let certs = redis::TlsCertificates {
            client_tls: None,
            root_cert: Some(pem),
        };
        redis::Client::build_with_tls(url, certs).map_err(ConnectError)
    }
    #[cfg(not(feature = "tls"))]
    {
        let _ = ca;
        Err(ConnectError(redis::RedisError::from((
            redis::ErrorKind::InvalidClientConfig,
            "a CA file needs tern-redis's `tls` feature",
        ))))
    }
}

/// Why a store could not be set up.
#[derive(Debug)]
pub struct ConnectError(pub(crate) redis::RedisError);

impl fmt::Display for ConnectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cannot connect to Redis")
    }
}

impl std::error::Error for ConnectError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.0)
    }
}

impl RedisReplayStore {
    /// Connects to the Redis at `url` (`redis://` or, with the `tls` feature,
    /// `rediss://`). The connection reconnects by itself after an outage;
    /// commands during one fail within [`RedisOptions::response_timeout`].
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, ConnectError> {
        let (client, conn) = connect(url, &options).await?;
        let channel = format!("{}:replay", options.prefix);
        let (changes, _) = broadcast::channel(1024);
        let listener = spawn_listener(
            client,
            channel.clone(),
            changes.clone(),
            unhex,
            options.connect_timeout,
        )
        .await;
        Ok(Self {
            conn,
            scripts: Arc::new(Scripts::new()),
            options,
            channel,
            changes,
            listener,
        })
    }

    fn keys(&self, scope: &Scope, id: StateId) -> [String; 4] {
        let tag = format!("{}:{{{}}}", self.options.prefix, scope.key());
        [
            format!("{tag}:r:{}", hex(&id)),
            format!("{tag}:z"),
            format!("{tag}:b"),
            format!("{tag}:n"),
        ]
    }

    fn total_keys(&self) -> [String; 3] {
        let tag = format!("{}:{{total}}", self.options.prefix);
        [format!("{tag}:z"), format!("{tag}:b"), format!("{tag}:n")]
    }

    async fn total(
        &self,
        id: StateId,
        bytes: usize,
        expires_at: u64,
        mode: &str,
    ) -> Result<bool, StoreError> {
        let [z, b, n] = self.total_keys();
        let id = hex(&id);
        let ok: i64 = retried(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.total.prepare_invoke();
            call.key(&z).key(&b).key(&n);
            call.arg(&id)
                .arg(bytes)
                .arg(self.options.limits.total_bytes);
            call.arg(expires_at).arg(mode);
            async move { call.invoke_async(&mut conn).await }
        })
        .await?;
        Ok(ok == 1)
    }

    fn scope_limit(&self, scope: &Scope) -> usize {
        if scope.is_anonymous() {
            self.options.limits.per_anonymous_bytes
        } else {
            self.options.limits.per_principal_bytes
        }
    }

    async fn begin_claim(&self, claim: ClaimSpec) -> Result<Begin, StoreError> {
        let expires_at = unix_ms(claim.expires_at);
        if !self
            .total(claim.id, RECORD_OVERHEAD, expires_at, "reserve")
            .await?
        {
            // The record may exist already (a duplicate): only a new claim
            // needs room.
            if let Some(found) = self.status_of(&claim.record()).await? {
                return Ok(found);
            }
            return Err(StoreError::full("the store's total is reached"));
        }
        let [record, z, b, n] = self.keys(&claim.scope, claim.id);
        let (owner, id) = (hex(claim.owner.as_bytes()), hex(&claim.id));
        let limit = self.scope_limit(&claim.scope);
        let answer: String = retried(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.begin.prepare_invoke();
            call.key(&record).key(&z).key(&b).key(&n);
            call.arg(&owner).arg(ms(claim.lease)).arg(expires_at);
            call.arg(RECORD_OVERHEAD).arg(limit).arg(&id);
            async move { call.invoke_async(&mut conn).await }
        })
        .await?;
        let begun = match answer.as_str() {
            "first" => return Ok(Begin::First),
            "full" => Err(StoreError::full("this caller's share is reached")),
            other => parse_state(other),
        };
        // No new record: give the total's reservation back.
        self.total(claim.id, 0, 0, "release").await?;
        begun
    }

    async fn status_of(&self, key: &RecordKey) -> Result<Option<Begin>, StoreError> {
        let [record, ..] = self.keys(&key.scope, key.id);
        let answer: String = retried(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.status.prepare_invoke();
            call.key(&record);
            async move { call.invoke_async(&mut conn).await }
        })
        .await?;
        if answer == "none" {
            return Ok(None);
        }
        parse_state(&answer).map(Some)
    }

    async fn renew_claim(
        &self,
        key: &RecordKey,
        owner: Owner,
        lease: Duration,
    ) -> Result<bool, StoreError> {
        let [record, ..] = self.keys(&key.scope, key.id);
        let owner = hex(owner.as_bytes());
        let renewed: i64 = retried(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.renew.prepare_invoke();
            call.key(&record).arg(&owner).arg(ms(lease));
            async move { call.invoke_async(&mut conn).await }
        })
        .await?;
        Ok(renewed == 1)
    }

    async fn finish_claim(
        &self,
        key: &RecordKey,
        owner: Owner,
        outcome: Outcome,
    ) -> Result<bool, StoreError> {
        let bytes = match outcome {
            Outcome::Unknown => Vec::new(),
            ref other => other.to_bytes(),
        };
        let keep = !bytes.is_empty()
            && bytes.len() <= self.options.limits.max_outcome_bytes
            && self.total(key.id, bytes.len(), 0, "reserve").await?;
        let limit = self.scope_limit(&key.scope);
        let [record, z, b, n] = self.keys(&key.scope, key.id);
        let (owner, id) = (hex(owner.as_bytes()), hex(&key.id));
        let keep = if keep { "1" } else { "0" };
        let done: i64 = retried(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.finish.prepare_invoke();
            call.key(&record).key(&z).key(&b).key(&n);
            call.arg(&owner).arg(bytes.as_slice()).arg(limit);
            call.arg(self.options.limits.max_outcome_bytes).arg(&id);
            call.arg(&self.channel).arg(keep);
            async move { call.invoke_async(&mut conn).await }
        })
        .await?;
        Ok(done == 1)
    }
}

/// Runs `call` once more after a connection error: the connection manager
/// reconnects in the background, and the first command after an outage
/// would otherwise fail although Redis is back. Every script is safe to run
/// twice (`begin` is idempotent for its owner, reservations count once,
/// `renew` and `finish` check the owner).
async fn retried<T, F, Fut>(call: F) -> Result<T, StoreError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    once_more(call).await.map_err(|e| store_error(&e))
}

/// Runs `call` and, when it failed on the connection (an I/O error, a
/// dropped connection, a refusal), once more 50 ms later: the connection
/// manager reconnects in the background, so the first command after an
/// outage fails although Redis is back (see [`open_connection`]). Only for
/// a `call` that is safe to run twice: its first attempt may have run
/// before its reply was lost. Errors Redis answered (a script's error,
/// `OOM`) are not retried.
///
/// # Errors
/// `call`'s error, from the second attempt when there was one.
pub async fn retry_once<T, F, Fut>(call: F) -> redis::RedisResult<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    once_more(call).await
}

/// [`retried`] without the error mapping (the task store maps its own).
pub(crate) async fn once_more<T, F, Fut>(call: F) -> redis::RedisResult<T>
where
    F: Fn() -> Fut,
    Fut: Future<Output = redis::RedisResult<T>>,
{
    match call().await {
        Err(e) if e.is_io_error() || e.is_connection_dropped() || e.is_connection_refusal() => {
            tokio::time::sleep(Duration::from_millis(50)).await;
            call().await
        }
        other => other,
    }
}

fn parse_state(answer: &str) -> Result<Begin, StoreError> {
    match answer {
        "inflight" => Ok(Begin::InFlight),
        "unknown" => Ok(Begin::Unknown),
        other => match other.strip_prefix("d|") {
            Some(outcome) => Outcome::from_bytes(outcome.as_bytes()).map(Begin::Done),
            None => Err(StoreError::new(format!(
                "unexpected record state {other:?}"
            ))),
        },
    }
}

/// Spawns [`listen`] and waits, at most `within`, until its first
/// subscription is in: a store handed out before it could miss the wake-up
/// of a write made right after (found over `rediss://`, where the TLS
/// handshake made the window wide enough to lose the contract's first
/// wake-up). Past `within` the store is handed out anyway: waiters also
/// re-check on a slow timer.
pub(crate) async fn spawn_listener<T: Clone + Send + 'static>(
    client: redis::Client,
    channel: String,
    changes: broadcast::Sender<T>,
    parse: fn(&str) -> Option<T>,
    within: Duration,
) -> tokio::task::JoinHandle<()> {
    let (ready, subscribed) = tokio::sync::oneshot::channel();
    let listener = tokio::spawn(listen(client, channel.clone(), changes, parse, ready));
    if tokio::time::timeout(within, subscribed).await.is_err() {
        tracing::warn!(%channel, "change channel not subscribed yet; waiters fall back to re-checking");
    }
    listener
}

/// A change channel's subscriber: reconnects after an outage (waiters
/// re-check on a slow timer meanwhile). Each payload `parse` accepts is
/// fanned out on `changes`; `ready` is told once the first subscription is
/// in.
pub(crate) async fn listen<T: Clone>(
    client: redis::Client,
    channel: String,
    changes: broadcast::Sender<T>,
    parse: fn(&str) -> Option<T>,
    ready: tokio::sync::oneshot::Sender<()>,
) {
    use futures_util::StreamExt as _;
    let mut backoff = Duration::from_millis(50);
    let mut ready = Some(ready);
    loop {
        match client.get_async_pubsub().await {
            Ok(mut pubsub) => {
                if let Err(e) = pubsub.subscribe(&channel).await {
                    tracing::warn!(error = %e, %channel, "cannot subscribe to a change channel");
                } else {
                    if let Some(ready) = ready.take() {
                        let _ = ready.send(());
                    }
                    backoff = Duration::from_millis(50);
                    let mut messages = pubsub.into_on_message();
                    while let Some(message) = messages.next().await {
                        if let Some(id) =
                            message.get_payload::<String>().ok().and_then(|p| parse(&p))
                        {
                            let _ = changes.send(id);
                        }
                    }
                    tracing::warn!(%channel, "a change channel's connection closed; reconnecting");
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, %channel, "cannot reach Redis for a change channel");
            }
        }
        tokio::time::sleep(backoff).await;
        backoff = (backoff * 2).min(Duration::from_secs(2));
    }
}

impl ReplayStore for RedisReplayStore {
    fn begin(&self, claim: ClaimSpec) -> BoxFuture<'_, Result<Begin, StoreError>> {
        Box::pin(self.begin_claim(claim))
    }

    fn renew(
        &self,
        record: &RecordKey,
        owner: Owner,
        lease: Duration,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let record = record.clone();
        Box::pin(async move { self.renew_claim(&record, owner, lease).await })
    }

    fn finish(
        &self,
        record: &RecordKey,
        owner: Owner,
        outcome: Outcome,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        let record = record.clone();
        Box::pin(async move { self.finish_claim(&record, owner, outcome).await })
    }

    fn status(&self, record: &RecordKey) -> BoxFuture<'_, Result<Option<Begin>, StoreError>> {
        let record = record.clone();
        Box::pin(async move { self.status_of(&record).await })
    }

    fn changed(&self, record: &RecordKey) -> BoxFuture<'static, ()> {
        let id = record.id;
        let mut rx = self.changes.subscribe();
        Box::pin(async move {
            loop {
                match rx.recv().await {
                    Ok(changed) if changed == id => return,
                    Ok(_) => {}
                    // Missed messages: one of them may have been ours.
                    Err(broadcast::error::RecvError::Lagged(_)) => return,
                    Err(broadcast::error::RecvError::Closed) => {
                        std::future::pending::<()>().await;
                    }
                }
            }
        })
    }

    fn is_shared(&self) -> bool {
        true
    }
}
