//! [`RedisTaskStore`]: the task store contract ([`tern_server::task::store`])
//! kept by one Redis that every replica shares, so `tasks/get`,
//! `tasks/update` and `tasks/cancel` work on any replica.
//!
//! The task rules themselves (the runner's lease and its fencing token, a
//! lapsed lease turning the task `failed` with "outcome unknown" or, for a
//! durable task, letting another replica claim it, a late
//! result from a runner that lost its lease being dropped, answers and
//! cancellations taken from the record) are written once in
//! `tern_server::task` on top of the store's compare-and-swap; this store
//! makes that swap atomic across replicas with Lua scripts, and announces
//! every write on a channel so runners and `subscriptions/listen` streams on
//! other replicas wake at once. The announcement is only a wake-up: the
//! record is always re-read, and a lost message only delays a reader until
//! its slow re-check (`TaskConfig::recheck`).
//!
//! # Keys
//!
//! | key | type | what |
//! |---|---|---|
//! | `P:{tasks}:t:ID` | hash, expires at the record's `expires_at` | `json` (the whole [`TaskRecord`]), `v` (version), `key`, `owner` (`-`: anonymous), `q` (the tally it is charged to), `live` (1 while not terminal), `bytes` (the record's `result_bytes`: its result or error plus the per-record charge), `exp` (ms, empty: never) |
//! | `P:{tasks}:k:KEY` | string, same expiry | the task id holding dedupe key `KEY` |
//! | `P:{tasks}:e:Q` | sorted set, expires with its last member | tally `Q`'s task ids, scored by expiry (ms, `+inf`: never) |
//! | `P:{tasks}:c:Q` | hash, same expiry | each of those ids' charge: `LIVE BYTES` |
//! | `P:{tasks}:n:Q` | hash, same expiry | the running totals `live` and `bytes` |
//! | `P:{tasks}:l` | sorted set | recoverable records (durable tasks) by lease deadline (ms), for [`TaskStore::claim_lapsed`] |
//! | channel `P:tasks` | pub/sub | the id of every record written |
//!
//! `Q` is [`TaskRecord::charged_to`]: the owner's digest, an anonymous
//! peer's digest, or `-` (anonymous callers with no peer).
//!
//! # Quotas in constant time
//!
//! A create reads its tally's totals, never the owner's records: it first
//! takes the tally's records expired at `now` off (64 at a time, with
//! their charges; more only while the totals still hold the owner at its
//! quota, so an owner whose many records expired together is not refused,
//! and each record leaves once), then checks the quota and charges the new
//! record, all in one script. `replace` moves a record's charge and expiry
//! (a finished task stops being live and its result counts), `remove`
//! takes it off. Records expire by `PX`, so a counter alone would drift;
//! the sorted set is what lets a create find the expired ones without a
//! scan. With 2,000 records of one owner a create runs about twenty
//! commands (it ran one `HMGET` per record before). A tally left by a store
//! before this layout (the owner set `P:{tasks}:o:Q`) is read once by the
//! next create of that owner and then deleted.
//!
//! Every key shares the hash tag `{tasks}`: the per-owner tally and the
//! dedupe key are checked atomically with the insert, and a task is looked up
//! by its id alone, so every task script touches the one slot of the tag (in
//! a Redis Cluster, all of a server's tasks live on one shard; give each
//! logical server its own prefix to spread them).
//!
//! Expiry is checked against the caller's clock (the `now` of the contract)
//! and also left to Redis (`PEXPIREAT`) to reclaim the memory: the replicas'
//! clocks and Redis's must agree to within the lease margin (NTP).

use std::fmt;
use std::sync::Arc;

use redis::Script;
use redis::aio::ConnectionManager;
use tern_server::replay::BoxFuture;
use tern_server::task::{Created, Lease, TaskQuota, TaskRecord, TaskStore, TaskStoreError};
use tokio::sync::broadcast;

use crate::replay::{ConnectError, RedisOptions, connect, once_more, spawn_listener};

/// Every script's helpers for the per-owner tally (see the module docs):
/// `e` the sorted set of the records charged (score: expiry ms, `+inf`
/// never), `c` their charges (`LIVE BYTES`), `n` the running totals.
const TALLY: &str = r"
local function tally_keys(P, q)
  return P .. 'e:' .. q, P .. 'c:' .. q, P .. 'n:' .. q
end
-- Moves a total by d (never by 0: Lua formats -0 as '-0', not an integer
-- to Redis).
local function add(n, field, d)
  if d ~= 0 then redis.call('HINCRBY', n, field, d) end
end
local function parts(v)
  local l, b = string.match(v, '^(%d+) (%d+)$')
  return tonumber(l), tonumber(b)
