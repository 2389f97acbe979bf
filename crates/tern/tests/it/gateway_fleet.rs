//! `tern gateway --redis` as a fleet: two gateway replicas (the real
//! binary) with the same servers file, key ring and Redis, behind a real
//! nginx (round robin, no stickiness), fronting one `tern serve demo
//! --http` upstream. A round answered on one replica is retried through the
//! other; `transfer_funds`'s final leg sent twice at once, through both
//! replicas, makes one transfer (the ledger read back), claimed in Redis.
//! A 2025 upstream's live question (the Python SDK's `FastMCP` server, one
//! per replica) held by one replica is answered by a retry sent to the
//! other, handed over Redis to the holder.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::process::{Child, Command};

use crate::fleet::{
    Nginx, RedisServer, Replica, Reply, Scratch, call, free_port, generate_keys, get,
};

const TIMEOUT: Duration = Duration::from_secs(20);

/// One `tern gateway --http … --keys … --redis …` process.
struct Gateway {
    port: u16,
    _child: Child,
}

impl Gateway {
    async fn start(config: &Path, keys: &Path, redis: &str, dir: &Path) -> Self {
        let port = free_port();
        let log = std::fs::File::create(dir.join(format!("gateway-{port}.log"))).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tern"))
            .arg("gateway")
            .arg("--config")
            .arg(config)
            .args(["--http", &format!("127.0.0.1:{port}")])
            .arg("--keys")
            .arg(keys)
            .args(["--redis", redis])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let gateway = format!("http://127.0.0.1:{port}");
        for _ in 0..400 {
            if let Ok((200, _)) = get(&format!("{gateway}/readyz")).await {
                return Self {
                    port,
                    _child: child,
                };
            }
            if let Some(status) = child.try_wait().unwrap() {
                let log = std::fs::read_to_string(dir.join(format!("gateway-{port}.log")));
                panic!("gateway exited ({status}): {log:?}");
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("gateway {port} never became ready");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }
}

struct Fleet {
    // Dropped in this order: nginx, the gateways, the upstream, Redis.
    nginx: Nginx,
    gateways: Vec<Gateway>,
    _demo: Replica,
    redis: RedisServer,
    _dir: Scratch,
}

impl Fleet {
    async fn start() -> Self {
        let dir = Scratch::new("gateway-fleet");
        let redis = RedisServer::start().await;
        let keys = dir.0.join("keys");
        generate_keys(&keys).await;
        let demo = Replica::start_single(&[], &dir.0).await;
        let config: PathBuf = dir.0.join("servers.json");
        // And the Python SDK's 2025 server (stdio: one per replica), whose
        // question is held by the replica that started the call.
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let python = root.join(".cache/interop/venv/bin/python");
        assert!(
            python.is_file(),
            "the Python SDK venv is not installed at {}: run scripts/interop (scripts/test does)",
            python.display()
        );
        let servers = json!({"mcpServers": {"demo": {
            "url": demo.url("/mcp"), "prefix": "", "dedupe": true,
        }, "py": {
            "command": python, "args": [root.join("tests/interop/legacy_server.py")],
            "era": "2025-11-25",
        }}});
        std::fs::write(&config, servers.to_string()).unwrap();
        let mut gateways = Vec::new();
        for _ in 0..2 {
            gateways.push(Gateway::start(&config, &keys, &redis.url(), &dir.0).await);
        }
        let addrs: Vec<String> = gateways
            .iter()
            .map(|g| format!("127.0.0.1:{}", g.port))
            .collect();
        let nginx = Nginx::start(&addrs, &dir.0);
        Self {
            nginx,
            gateways,
            _demo: demo,
            redis,
            _dir: dir,
        }
    }
}

fn args(to: &str) -> Value {
    json!({"to": to, "amount": 1250})
}

async fn first_leg(base: &str, to: &str) -> String {
    let r = call(
        base,
        to,
        "tools/call",
        json!({"name": "transfer_funds", "arguments": args(to)}),
        TIMEOUT,
    )
    .await;
    let r = r.result();
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert!(r["inputRequests"]["confirm"].is_object(), "{r}");
    r["requestState"].as_str().unwrap().to_owned()
}

/// The final leg; a state-only round (a duplicate told to come back) is
/// followed with its new state, at most 10 times.
async fn final_leg(base: &str, to: &str, state: &str) -> Reply {
    let mut state = state.to_owned();
    for _ in 0..10 {
        let params = json!({
            "name": "transfer_funds",
            "arguments": args(to),
            "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": true}}},
            "requestState": state,
        });
        let reply = call(base, to, "tools/call", params, TIMEOUT).await;
        match &reply {
            Reply::Result(r) if r["resultType"] == "input_required" => {
                r["requestState"].as_str().unwrap().clone_into(&mut state);
            }
            _ => return reply,
        }
    }
    panic!("{to}: the final leg kept asking to come back");
}

