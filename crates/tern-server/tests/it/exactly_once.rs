//! Exactly once for guarded legs (docs/design.md, "Exactly once"; the engine's
//! cancellation rule): an abandoned guarded leg finishes and keeps its outcome;
//! duplicates never run it again; a run that died reads "outcome unknown".

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::{Value, json};
use tern_protocol::error::code;
use tern_server::error::codes;
use tern_server::replay::{
    Begin, BoxFuture, ClaimSpec, MemoryReplayStore, Outcome, Owner, RecordKey, ReplayStore,
    StoreError, StoreLimits,
};
use tern_server::testing::{Exchange, ManualClock, TestClient};
use tern_server::{CallLimits, Principal, Server};
use tokio_util::sync::CancellationToken;

use crate::fixture::{Counters, builder};

fn yes() -> Value {
    json!({"confirm": {"action": "accept", "content": {"ok": true}}})
}

fn go() -> Value {
    json!({"go": {"action": "accept", "content": {"ok": true}}})
}

fn server_with(counters: &Arc<Counters>, limits: CallLimits) -> Server {
    builder(counters, ManualClock::new())
        .call_limits(limits)
        .build()
        .unwrap()
}

/// The first leg of `tool`: its question and the state to retry with.
async fn first_leg(c: &TestClient, tool: &str) -> String {
    let r1 = c.call_tool(tool, json!({})).await;
    assert_eq!(r1.result_type(), Some("input_required"), "{r1:?}");
    r1.request_state().unwrap().to_owned()
}

async fn retry(c: &TestClient, tool: &str, answers: Value, state: &str) -> Exchange {
    c.retry_tool(tool, json!({}), answers, Some(state)).await
}

/// The retry, sent in its own task with a cancellation token: dropping the
/// task and cancelling is what a transport does when the client goes away.
fn abandonable(
    c: &Arc<TestClient>,
    tool: &'static str,
    answers: Value,
    state: &str,
) -> (tokio::task::JoinHandle<Exchange>, CancellationToken) {
    let cancel = CancellationToken::new();
    let c = Arc::clone(c);
    let token = cancel.clone();
    let params = c.with_meta(
        json!({"name": tool, "arguments": {}, "inputResponses": answers, "requestState": state}),
    );
    let task = tokio::spawn(async move {
        c.send_as("tools/call", Some(params), &Principal::anonymous(), token)
            .await
    });
    (task, cancel)
}