end
-- The tally's keys expire with its longest-lived record (records expire by
-- PX at the same scores): an owner who stops creating leaves nothing behind.
local function keep(e, c, n)
  local top = redis.call('ZRANGE', e, -1, -1, 'WITHSCORES')
  if not top[2] then
    redis.call('DEL', e, c, n)
  elseif top[2] == 'inf' then
    redis.call('PERSIST', e)
    redis.call('PERSIST', c)
    redis.call('PERSIST', n)
  else
    redis.call('PEXPIREAT', e, top[2])
    redis.call('PEXPIREAT', c, top[2])
    redis.call('PEXPIREAT', n, top[2])
  end
end
-- Charges record `id` (live, bytes: strings of digits) until `score`,
-- replacing what it was charged before: a retried write counts once.
local function charge(e, c, n, id, live, bytes, score)
  local old = redis.call('HGET', c, id)
  local ol, ob = 0, 0
  if old then ol, ob = parts(old) end
  redis.call('HSET', c, id, live .. ' ' .. bytes)
  redis.call('ZADD', e, score, id)
  local dl, db = tonumber(live) - ol, tonumber(bytes) - ob
  add(n, 'live', dl)
  add(n, 'bytes', db)
  keep(e, c, n)
end
local function uncharge(e, c, n, id)
  local old = redis.call('HGET', c, id)
  if old then
    local l, b = parts(old)
    redis.call('HDEL', c, id)
    add(n, 'live', -l)
    add(n, 'bytes', -b)
  end
  redis.call('ZREM', e, id)
  keep(e, c, n)
end
-- Takes up to 64 records expired at `now` off the tally: how many, and
-- the live tasks and bytes they were charged.
local function drop_expired(e, c, n, now)
  local gone = redis.call('ZRANGEBYSCORE', e, '-inf', now, 'LIMIT', 0, 64)
  if #gone == 0 then return 0, 0, 0 end
  local charges = redis.call('HMGET', c, unpack(gone))
  local live, bytes = 0, 0
  for i = 1, #gone do
    if charges[i] then
      local l, b = parts(charges[i])
      live, bytes = live + l, bytes + b
    end
  end
  redis.call('ZREM', e, unpack(gone))
  redis.call('HDEL', c, unpack(gone))
  add(n, 'live', -live)
  add(n, 'bytes', -bytes)
  return #gone, live, bytes
end
local function score(exp)
  if exp == '' then return '+inf' end
  return exp
end
-- Indexes record `id` by its lease deadline ('' : not recoverable) in the
-- sorted set `P .. 'l'` that claim_lapsed reads.
local function deadline(P, id, at)
  if at == '' then
    redis.call('ZREM', P .. 'l', id)
  else
    redis.call('ZADD', P .. 'l', at, id)
  end
end
";

/// KEYS: record, dedupe key, the tally's `e`, `c`, `n`, the owner set of
/// stores before the tally (`o`). ARGV: tag prefix (`P:{tasks}:`), now, id,
/// key, owner, version, live, bytes, exp ('' never), json, max live, max
/// bytes, channel, the tally's name, lease deadline ('' not recoverable).
const CREATE: &str = r"
local P, now = ARGV[1], tonumber(ARGV[2])
local e, c, n = KEYS[3], KEYS[4], KEYS[5]
local holder = redis.call('GET', KEYS[2])
if holder then
  local f = redis.call('HMGET', P .. 't:' .. holder, 'exp', 'json')
  if f[2] and (f[1] == '' or tonumber(f[1]) > now) then return {'existing', f[2]} end
end
-- Records written before the tally (an owner set, read once): charged now.
if redis.call('EXISTS', KEYS[6]) == 1 then
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[6])) do
    local f = redis.call('HMGET', P .. 't:' .. id, 'exp', 'live', 'bytes')
    if f[3] and (f[1] == '' or tonumber(f[1]) > now) then
      charge(e, c, n, id, f[2], f[3], score(f[1]))
    end
  end
  redis.call('DEL', KEYS[6])
end
local t = redis.call('HMGET', n, 'live', 'bytes')
local live, bytes = tonumber(t[1] or '0'), tonumber(t[2] or '0')
local max_live, max_bytes = tonumber(ARGV[11]), tonumber(ARGV[12])
local dropped_any = false
-- Expired records leave the tally 64 at a time; only an owner the tally
-- holds at its quota waits for more (each record leaves once, so a create
-- costs a constant amount of work on average).
repeat
  local dropped, l, b = drop_expired(e, c, n, now)
  live, bytes = live - l, bytes - b
  dropped_any = dropped_any or dropped > 0
