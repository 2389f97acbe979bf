//! Exactly once through the gateway, for an upstream with `dedupe: true`.
//!
//! The gateway never sends a relayed leg twice on its own (no retry after a
//! lost connection or a timeout: that is "outcome unknown", `-31001`). A
//! client's retry of a round is forwarded with the upstream's own state,
//! byte for byte, so an upstream that guards its legs sees the duplicate as
//! one. An upstream that does not guard them is protected by `dedupe`: each
//! round's routing gets a random id of the gateway's own (`d`, sealed in
//! the gateway's `requestState` beside the upstream's), and a retry
//! carrying it is *claimed* in the gateway's replay store before it is
//! relayed — tern-server's [`ReplayStore`] begin/finish contract, in
//! memory for one process, in Redis across a fleet (the `fleet` feature).
//! The first claimant relays the leg in a task of its own (a disconnect does
//! not drop it) and stores the upstream's reply as the gateway passed it on;
//! a duplicate gets that reply, waits for a leg in flight (then is told to
//! come back with a state-only round), and gets `-31001` when the first
//! attempt ended with no known outcome. A leg refused before it was sent
//! (the upstream down) is refused before the claim and leaves no record.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};
use tern_protocol::InputRequests;
use tern_protocol::error::{ErrorObject, code};
use tern_server::error::codes;
use tern_server::relay::RelayOutcome;
use tern_server::replay::{
    Begin, ClaimSpec, Outcome, Owner, RecordKey, ReplayStore, Scope, StateId, StoreError,
};

/// The routing key of the gateway's own id for a round.
pub(crate) const KEY: &str = "d";

/// How long a duplicate waits for a leg in flight before it is told to come
/// back (a state-only round carrying the same id).
const DUPLICATE_WAIT: Duration = Duration::from_secs(30);

/// How often a waiting duplicate re-reads the record (a lost wake-up).
const RECHECK: Duration = Duration::from_secs(1);

/// How long a record is kept: a relayed call's maximum lifetime (one hour,
/// after which its states no longer open) and a skew allowance.
const KEEP: Duration = Duration::from_secs(3600 + 60);

/// A fresh id for a round's routing.
pub(crate) fn new_id() -> Value {
    let mut id = [0u8; 16];
    // The operating system's random source; without it no id is safe.
    getrandom::fill(&mut id).expect("the operating system's random source");
    Value::String(URL_SAFE_NO_PAD.encode(id))
}

/// The id a retry's routing carries, if any.
pub(crate) fn id_of(routing: &Value) -> Option<StateId> {
    let bytes = URL_SAFE_NO_PAD.decode(routing.get(KEY)?.as_str()?).ok()?;
    bytes.try_into().ok()
}

/// The error every duplicate of an attempt with no known outcome gets.
pub fn outcome_unknown() -> ErrorObject {
    ErrorObject::new(
        codes::OUTCOME_UNKNOWN,
        "The outcome of this request is unknown: an earlier attempt with the same \
         requestState was relayed and did not finish. It will not be sent again; check its \
         effect before starting a new call.",
    )
}

fn store_failed(e: &StoreError) -> ErrorObject {
    if e.is_full() {
        tracing::warn!(error = ?e, "gateway replay store full");
        return ErrorObject::new(
            codes::STORE_FULL,
            "The gateway is holding too many guarded requests for this caller; try again later",
        );
    }
    tracing::error!(error = ?e, "gateway replay store failed");
    ErrorObject::new(
        code::INTERNAL_ERROR,
        "Internal error: the gateway's replay store is unreachable, so this request was not \
         relayed; retry it later with the same requestState",
    )
}

/// A stored outcome: `{"c": result}` or `{"i": {"q": requests, "r":
/// routing}}`. A result is kept as written (an upstream's text may hold
/// what a tree refuses: a number past `f64`, nesting past 128).
#[derive(serde::Serialize, serde::Deserialize)]
struct Record<'a> {
    #[serde(borrow, skip_serializing_if = "Option::is_none")]
    c: Option<&'a serde_json::value::RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    i: Option<Value>,
}

fn encode(outcome: &Result<RelayOutcome, ErrorObject>) -> Outcome {
    let tree;
    let record = match outcome {
        Ok(RelayOutcome::Complete(result)) => match serde_json::value::to_raw_value(result) {
            Ok(raw) => {
                tree = raw;
                Record {
                    c: Some(&tree),
                    i: None,
                }
            }
            Err(_) => return Outcome::Unknown,
        },
        Ok(RelayOutcome::Written(result)) => Record {
            c: Some(result),
            i: None,
        },
        Ok(RelayOutcome::InputRequired { requests, routing }) => Record {
            c: None,
            i: Some(json!({"q": requests, "r": routing})),
        },
        Err(e) if e.code == codes::OUTCOME_UNKNOWN => return Outcome::Unknown,
        Err(e) => return Outcome::Error(e.clone()),
    };
    match serde_json::value::to_raw_value(&record) {
        Ok(raw) => Outcome::Result(raw),
        Err(_) => Outcome::Unknown,
    }
}