#[tokio::test]
async fn a_guarded_leg_abandoned_after_its_effect_finishes_and_its_outcome_is_served() {
    let counters = Arc::new(Counters::default());
    let c = Arc::new(TestClient::new(
        builder(&counters, ManualClock::new()).build().unwrap(),
    ));
    let state = first_leg(&c, "transfer").await;
    let (task, cancel) = abandonable(&c, "transfer", yes(), &state);
    counters.transfer_started.notified().await;
    // The network breaks mid-audit: the request is cancelled and its future
    // dropped.
    cancel.cancel();
    task.abort();
    assert!(task.await.unwrap_err().is_cancelled());
    // The run belongs to the server: the audit completes and is stored.
    counters.transfer_done.notified().await;
    let again = retry(&c, "transfer", yes(), &state).await;
    assert_eq!(again.text(), Some("transfer #1, audited"), "{again:?}");
    assert_eq!(counters.transfers.load(Ordering::SeqCst), 1, "one effect");
    assert_eq!(counters.audits.load(Ordering::SeqCst), 1);
    let third = retry(&c, "transfer", yes(), &state).await;
    assert_eq!(third.text(), Some("transfer #1, audited"));
    assert_eq!(counters.transfers.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_failure_after_the_effect_is_the_outcome_every_duplicate_gets() {
    let counters = Arc::new(Counters::default());
    let c = TestClient::new(builder(&counters, ManualClock::new()).build().unwrap());
    let state = first_leg(&c, "transfer_failing").await;
    counters.release_audit.notify_one();
    let first = retry(&c, "transfer_failing", yes(), &state).await;
    let result = first.outcome.as_ref().unwrap();
    assert_eq!(result["isError"], true);
    assert_eq!(first.text(), Some("transfer #1 made, audit failed"));
    let duplicate = retry(&c, "transfer_failing", yes(), &state).await;
    assert_eq!(
        duplicate.outcome.unwrap(),
        *result,
        "the same isError result"
    );
    assert_eq!(counters.transfers.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_duplicate_while_the_first_runs_waits_for_its_outcome() {
    let counters = Arc::new(Counters::default());
    let store = Partitioned::new(ManualClock::new());
    let c = Arc::new(TestClient::new(
        builder(&counters, ManualClock::new())
            .replay_store(store.clone())
            .build()
            .unwrap(),
    ));
    let state = first_leg(&c, "transfer").await;
    let (first, _cancel) = abandonable(&c, "transfer", yes(), &state);
    counters.transfer_started.notified().await;
    let (duplicate, _cancel2) = abandonable(&c, "transfer", yes(), &state);
    // The duplicate found the first in flight and reads the record while it
    // waits; then the first run finishes and wakes it with its outcome.
    store.read.notified().await;
    counters.release_audit.notify_one();
    let (first, duplicate) = (first.await.unwrap(), duplicate.await.unwrap());
    assert_eq!(first.text(), Some("transfer #1, audited"));
    assert_eq!(duplicate.text(), first.text());
    assert_eq!(counters.transfers.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_duplicate_that_waits_too_long_is_told_to_come_back_with_the_same_state() {
    let counters = Arc::new(Counters::default());
    let limits = CallLimits::default().duplicate_wait(Duration::from_millis(20));
    let c = Arc::new(TestClient::new(server_with(&counters, limits)));
    let state = first_leg(&c, "transfer").await;
    let (first, _cancel) = abandonable(&c, "transfer", yes(), &state);
    counters.transfer_started.notified().await;
    let waited = retry(&c, "transfer", yes(), &state).await;
    // Rule `input-required-not-empty`: state only, the very token it
    // presented.
    assert_eq!(waited.result_type(), Some("input_required"));
    assert!(waited.input_keys().is_empty(), "{waited:?}");
    assert_eq!(waited.request_state(), Some(state.as_str()));
    counters.release_audit.notify_one();
    assert_eq!(first.await.unwrap().text(), Some("transfer #1, audited"));
    let back = retry(&c, "transfer", yes(), &state).await;
    assert_eq!(back.text(), Some("transfer #1, audited"));
    assert_eq!(counters.transfers.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_run_past_its_deadline_is_stopped_and_reads_outcome_unknown() {
    let counters = Arc::new(Counters::default());
    let limits = CallLimits::default().guarded_deadline(Duration::from_millis(50));
    let c = TestClient::new(server_with(&counters, limits));
    let state = first_leg(&c, "wedge").await;
    let first = retry(&c, "wedge", go(), &state).await;
    assert_eq!(
        first.error_code(),
        Some(codes::OUTCOME_UNKNOWN),
        "{first:?}"
    );
    let duplicate = retry(&c, "wedge", go(), &state).await;
    assert_eq!(duplicate.error_code(), Some(codes::OUTCOME_UNKNOWN));
    assert_eq!(
        counters.transfers.load(Ordering::SeqCst),
        1,
        "never a second run"
    );
}

#[tokio::test]
async fn a_run_that_panics_reads_outcome_unknown_for_its_duplicates() {
    let counters = Arc::new(Counters::default());
    let c = TestClient::new(builder(&counters, ManualClock::new()).build().unwrap());
    let state = first_leg(&c, "boom").await;
    let first = retry(&c, "boom", go(), &state).await;
    assert_eq!(first.error_code(), Some(code::INTERNAL_ERROR));
    let duplicate = retry(&c, "boom", go(), &state).await;
    assert_eq!(duplicate.error_code(), Some(codes::OUTCOME_UNKNOWN));
    assert_eq!(counters.transfers.load(Ordering::SeqCst), 1);
}

/// A store shared by two replicas whose link to one of them can be cut: the
/// replica that loses it can no longer renew, as if its process had died.
/// It also says when a waiter reads a record.
#[derive(Debug)]
struct Partitioned {
    inner: MemoryReplayStore,
    cut: std::sync::atomic::AtomicBool,
    read: tokio::sync::Notify,
}

impl Partitioned {
    fn new(clock: Arc<ManualClock>) -> Arc<Self> {
        Arc::new(Self {
            inner: MemoryReplayStore::new(StoreLimits::default(), clock),
            cut: false.into(),
            read: tokio::sync::Notify::new(),
        })
    }
}

impl ReplayStore for Partitioned {
    fn begin(&self, claim: ClaimSpec) -> BoxFuture<'_, Result<Begin, StoreError>> {
        self.inner.begin(claim)
    }
    fn renew(
        &self,
        record: &RecordKey,
        owner: Owner,
        lease: Duration,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        if self.cut.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::new("partitioned"))));
        }
        self.inner.renew(record, owner, lease)
    }
    fn finish(
        &self,
        record: &RecordKey,
        owner: Owner,
        outcome: Outcome,
    ) -> BoxFuture<'_, Result<bool, StoreError>> {
        self.inner.finish(record, owner, outcome)
    }
    fn status(&self, record: &RecordKey) -> BoxFuture<'_, Result<Option<Begin>, StoreError>> {
        self.read.notify_one();
        self.inner.status(record)
    }
    fn changed(&self, record: &RecordKey) -> BoxFuture<'static, ()> {
        self.inner.changed(record)
    }
    fn is_shared(&self) -> bool {
        true
    }
}