until dropped < 64 or (live < max_live and bytes <= max_bytes)
if live >= max_live or bytes > max_bytes then
  if dropped_any then keep(e, c, n) end
  return {'over'}
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'json', ARGV[10], 'v', ARGV[6], 'key', ARGV[4], 'owner', ARGV[5],
  'q', ARGV[14], 'live', ARGV[7], 'bytes', ARGV[8], 'exp', ARGV[9])
redis.call('SET', KEYS[2], ARGV[3])
if ARGV[9] ~= '' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[9])
  redis.call('PEXPIREAT', KEYS[2], ARGV[9])
end
charge(e, c, n, ARGV[3], ARGV[7], ARGV[8], score(ARGV[9]))
deadline(P, ARGV[3], ARGV[15])
redis.call('PUBLISH', ARGV[13], ARGV[3])
return {'new'}
";

/// KEYS: record. ARGV: tag prefix, expected version, version, live, bytes,
/// exp ('' never), json, channel, id, lease deadline ('' not recoverable).
const REPLACE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'v', 'key', 'json', 'q', 'owner')
if not f[1] then return 0 end
-- The same write again (a retry whose first reply was lost): done.
if f[1] == ARGV[3] and f[3] == ARGV[7] then return 1 end
if f[1] ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1], 'json', ARGV[7], 'v', ARGV[3], 'live', ARGV[4], 'bytes', ARGV[5],
  'exp', ARGV[6])
local k = ARGV[1] .. 'k:' .. f[2]
local holds = redis.call('GET', k) == ARGV[9]
if ARGV[6] ~= '' then
  redis.call('PEXPIREAT', KEYS[1], ARGV[6])
  if holds then redis.call('PEXPIREAT', k, ARGV[6]) end
else
  redis.call('PERSIST', KEYS[1])
  if holds then redis.call('PERSIST', k) end
end
-- The charge follows the record (a finished task is no longer live, its
-- result counts; a renewal moves its expiry). A record written before the
-- tally has no 'q': its owner names the tally.
local e, c, n = tally_keys(ARGV[1], f[4] or f[5])
charge(e, c, n, ARGV[9], ARGV[4], ARGV[5], score(ARGV[6]))
deadline(ARGV[1], ARGV[9], ARGV[10])
redis.call('PUBLISH', ARGV[8], ARGV[9])
return 1
";

/// KEYS: record. ARGV: tag prefix, id, channel.
const REMOVE: &str = r"
local f = redis.call('HMGET', KEYS[1], 'key', 'owner', 'q')
if not f[1] then return 0 end
local k = ARGV[1] .. 'k:' .. f[1]
if redis.call('GET', k) == ARGV[2] then redis.call('DEL', k) end
local q = f[3] or f[2]
redis.call('SREM', ARGV[1] .. 'o:' .. q, ARGV[2])
local e, c, n = tally_keys(ARGV[1], q)
uncharge(e, c, n, ARGV[2])
redis.call('ZREM', ARGV[1] .. 'l', ARGV[2])
redis.call('DEL', KEYS[1])
redis.call('PUBLISH', ARGV[3], ARGV[2])
return 1
";

fn err(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> TaskStoreError {
    TaskStoreError::new(e)
}

#[allow(
    clippy::needless_pass_by_value,
    reason = "used as `map_err(redis_err)`"
)]
fn redis_err(e: redis::RedisError) -> TaskStoreError {
    err(format!("redis: {e}"))
}

fn with_tally(body: &str) -> Script {
    Script::new(&format!("{TALLY}\n{body}"))
}

/// A record's lease deadline as the scripts take it ('' : not recoverable).
fn deadline_arg(record: &TaskRecord) -> String {
    record
        .lease_deadline()
        .map(|at| at.to_string())
        .unwrap_or_default()
}

fn decode(json: &str) -> Result<TaskRecord, TaskStoreError> {
    serde_json::from_str(json).map_err(err)
}

struct Scripts {
    create: Script,
    replace: Script,
    remove: Script,
}

/// The task store of a fleet: every replica sharing one Redis sees every
/// task. See the [module docs](self) for the keys and scripts.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use tern_redis::{RedisOptions, RedisTaskStore};
///
/// let tasks = RedisTaskStore::connect("redis://127.0.0.1:6379", RedisOptions::new()).await?;
/// let server = tern_server::Server::builder("inventory", "1.0.0")
///     .keys(tern_server::KeyRing::parse(&std::env::var("TERN_KEYS")?)?)
///     .task_store(Arc::new(tasks))
///     .build()?;
/// # drop(server); Ok(()) }
/// ```
pub struct RedisTaskStore {
    conn: ConnectionManager,
    scripts: Arc<Scripts>,
    /// `P:{tasks}:`.
    tag: String,
    channel: String,
    changes: broadcast::Sender<String>,
    listener: tokio::task::JoinHandle<()>,
}

