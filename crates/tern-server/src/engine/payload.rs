//! What a `requestState` carries besides its bindings: the sealed payload,
//! versioned so that a rolling upgrade never strands a call in flight.
//!
//! The payload is compact JSON, encrypted by `tern-seal`:
//!
//! | version | members |
//! |---|---|
//! | 1 (first wave; no `v`) | `a` answers (key → `{f: fingerprint, v: answer}`), `p` pending questions (key → `{f, k: e/s/r}`), `o` memo (`ctx.once` name → value) |
//! | 2 (now) | `v: 2`, `c` call id (32 hex digits), `t` call start (Unix seconds), then `a`, `p`, `o` as in 1 |
//!
//! A relayed call's state (`crate::relay`) has a payload of its own, version
//! 101 (`{v: 101, c, t, r: routing}`): refused here like an unknown version,
//! as the relay runner refuses every version but its own.
//!
//! A version-1 state opens: its call id is taken from its state id and its
//! start from its issue time, so the call goes on with the limits it would
//! have had. A version this build does not know is refused like a tampered
//! state. The known-answer tests at the bottom pin both encodings.

use std::collections::BTreeMap;
use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tern_protocol::mrtr::{InputKind, InputResponse};

use crate::ids::CallId;

/// The version this build seals.
pub(crate) const VERSION: u32 = 2;

/// An answer carried over from an earlier round or merged from this retry.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct StoredAnswer {
    /// Fingerprint of the question it answers.
    #[serde(rename = "f")]
    pub(crate) fingerprint: String,
    /// The answer, already checked to be of the question's kind.
    #[serde(rename = "v")]
    pub(crate) value: Value,
    /// The answer as decoded when this leg received it (the runner checked
    /// its kind), so the handler's question reads it without decoding it a
    /// second time. Not sealed: a later leg decodes `value` once, when asked.
    #[serde(skip)]
    pub(crate) decoded: Option<InputResponse>,
}

impl StoredAnswer {
    /// An answer known only as JSON (from a sealed state, a journal, or given
    /// unsealed), decoded when its question is asked.
    pub(crate) fn new(fingerprint: String, value: Value) -> Self {
        Self {
            fingerprint,
            value,
            decoded: None,
        }
    }

    /// An answer this leg received and decoded as its question's kind.
    pub(crate) fn decoded(fingerprint: String, value: Value, response: InputResponse) -> Self {
        Self {
            fingerprint,
            value,
            decoded: Some(response),
        }
    }

    /// The answer as a question of `kind`: the decoding this leg already did,
    /// else `value` decoded now.
    pub(crate) fn take_response(
        &mut self,
        kind: InputKind,
    ) -> Result<InputResponse, tern_protocol::DecodeError> {
        match self.decoded.take() {
            Some(response) if response.kind() == kind => Ok(response),
            _ => InputResponse::decode_as(kind, &self.value),
        }
    }
}

/// Equal when what is sealed is equal (the decoded copy is a cache).
impl PartialEq for StoredAnswer {
    fn eq(&self, other: &Self) -> bool {
        self.fingerprint == other.fingerprint && self.value == other.value
    }
}

impl fmt::Debug for StoredAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Answers are the user's data: never in logs.
        f.debug_struct("StoredAnswer")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

/// What a pending question needs to have its answer checked on the retry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SealedPending {
    #[serde(rename = "f")]
    pub(crate) fingerprint: String,
    #[serde(rename = "k")]
    pub(crate) kind: SealedKind,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum SealedKind {
    #[serde(rename = "e")]
    Elicitation,
    #[serde(rename = "s")]
    Sampling,
    #[serde(rename = "r")]
    Roots,
}

impl From<InputKind> for SealedKind {
    fn from(k: InputKind) -> Self {
        match k {
            InputKind::Elicitation => Self::Elicitation,
            InputKind::Sampling => Self::Sampling,
            InputKind::Roots => Self::Roots,
        }
    }
}

impl From<SealedKind> for InputKind {
    fn from(k: SealedKind) -> Self {
        match k {
            SealedKind::Elicitation => Self::Elicitation,
            SealedKind::Sampling => Self::Sampling,
            SealedKind::Roots => Self::Roots,
        }
    }
}