#[tokio::test]
async fn a_claim_whose_owner_died_reads_outcome_unknown_on_another_replica() {
    let clock = ManualClock::new();
    let store = Partitioned::new(clock.clone());
    let limits = CallLimits::default().lease(Duration::from_millis(30));
    let replica = |counters: &Arc<Counters>| {
        builder(counters, ManualClock::new())
            .replay_store(store.clone())
            .call_limits(limits)
            .multi_instance()
            .build()
            .unwrap()
    };
    let (counters_a, counters_b) = (Arc::new(Counters::default()), Arc::new(Counters::default()));
    let a = Arc::new(TestClient::new(replica(&counters_a)));
    let b = TestClient::new(replica(&counters_b));
    let state = first_leg(&a, "transfer").await;
    let (run, _cancel) = abandonable(&a, "transfer", yes(), &state);
    counters_a.transfer_started.notified().await;
    // Replica A is cut off: it cannot renew, and its lease lapses.
    store.cut.store(true, Ordering::SeqCst);
    clock.tick(Duration::from_secs(1));
    let duplicate = retry(&b, "transfer", yes(), &state).await;
    assert_eq!(
        duplicate.error_code(),
        Some(codes::OUTCOME_UNKNOWN),
        "{duplicate:?}"
    );
    assert_eq!(
        counters_b.transfers.load(Ordering::SeqCst),
        0,
        "replica B never ran it"
    );
    // A's run ends; its outcome can no longer replace "unknown".
    counters_a.release_audit.notify_one();
    assert_eq!(run.await.unwrap().text(), Some("transfer #1, audited"));
    let later = retry(&b, "transfer", yes(), &state).await;
    assert_eq!(later.error_code(), Some(codes::OUTCOME_UNKNOWN));
}

#[tokio::test]
async fn single_use_duplicates_get_the_uniform_refusal() {
    let (c, _, _) = crate::fixture::client();
    let state = first_leg(&c, "once_only").await;
    let first = retry(&c, "once_only", go(), &state).await;
    assert_eq!(first.text(), Some("went: true"));
    let duplicate = retry(&c, "once_only", go(), &state).await;
    let error = duplicate.outcome.unwrap_err();
    assert_eq!(
        (error.code, error.message.as_str()),
        (code::INVALID_PARAMS, "Invalid or expired requestState")
    );
}