impl fmt::Debug for RedisTaskStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisTaskStore")
            .field("tag", &self.tag)
            .finish_non_exhaustive()
    }
}

impl Drop for RedisTaskStore {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// A task id or an announced one: 1 to 128 printable ASCII characters.
fn task_id(text: &str) -> Option<String> {
    (!text.is_empty() && text.len() <= 128 && text.bytes().all(|b| b.is_ascii_graphic()))
        .then(|| text.to_owned())
}

impl RedisTaskStore {
    /// Connects to the Redis at `url` (`redis://`, or `rediss://` with the
    /// `tls` feature). Uses [`RedisOptions::prefix`] and the timeouts; the
    /// byte limits are the replay store's (a task's bounds are its
    /// `TaskConfig`'s). Commands during an outage fail within
    /// [`RedisOptions::response_timeout`]; the connection comes back by
    /// itself.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<Self, ConnectError> {
        let (client, conn) = connect(url, &options).await?;
        let channel = format!("{}:tasks", options.prefix);
        let (changes, _) = broadcast::channel(1024);
        let listener = spawn_listener(
            client,
            channel.clone(),
            changes.clone(),
            task_id,
            options.connect_timeout,
        )
        .await;
        Ok(Self {
            conn,
            scripts: Arc::new(Scripts {
                create: with_tally(CREATE),
                replace: with_tally(REPLACE),
                remove: with_tally(REMOVE),
            }),
            tag: format!("{}:{{tasks}}:", options.prefix),
            channel,
            changes,
            listener,
        })
    }

    fn record_key(&self, task_id: &str) -> String {
        format!("{}t:{task_id}", self.tag)
    }

