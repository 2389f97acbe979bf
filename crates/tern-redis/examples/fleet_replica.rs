//! One replica of a fleet: run as many as you like behind a load balancer,
//! each with the same key file and Redis. Any replica continues any MRTR
//! round (the state is sealed with the shared keys), a guarded leg's outcome
//! and a task live in Redis, and resource updates reach the listeners of
//! every replica.
//!
//! ```sh
//! tern keys generate > keys.txt            # once, shared by the fleet
//! cargo run -p tern-redis --example fleet_replica -- 127.0.0.1:8081 redis://127.0.0.1:6379 keys.txt
//! cargo run -p tern-redis --example fleet_replica -- 127.0.0.1:8082 redis://127.0.0.1:6379 keys.txt
//! ```
//!
//! Each prints `listening on http://ADDR/mcp` once bound and stops on
//! Ctrl-C (open streams closed, connections drained).

#![allow(
    clippy::print_stdout,
    reason = "an example prints what it serves or gets"
)]

use std::sync::Arc;

use serde::Deserialize;
use tern_redis::{RedisChangeBus, RedisOptions, RedisReplayStore, RedisTaskStore};
use tern_server::transport::http::{Http, serve};
use tern_server::{Answer, Args, Ctx, Elicit, KeyRing, Server, TaskSupport, ToolDef, ToolError};

#[derive(Deserialize, schemars::JsonSchema)]
struct Transfer {
    /// Amount in cents.
    cents: u64,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Confirm {
    /// Go ahead with the transfer.
    confirm: bool,
}

/// Asks, then acts. Marked `idempotent_retry`: the leg after the question
/// runs once per call even when the client retries it on two replicas at
/// the same time (its claim and outcome are kept in Redis).
async fn transfer(ctx: Ctx, Args(t): Args<Transfer>) -> Result<String, ToolError> {
    let question = Elicit::<Confirm>::form(format!("Transfer {} cents?", t.cents));
    let Answer::Accept(Confirm { confirm: true }) = ctx.ask(question).await? else {
        return Ok("Nothing transferred.".into());
    };
    let replica = std::process::id();
    Ok(format!(
        "Transferred {} cents (leg run by process {replica}).",
        t.cents
    ))
}

/// Work that outlives the request: a task in Redis, readable (`tasks/get`)
/// and cancellable through any replica.
async fn reconcile(ctx: Ctx) -> Result<String, ToolError> {
    ctx.into_task().await;
    for step in 1..=3u8 {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        ctx.progress(
            f64::from(step),
            Some(3.0),
            Some(&format!("checked batch {step} of 3")),
        );
    }
    Ok("Reconciled: no differences.".into())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(addr), Some(redis), Some(keys)) = (args.next(), args.next(), args.next()) else {
        return Err("usage: fleet_replica ADDR REDIS_URL KEYS_FILE".into());
    };
    let keys = KeyRing::parse(&std::fs::read_to_string(&keys)?)?;
    let options = RedisOptions::new().prefix("fleet-example");
    let builder = Server::builder("fleet", "1.0.0")
        .tool(
            ToolDef::new("transfer", "Transfers money after a confirmation", transfer)
                .elicits::<Confirm>()
                .idempotent_retry(),
        )
        .tool(
            ToolDef::new(
                "reconcile",
                "Reconciles the day's transfers (a task when it can be)",
                reconcile,
            )
            .task(TaskSupport::Optional),
        );
    let changes = builder.changes();
    changes.relay_through(Arc::new(
        RedisChangeBus::connect(&redis, options.clone(), changes.clone()).await?,
    ));
    let server = builder
        .keys(keys)
        .replay_store(Arc::new(
            RedisReplayStore::connect(&redis, options.clone()).await?,
        ))
        .task_store(Arc::new(RedisTaskStore::connect(&redis, options).await?))
        // Refuses to start with anything only one process would see.
        .multi_instance()
        .build()?;
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    println!("listening on http://{}/mcp", listener.local_addr()?);
    let shutdown = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    serve(listener, Http::new(server), "/mcp", shutdown).await?;
    Ok(())
}