fn decode(outcome: Outcome) -> Result<RelayOutcome, ErrorObject> {
    let raw = match outcome {
        Outcome::Result(raw) => raw,
        Outcome::Error(e) => return Err(e),
        _ => return Err(outcome_unknown()),
    };
    let record: Record<'_> = serde_json::from_str(raw.get()).map_err(|_| outcome_unknown())?;
    if let Some(result) = record.c {
        return Ok(RelayOutcome::Written(result.to_owned()));
    }
    let mut round = record.i.ok_or_else(outcome_unknown)?;
    let requests: InputRequests =
        serde_json::from_value(round["q"].take()).map_err(|_| outcome_unknown())?;
    Ok(RelayOutcome::InputRequired {
        requests,
        routing: round["r"].take(),
    })
}

/// Relays `send` once for the round `id` (module docs): the first
/// claimant sends it, every duplicate gets its outcome. `routing` is the
/// retry's own, handed back to a duplicate told to come back.
pub(crate) async fn once<F>(
    store: Arc<dyn ReplayStore>,
    id: StateId,
    scope: Scope,
    lease: Duration,
    routing: Value,
    send: F,
) -> Result<RelayOutcome, ErrorObject>
where
    F: Future<Output = Result<RelayOutcome, ErrorObject>> + Send + 'static,
{
    let owner = Owner::random();
    let claim = ClaimSpec::new(id, owner, scope, SystemTime::now() + KEEP, lease);
    let record = claim.record();
    match store.begin(claim).await.map_err(|e| store_failed(&e))? {
        Begin::First => {}
        Begin::Done(outcome) => {
            tracing::debug!("gateway duplicate served the stored reply");
            return decode(outcome);
        }
        Begin::InFlight => return duplicate(&*store, &record, routing).await,
        _ => return Err(outcome_unknown()),
    }
    // Ours: relayed in a task of its own, so that the client going away
    // does not leave the record in flight.
    let task = tokio::spawn(async move {
        let outcome = match tokio::spawn(send).await {
            Ok(outcome) => outcome,
            Err(e) => {
                tracing::error!(error = %e, "a relayed leg panicked");
                Err(outcome_unknown())
            }
        };
        match store.finish(&record, owner, encode(&outcome)).await {
            Ok(true) => {}
            Ok(false) => tracing::warn!("a deduplicated leg lost its claim before it finished"),
            Err(e) => tracing::error!(error = ?e, "gateway replay store failed to keep a reply"),
        }
        outcome
    });
    task.await.unwrap_or_else(|_| Err(outcome_unknown()))
}

/// A duplicate of a leg in flight: its outcome once stored, or a state-only
/// round with the same routing after [`DUPLICATE_WAIT`].
async fn duplicate(
    store: &dyn ReplayStore,
    record: &RecordKey,
    routing: Value,
) -> Result<RelayOutcome, ErrorObject> {
    let until = tokio::time::Instant::now() + DUPLICATE_WAIT;
    loop {
        let changed = store.changed(record);
        match store.status(record).await.map_err(|e| store_failed(&e))? {
            Some(Begin::Done(outcome)) => return decode(outcome),
            Some(Begin::InFlight) => {}
            _ => return Err(outcome_unknown()),
        }
        tokio::select! {
            () = changed => {}
            () = tokio::time::sleep(RECHECK) => {}
            () = tokio::time::sleep_until(until) => {
                return Ok(RelayOutcome::InputRequired {
                    requests: InputRequests::new(),
                    routing,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_junk_is_none() {
        let id = new_id();
        let routing = json!({"u": "x", KEY: id});
        assert!(id_of(&routing).is_some());
        assert_eq!(id_of(&json!({"u": "x"})), None);
        assert_eq!(id_of(&json!({KEY: "short"})), None);
        assert_eq!(id_of(&json!({KEY: 7})), None);
    }

    #[test]
    fn outcomes_round_trip() {
        // A result comes back as the text it was stored as.
        let complete = Ok(RelayOutcome::Complete(json!({"content": []})));
        let written = |t: &str| {
            Ok(RelayOutcome::Written(
                serde_json::value::RawValue::from_string(t.to_owned()).unwrap(),
            ))
        };
        assert_eq!(decode(encode(&complete)), written(r#"{"content":[]}"#));
        // What a tree refuses is stored and served as written, not lost.
        for text in [
            r#"{"content":[],"x":1e400}"#,
            r#"{"s":"\udc00","n":123456789012345678901234567890}"#,
        ] {
            let outcome = written(text);
            assert_eq!(decode(encode(&outcome)), outcome, "{text}");
        }
        let round = Ok(RelayOutcome::InputRequired {
            requests: InputRequests::new(),
            routing: json!({"u": "x", "s": "abc"}),
        });
        assert_eq!(decode(encode(&round)), round);
        let error = Err(ErrorObject::invalid_params("no"));
        assert_eq!(decode(encode(&error)), error);
        let lost = Err(ErrorObject::new(codes::OUTCOME_UNKNOWN, "lost"));
        assert_eq!(encode(&lost), Outcome::Unknown);
        assert_eq!(
            decode(Outcome::Unknown).unwrap_err().code,
            codes::OUTCOME_UNKNOWN
        );
    }
}