fn text(reply: &Reply) -> String {
    reply.result()["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn transfers_to(base: &str, to: &str) -> usize {
    let r = call(
        base,
        "ledger",
        "resources/read",
        json!({"uri": "demo://ledger"}),
        TIMEOUT,
    )
    .await;
    let suffix = format!(" {to}");
    r.result()["contents"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter(|l| l.ends_with(&suffix))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_replicas_share_rounds_and_a_duplicated_final_leg_transfers_once() {
    let fleet = Fleet::start().await;
    let (one, two) = (fleet.gateways[0].url(), fleet.gateways[1].url());

    // A round answered on one replica and retried through the other.
    let state = first_leg(&one, "ann").await;
    let done = final_leg(&two, "ann", &state).await;
    assert!(
        text(&done).starts_with("Transferred 12.50 to ann"),
        "{done:?}"
    );
    assert_eq!(transfers_to(&one, "ann").await, 1);

    // Through nginx (round robin: the two legs land on different replicas).
    let lb = fleet.nginx.url("");
    let state = first_leg(&lb, "bob").await;
    let done = final_leg(&lb, "bob", &state).await;
    assert!(
        text(&done).starts_with("Transferred 12.50 to bob"),
        "{done:?}"
    );

    // The same lists from either replica, paged alike.
    let list = |base: String| async move {
        call(&base, "list", "tools/list", json!({}), TIMEOUT)
            .await
            .result()["tools"]
            .clone()
    };
    assert_eq!(list(one.clone()).await, list(two.clone()).await);

    // The final leg twice at once, through both replicas: one transfer,
    // and both get its reply.
    let state = first_leg(&one, "cy").await;
    let (a, b) = tokio::join!(final_leg(&one, "cy", &state), final_leg(&two, "cy", &state));
    assert!(text(&a).starts_with("Transferred 12.50 to cy"), "{a:?}");
    assert_eq!(text(&a), text(&b));
    assert_eq!(transfers_to(&two, "cy").await, 1);

    // The claims are the fleet's: in Redis, under the gateway's prefix.
    let client = redis::Client::open(fleet.redis.url()).unwrap();
    let mut conn = client.get_multiplexed_async_connection().await.unwrap();
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg("tern-gateway*")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert!(!keys.is_empty(), "no gateway record in Redis");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_2025_question_is_answered_by_a_retry_sent_to_the_other_replica() {
    let fleet = Fleet::start().await;
    let (one, two) = (fleet.gateways[0].url(), fleet.gateways[1].url());
    let ask = |base: String, to: &'static str, extra: Value| async move {
        let mut params = json!({"name": "py__provision_database", "arguments": {"name": to}});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        call(&base, to, "tools/call", params, TIMEOUT).await
    };
    for (first, retry, name) in [(&one, &two, "orders"), (&two, &one, "billing")] {
        let r = ask(first.clone(), name, json!({})).await;
        let r = r.result();
        assert_eq!(r["resultType"], "input_required", "{r}");
        let asked = &r["inputRequests"]["elicitation_1"];
        assert_eq!(
            asked["params"]["message"],
            format!("Which region should {name} live in?"),
            "{r}"
        );
        let state = r["requestState"].as_str().unwrap().to_owned();
        let answer = json!({
            "inputResponses": {"elicitation_1": {"action": "accept", "content": {"region": "eu-west-1"}}},
            "requestState": state,
        });
        let done = ask(retry.clone(), name, answer.clone()).await;
        assert_eq!(
            text(&done),
            format!("Created {name} in eu-west-1"),
            "{done:?}"
        );
        // The same retry again, on either replica: the held call is gone,
        // and nothing is sent upstream again.
        for base in [&one, &two] {
            let again = ask(base.clone(), name, answer.clone()).await;
            assert_eq!(again.kind(), "error -32602 (HTTP 200)", "{again:?}");
        }
    }
    // Two questions in turn: asked on one, the first answered through two
    // (handed to one), the second's state still names one, so its answer
    // sent through two again reaches the call (it was -32602: the call
    // re-parked by a forwarded retry lost its replica).
    let cluster = |base: String, extra: Value| async move {
        let mut params = json!({"name": "py__provision_cluster", "arguments": {"name": "edge"}});
        for (k, v) in extra.as_object().unwrap() {
            params[k] = v.clone();
        }
        call(&base, "edge", "tools/call", params, TIMEOUT).await
    };
    let r = cluster(one.clone(), json!({})).await;
    let state = r.result()["requestState"].as_str().unwrap().to_owned();
    let r = cluster(
        two.clone(),
        json!({
            "inputResponses": {"elicitation_1": {"action": "accept", "content": {"region": "eu-west-1"}}},
            "requestState": state,
        }),
    )
    .await;
    let r = r.result();
    assert_eq!(r["resultType"], "input_required", "{r}");
    let (key, asked) = r["inputRequests"]
        .as_object()
        .unwrap()
        .iter()
        .next()
        .unwrap();
    assert_eq!(
        asked["params"]["message"], "How many nodes should edge have?",
        "{r}"
    );
    let state = r["requestState"].as_str().unwrap().to_owned();
    let done = cluster(
        two.clone(),
        json!({
            "inputResponses": {key.clone(): {"action": "accept", "content": {"nodes": 3}}},
            "requestState": state,
        }),
    )
    .await;
    assert_eq!(
        text(&done),
        "Created edge in eu-west-1 with 3 nodes",
        "{done:?}"
    );

    // Through nginx (round robin): the legs land on different replicas.
    let lb = fleet.nginx.url("");
    let r = ask(lb.clone(), "search", json!({})).await;
    let state = r.result()["requestState"].as_str().unwrap().to_owned();
    let done = ask(
        lb,
        "search",
        json!({
            "inputResponses": {"elicitation_1": {"action": "decline"}},
            "requestState": state,
        }),
    )
    .await;
    assert_eq!(text(&done), "Provisioning cancelled.", "{done:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fleet_mode_needs_the_keys_and_a_reachable_redis() {
    let dir = Scratch::new("gateway-fleet-bad");
    let config = dir.0.join("servers.json");
    std::fs::write(
        &config,
        json!({"mcpServers": {"x": {"url": "http://127.0.0.1:1/mcp"}}}).to_string(),
    )
    .unwrap();
    let keys = dir.0.join("keys");
    generate_keys(&keys).await;
    let run = |extra: Vec<String>| {
        let config = config.clone();
        async move {
            Command::new(env!("CARGO_BIN_EXE_tern"))
                .arg("gateway")
                .arg("--config")
                .arg(&config)
                .args(["--http", "127.0.0.1:0"])
                .args(extra)
                .output()
                .await
                .unwrap()
        }
    };
    // Without a shared key ring replicas could not continue each other's
    // rounds: refused.
    let no_keys = run(vec!["--redis".into(), "redis://127.0.0.1:1".into()]).await;
    assert_eq!(no_keys.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&no_keys.stderr).contains("--keys"));
    // A Redis that is not there: exit 2, naming it.
    let url = format!("redis://127.0.0.1:{}", free_port());
    let unreachable = run(vec![
        "--keys".into(),
        keys.display().to_string(),
        "--redis".into(),
        url.clone(),
    ])
    .await;
    assert_eq!(unreachable.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&unreachable.stderr);
    assert!(
        stderr.contains(&format!("cannot reach Redis at {url}")),
        "{stderr}"
    );
}

/// Two gateway replicas (shared keys, one Redis), each with a stdio demo
/// upstream of its own started with the same `--keys`: either upstream
/// opens the other's states, but each guards its legs in its own memory —
/// a guard that does not span the fleet, as good as none for a duplicate
/// sent to both replicas. `dedupe` as given.
async fn replicas_with_their_own_upstreams(dedupe: bool) -> (Vec<Gateway>, RedisServer, Scratch) {
    let dir = Scratch::new("gateway-fleet-stdio");
    let redis = RedisServer::start().await;
    let keys = dir.0.join("keys");
    generate_keys(&keys).await;
    let config: PathBuf = dir.0.join("servers.json");
    let servers = json!({"mcpServers": {"demo": {
        "command": env!("CARGO_BIN_EXE_tern"),
        "args": ["serve", "demo", "--stdio", "--keys", keys.display().to_string()],
        "prefix": "", "dedupe": dedupe,
    }}});
    std::fs::write(&config, servers.to_string()).unwrap();
    let mut gateways = Vec::new();
    for _ in 0..2 {
        gateways.push(Gateway::start(&config, &keys, &redis.url(), &dir.0).await);
    }
    (gateways, redis, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_front_of_unshared_guards_only_dedupe_keeps_a_duplicated_final_leg_to_one_transfer() {
    for dedupe in [true, false] {
        let (gateways, _redis, _dir) = replicas_with_their_own_upstreams(dedupe).await;
        let (one, two) = (gateways[0].url(), gateways[1].url());
        let to = if dedupe { "dee" } else { "eve" };
        // A round begun on one replica, its final leg sent to both at once.
        let state = first_leg(&one, to).await;
        let (a, b) = tokio::join!(final_leg(&one, to, &state), final_leg(&two, to, &state));
        assert!(
            text(&a).starts_with(&format!("Transferred 12.50 to {to}")),
            "{a:?}"
        );
        // Each replica's upstream keeps its own ledger: the transfers made
        // are the sum of both.
        let made = transfers_to(&one, to).await + transfers_to(&two, to).await;
        if dedupe {
            assert_eq!(made, 1, "claimed once in Redis, relayed once");
            assert_eq!(text(&a), text(&b), "the duplicate gets the stored reply");
        } else {
            // The control: without the gateway's claim each upstream, its
            // guard its own, makes the transfer.
            assert_eq!(made, 2, "without dedupe: {a:?} {b:?}");
        }
    }
}