/// The decoded payload of one state.
#[derive(Clone, PartialEq)]
pub(crate) struct Payload {
    pub(crate) call_id: CallId,
    /// When the call's first leg ran (whole seconds).
    pub(crate) started_at: SystemTime,
    pub(crate) answers: BTreeMap<String, StoredAnswer>,
    pub(crate) pending: BTreeMap<String, SealedPending>,
    pub(crate) memo: BTreeMap<String, Value>,
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys and counts only: answers and memo are the caller's data.
        f.debug_struct("Payload")
            .field("call_id", &self.call_id)
            .field("started_at", &self.started_at)
            .field("answers", &self.answers.keys().collect::<Vec<_>>())
            .field("pending", &self.pending.keys().collect::<Vec<_>>())
            .field("memo", &self.memo.keys().collect::<Vec<_>>())
            .finish()
    }
}

#[derive(Serialize, Deserialize)]
struct Wire {
    #[serde(rename = "v", default, skip_serializing_if = "is_zero")]
    version: u32,
    #[serde(rename = "c", default, skip_serializing_if = "Option::is_none")]
    call_id: Option<String>,
    #[serde(rename = "t", default, skip_serializing_if = "Option::is_none")]
    started: Option<u64>,
    #[serde(rename = "a", default, skip_serializing_if = "BTreeMap::is_empty")]
    answers: BTreeMap<String, StoredAnswer>,
    #[serde(rename = "p", default, skip_serializing_if = "BTreeMap::is_empty")]
    pending: BTreeMap<String, SealedPending>,
    #[serde(rename = "o", default, skip_serializing_if = "BTreeMap::is_empty")]
    memo: BTreeMap<String, Value>,
}

#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's skip_serializing_if signature"
)]
fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn unix_secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(crate) fn parse_call_id(text: &str) -> Option<CallId> {
    if text.len() != 32 {
        return None;
    }
    let mut out = [0u8; 16];
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(text.get(2 * i..2 * i + 2)?, 16).ok()?;
    }
    Some(CallId::from_bytes(out))
}

impl Payload {
    /// The payload of a call's first leg.
    pub(crate) fn first(call_id: CallId, now: SystemTime) -> Self {
        Self {
            call_id,
            started_at: UNIX_EPOCH + Duration::from_secs(unix_secs(now)),
            answers: BTreeMap::new(),
            pending: BTreeMap::new(),
            memo: BTreeMap::new(),
        }
    }

    /// Encodes it as the current version.
    pub(crate) fn encode(&self) -> Result<Vec<u8>, serde_json::Error> {
        serde_json::to_vec(&Wire {
            version: VERSION,
            call_id: Some(self.call_id.to_string()),
            started: Some(unix_secs(self.started_at)),
            answers: self.answers.clone(),
            pending: self.pending.clone(),
            memo: self.memo.clone(),
        })
    }