#[tokio::test]
async fn prompts_and_resources_are_guarded_like_tools() {
    let (c, counters, _) = crate::fixture::client();
    let ann = json!({"name": {"action": "accept", "content": {"name": "Ann"}}});
    let p1 = c
        .send("prompts/get", json!({"name": "guarded_prompt"}))
        .await;
    let state = p1.request_state().unwrap().to_owned();
    let retry_prompt = || {
        c.send(
            "prompts/get",
            json!({"name": "guarded_prompt", "inputResponses": ann, "requestState": state}),
        )
    };
    let first = retry_prompt().await.result().unwrap();
    let again = retry_prompt().await.result().unwrap();
    assert_eq!(first, again);
    assert_eq!(
        first["messages"][0]["content"]["text"],
        "prompt run #1 for Ann"
    );
    assert_eq!(counters.prompt_runs.load(Ordering::SeqCst), 1);

    let r1 = c
        .send("resources/read", json!({"uri": "res://guarded"}))
        .await;
    let state = r1.request_state().unwrap().to_owned();
    let retry_read = || {
        c.send(
            "resources/read",
            json!({"uri": "res://guarded", "inputResponses": ann, "requestState": state}),
        )
    };
    let first = retry_read().await.result().unwrap();
    assert_eq!(first["contents"][0]["text"], "read #1 for Ann");
    assert_eq!(retry_read().await.result().unwrap(), first);
    assert_eq!(counters.read_runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn refusals_before_the_claim_leave_no_record() {
    let counters = Arc::new(Counters::default());
    let c = TestClient::new(builder(&counters, ManualClock::new()).build().unwrap());
    let state = first_leg(&c, "transfer").await;
    // A wrong-kind answer is refused before the claim…
    let bad = json!({"confirm": {"roots": []}});
    let refused = retry(&c, "transfer", bad, &state).await;
    assert_eq!(refused.error_code(), Some(code::INVALID_PARAMS));
    // …so the same state still runs once.
    counters.release_audit.notify_one();
    let ok = retry(&c, "transfer", yes(), &state).await;
    assert_eq!(ok.text(), Some("transfer #1, audited"));
}

#[tokio::test]
async fn a_full_store_refuses_new_claims_with_its_own_code() {
    let counters = Arc::new(Counters::default());
    // One server, one store, two callers: the anonymous one fills its
    // share, alice's is untouched.
    let server = builder(&counters, ManualClock::new())
        .replay_store_limits(StoreLimits::default().per_anonymous_bytes(300))
        .build()
        .unwrap();
    let c = TestClient::new(server.clone());
    let first = first_leg(&c, "once_only").await;
    assert_eq!(
        retry(&c, "once_only", go(), &first).await.text(),
        Some("went: true")
    );
    let second = first_leg(&c, "once_only").await;
    let full = retry(&c, "once_only", go(), &second).await;
    assert_eq!(full.error_code(), Some(codes::STORE_FULL), "{full:?}");
    // Another caller's share is its own: the same server and store still
    // take alice's claims.
    let alice = TestClient::new(server).with_principal(Principal::new("alice"));
    for _ in 0..2 {
        let state = first_leg(&alice, "once_only").await;
        assert_eq!(
            retry(&alice, "once_only", go(), &state).await.text(),
            Some("went: true")
        );
    }
    // And the anonymous share stays full.
    let third = first_leg(&c, "once_only").await;
    let full = retry(&c, "once_only", go(), &third).await;
    assert_eq!(full.error_code(), Some(codes::STORE_FULL), "{full:?}");
}

#[test]
fn multi_instance_refuses_a_store_only_one_process_sees() {
    let counters = Arc::new(Counters::default());
    let err = builder(&counters, ManualClock::new())
        .multi_instance()
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("replay store"), "{err}");
}

#[test]
fn accept_unsealed_answers_cannot_be_guarded() {
    async fn noop() -> &'static str {
        "x"
    }
    let err = Server::builder("x", "1")
        .tool(
            tern_server::ToolDef::new("t", "d", noop)
                .accept_unsealed_answers()
                .idempotent_retry(),
        )
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("accept_unsealed_answers"), "{err}");
    async fn text() -> String {
        "x".into()
    }
    let err = Server::builder("x", "1")
        .prompt(
            tern_server::PromptDef::new("p", "d", text)
                .accept_unsealed_answers()
                .single_use(),
        )
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("prompt p"), "{err}");
}