    async fn create_record(
        &self,
        record: TaskRecord,
        quota: TaskQuota,
        now: u64,
    ) -> Result<Created, TaskStoreError> {
        let json = serde_json::to_string(&record).map_err(err)?;
        let owner = record.owner.as_deref().unwrap_or("-");
        let tally = record.charged_to().unwrap_or("-");
        let keys = [
            self.record_key(&record.task_id),
            format!("{}k:{}", self.tag, record.key),
            format!("{}e:{tally}", self.tag),
            format!("{}c:{tally}", self.tag),
            format!("{}n:{tally}", self.tag),
            format!("{}o:{tally}", self.tag),
        ];
        let exp = record.expires_at.map(|e| e.to_string()).unwrap_or_default();
        let deadline = deadline_arg(&record);
        let answer: Vec<String> = once_more(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.create.prepare_invoke();
            for k in &keys {
                call.key(k);
            }
            call.arg(&self.tag)
                .arg(now)
                .arg(&record.task_id)
                .arg(&record.key);
            call.arg(owner).arg(record.version);
            call.arg(u8::from(!record.status.is_terminal()))
                .arg(record.result_bytes);
            call.arg(&exp).arg(&json);
            call.arg(quota.max_live).arg(quota.max_result_bytes);
            call.arg(&self.channel).arg(tally).arg(&deadline);
            async move { call.invoke_async(&mut conn).await }
        })
        .await
        .map_err(redis_err)?;
        match answer.first().map(String::as_str) {
            Some("new") => Ok(Created::New),
            Some("over") => Ok(Created::OverQuota),
            Some("existing") => {
                let json = answer
                    .get(1)
                    .ok_or_else(|| err("redis: an existing task without its record"))?;
                let existing = decode(json)?;
                // Our own insert, seen again by a retry whose first reply
                // was lost.
                if existing.task_id == record.task_id {
                    return Ok(Created::New);
                }
                Ok(Created::Existing(Box::new(existing)))
            }
            other => Err(err(format!("redis: unexpected create answer {other:?}"))),
        }
    }

    async fn load_record(
        &self,
        task_id: &str,
        now: u64,
    ) -> Result<Option<TaskRecord>, TaskStoreError> {
        let key = self.record_key(task_id);
        let (json, exp): (Option<String>, Option<String>) = once_more(|| {
            let mut conn = self.conn.clone();
            let key = key.clone();
            async move {
                redis::cmd("HMGET")
                    .arg(key)
                    .arg("json")
                    .arg("exp")
                    .query_async(&mut conn)
                    .await
            }
        })
        .await
        .map_err(redis_err)?;
        let Some(json) = json else {
            return Ok(None);
        };
        let expired = match exp.as_deref() {
            None | Some("") => false,
            Some(at) => at.parse::<u64>().map_err(err)? <= now,
        };
        if expired {
            return Ok(None);
        }
        decode(&json).map(Some)
    }

    async fn replace_record(&self, record: TaskRecord) -> Result<bool, TaskStoreError> {
        let json = serde_json::to_string(&record).map_err(err)?;
        let key = self.record_key(&record.task_id);
        let exp = record.expires_at.map(|e| e.to_string()).unwrap_or_default();
        let deadline = deadline_arg(&record);
        let done: i64 = once_more(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.replace.prepare_invoke();
            call.key(&key).arg(&self.tag);
            call.arg(record.version.saturating_sub(1))
                .arg(record.version);
            call.arg(u8::from(!record.status.is_terminal()))
                .arg(record.result_bytes);
            call.arg(&exp)
                .arg(&json)
                .arg(&self.channel)
                .arg(&record.task_id)
                .arg(&deadline);
            async move { call.invoke_async(&mut conn).await }
        })
        .await
        .map_err(redis_err)?;
        Ok(done == 1)
    }

    /// See [`TaskStore::claim_lapsed`]: the earliest deadline of the sorted
    /// set, taken with the record's own compare-and-swap (of two replicas
    /// claiming it, one wins; the other tries the next).
    async fn claim_record(
        &self,
        now: u64,
        lease: Lease,
    ) -> Result<Option<TaskRecord>, TaskStoreError> {
        let index = format!("{}l", self.tag);
        for _ in 0..16 {
            let first: Vec<String> = once_more(|| {
                let mut conn = self.conn.clone();
                let index = index.clone();
                async move {
                    redis::cmd("ZRANGEBYSCORE")
                        .arg(index)
                        .arg("-inf")
                        .arg(now)
                        .arg("LIMIT")
                        .arg(0)
                        .arg(1)
                        .query_async(&mut conn)
                        .await
                }
            })
            .await
            .map_err(redis_err)?;
            let Some(id) = first.into_iter().next() else {
                return Ok(None);
            };
            let found = self.load_record(&id, now).await?;
            let Some(mut record) = found.filter(|r| r.lease_deadline().is_some_and(|at| at <= now))
            else {
                // Gone, expired, or ended: out of the index. (A record
                // written since is indexed again by its own write.)
                let mut conn = self.conn.clone();
                let _: i64 = redis::cmd("ZREM")
                    .arg(&index)
                    .arg(&id)
                    .query_async(&mut conn)
                    .await
                    .map_err(redis_err)?;
                continue;
            };
            record.lease = Some(lease.clone());
            record.version += 1;
            if self.replace_record(record.clone()).await? {
                return Ok(Some(record));
            }
        }
        Ok(None)
    }

    async fn remove_record(&self, task_id: &str) -> Result<(), TaskStoreError> {
        let key = self.record_key(task_id);
        let _: i64 = once_more(|| {
            let mut conn = self.conn.clone();
            let mut call = self.scripts.remove.prepare_invoke();
            call.key(&key)
                .arg(&self.tag)
                .arg(task_id)
                .arg(&self.channel);
            async move { call.invoke_async(&mut conn).await }
        })
        .await
        .map_err(redis_err)?;
        Ok(())
    }
}

impl TaskStore for RedisTaskStore {
    fn create(
        &self,
        record: TaskRecord,
        quota: TaskQuota,
        now: u64,
    ) -> BoxFuture<'_, Result<Created, TaskStoreError>> {
        Box::pin(self.create_record(record, quota, now))
    }

    fn load(
        &self,
        task_id: &str,
        now: u64,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        let task_id = task_id.to_owned();
        Box::pin(async move { self.load_record(&task_id, now).await })
    }

    fn replace(&self, record: TaskRecord) -> BoxFuture<'_, Result<bool, TaskStoreError>> {
        Box::pin(self.replace_record(record))
    }

    fn remove(&self, task_id: &str) -> BoxFuture<'_, Result<(), TaskStoreError>> {
        let task_id = task_id.to_owned();
        Box::pin(async move { self.remove_record(&task_id).await })
    }

    fn is_durable(&self) -> bool {
        true
    }

    fn claim_lapsed(
        &self,
        now: u64,
        lease: Lease,
    ) -> BoxFuture<'_, Result<Option<TaskRecord>, TaskStoreError>> {
        Box::pin(self.claim_record(now, lease))
    }

    fn is_shared(&self) -> bool {
        true
    }

    fn changes(&self) -> Option<broadcast::Receiver<String>> {
        Some(self.changes.subscribe())
    }
}