    /// Decodes any version this build knows. `state_id` and `issued_at` stand
    /// in for what version 1 did not carry.
    pub(crate) fn decode(
        bytes: &[u8],
        state_id: [u8; 16],
        issued_at: SystemTime,
    ) -> Result<Self, String> {
        let wire: Wire = serde_json::from_slice(bytes).map_err(|e| format!("payload: {e}"))?;
        let (call_id, started_at) = match wire.version {
            0 => (CallId::from_bytes(state_id), issued_at),
            VERSION => {
                let call_id = wire
                    .call_id
                    .as_deref()
                    .and_then(parse_call_id)
                    .ok_or("payload: bad call id")?;
                let started = wire.started.ok_or("payload: no call start")?;
                (call_id, UNIX_EPOCH + Duration::from_secs(started))
            }
            other => return Err(format!("payload: unknown version {other}")),
        };
        Ok(Self {
            call_id,
            started_at,
            answers: wire.answers,
            pending: wire.pending,
            memo: wire.memo,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_decoded_by_the_runner_is_not_decoded_again() {
        use tern_protocol::elicitation::ElicitResult;
        // The cached response and the JSON differ, to tell which is read.
        let sealed = serde_json::json!({"action": "decline"});
        let cached = InputResponse::Elicitation(ElicitResult::accept(indexmap::IndexMap::new()));
        let mut answer = StoredAnswer::decoded("fp".into(), sealed.clone(), cached.clone());
        assert_eq!(
            answer.take_response(InputKind::Elicitation).unwrap(),
            cached
        );
        // Taken once; after that (or from a sealed state) the JSON is decoded.
        let again = answer.take_response(InputKind::Elicitation).unwrap();
        assert_eq!(
            again,
            InputResponse::decode_as(InputKind::Elicitation, &sealed).unwrap()
        );
        // A cache of another kind is never used for a question of this kind.
        let mut wrong = StoredAnswer::decoded("fp".into(), sealed, cached);
        assert!(wrong.take_response(InputKind::Roots).is_err());
        // The cache is not sealed: what round-trips is the fingerprint and value.
        let text = serde_json::to_string(&answer).unwrap();
        let back: StoredAnswer = serde_json::from_str(&text).unwrap();
        assert!(back.decoded.is_none());
        assert_eq!(back, answer);
    }

    fn sample() -> Payload {
        let mut p = Payload::first(
            CallId::from_bytes(*b"0123456789abcdef"),
            UNIX_EPOCH + Duration::from_millis(1_800_000_000_999),
        );
        p.answers.insert(
            "region".into(),
            StoredAnswer::new(
                "fp1".into(),
                serde_json::json!({"action": "accept", "content": {"region": "eu"}}),
            ),
        );
        p.pending.insert(
            "confirm".into(),
            SealedPending {
                fingerprint: "fp2".into(),
                kind: SealedKind::Elicitation,
            },
        );
        p.memo.insert("id".into(), serde_json::json!("memo-secret"));
        p
    }

    /// Known answer: a change of the sealed format fails here first.
    #[test]
    fn version_2_encoding_is_pinned() {
        let bytes = sample().encode().unwrap();
        assert_eq!(
            std::str::from_utf8(&bytes).unwrap(),
            r#"{"v":2,"c":"30313233343536373839616263646566","t":1800000000,"a":{"region":{"f":"fp1","v":{"action":"accept","content":{"region":"eu"}}}},"p":{"confirm":{"f":"fp2","k":"e"}},"o":{"id":"memo-secret"}}"#
        );
        let back = Payload::decode(&bytes, [9; 16], UNIX_EPOCH).unwrap();
        assert_eq!(back, sample());
    }

    /// A state sealed by the first wave (no version member) still opens.
    #[test]
    fn version_1_payloads_decode() {
        let v1 = br#"{"a":{"region":{"f":"fp1","v":{"action":"accept","content":{"region":"eu"}}}},"p":{"confirm":{"f":"fp2","k":"e"}},"o":{"id":"memo-secret"}}"#;
        let issued = UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let p = Payload::decode(v1, *b"0123456789abcdef", issued).unwrap();
        let expected = Payload {
            started_at: issued,
            ..sample()
        };
        assert_eq!(p, expected);
        let empty = Payload::decode(b"{}", [1; 16], issued).unwrap();
        assert!(empty.answers.is_empty() && empty.pending.is_empty() && empty.memo.is_empty());
        assert_eq!(empty.call_id, CallId::from_bytes([1; 16]));
    }

    #[test]
    fn unknown_versions_and_bad_members_are_refused() {
        for bad in [
            &br#"{"v":3,"c":"30313233343536373839616263646566","t":1}"#[..],
            br#"{"v":2,"t":1}"#,
            br#"{"v":2,"c":"3031","t":1}"#,
            br#"{"v":2,"c":"zz313233343536373839616263646566","t":1}"#,
            br#"{"v":2,"c":"30313233343536373839616263646566"}"#,
            br#"{"a":{"k":{"f":1}}}"#,
            b"not json",
        ] {
            assert!(
                Payload::decode(bad, [0; 16], UNIX_EPOCH).is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn debug_shows_no_answers_or_memo() {
        let text = format!("{:?}", sample());
        assert!(
            !text.contains("accept") && !text.contains("memo-secret"),
            "{text}"
        );
        assert!(text.contains("region") && text.contains("confirm"));
    }
}
