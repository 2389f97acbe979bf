//! A question's input request rendered once: its JSON text, and the
//! fingerprint hashed from that text. The same bytes are then written into
//! the `inputRequests` of an `input_required` result, so a leg serialises
//! each question once instead of once for the fingerprint and once more for
//! the wire.
//!
//! The fingerprint is the first half of the SHA-256 of the request's JSON as
//! `serde_json` writes it, hex: the same bytes as before the rendering was
//! cached, so states sealed by an earlier release still match (the
//! known-answer test below pins one).

use std::sync::{Arc, OnceLock};

use serde::ser::{Serialize, SerializeMap as _, SerializeStruct as _, Serializer};
use serde_json::value::RawValue;
use sha2::Digest as _;
use tern_protocol::ResultMeta;
use tern_protocol::mrtr::InputRequest;

/// An input request with its JSON text and fingerprint.
#[derive(Debug)]
pub struct Rendered {
    /// The request, for the paths that hand it on as a value (an answer
    /// source, a task record).
    pub(crate) request: InputRequest,
    /// Its JSON text, as written into `inputRequests`.
    pub(crate) json: Box<RawValue>,
    /// Hex of the first half of the SHA-256 of [`Rendered::json`].
    pub(crate) fingerprint: String,
}

impl Rendered {
    /// Renders `request`: serialised once, hashed from those bytes.
    pub(crate) fn new(request: InputRequest) -> Rendered {
        // The request is rendered by this server's own code, so its JSON is
        // deterministic from leg to leg: no canonical form is needed. Tern's
        // wire types always serialise; `null` would only fail to match.
        let json =
            serde_json::value::to_raw_value(&request).unwrap_or_else(|_| RawValue::NULL.to_owned());
        let digest: [u8; 32] = sha2::Sha256::digest(json.get().as_bytes()).into();
        Rendered {
            request,
            json,
            fingerprint: crate::json::hex(&digest[..16]),
        }
    }

    /// The rendering `cell` holds, made from `request` the first time.
    pub(crate) fn once<'a>(
        cell: &'a OnceLock<Arc<Rendered>>,
        request: &InputRequest,
    ) -> &'a Arc<Rendered> {
        cell.get_or_init(|| Arc::new(Rendered::new(request.clone())))
    }
}

/// The questions of one round, rendered, by key, in order.
pub(crate) type RenderedRequests = Vec<(String, Arc<Rendered>)>;

/// An `input_required` result asking rendered questions, serialised as
/// [`tern_protocol::InputRequiredResult`] is (same members, same order),
/// each question written from its cached text.
pub(crate) struct InputRequired<'a> {
    /// The questions, by key, in order.
    pub(crate) requests: &'a [(String, Arc<Rendered>)],
    /// The sealed state.
    pub(crate) request_state: &'a str,
    /// The result's `_meta`.
    pub(crate) meta: &'a ResultMeta,
}

impl Serialize for InputRequired<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        struct Requests<'a>(&'a [(String, Arc<Rendered>)]);
        impl Serialize for Requests<'_> {
            fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                let mut map = serializer.serialize_map(Some(self.0.len()))?;
                for (key, rendered) in self.0 {
                    map.serialize_entry(key, &*rendered.json)?;
                }
                map.end()
            }
        }
        let mut result = serializer.serialize_struct("InputRequiredResult", 4)?;
        result.serialize_field("resultType", "input_required")?;
        result.serialize_field("inputRequests", &Requests(self.requests))?;
        result.serialize_field("requestState", self.request_state)?;
        result.serialize_field("_meta", self.meta)?;
        result.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use indexmap::IndexMap;
    use tern_protocol::InputRequiredResult;
    use tern_protocol::elicitation::{ElicitRequestFormParams, ElicitRequestParams};
    use tern_protocol::mrtr::ListRootsRequest;

    fn form() -> InputRequest {
        let schema = serde_json::from_value(serde_json::json!({
            "type": "object",
            "properties": {"ok": {"type": "boolean", "title": "Proceed?"}},
            "required": ["ok"]
        }))
        .unwrap();
        InputRequest::elicit(ElicitRequestParams::Form(ElicitRequestFormParams::new(
            "Really \"delete\"?",
            schema,
        )))
    }

    /// Known answer: the fingerprint of one form question, as every release
    /// so far computed it (SHA-256 of `serde_json`'s bytes of the request).
    /// States sealed before the rendering was cached hold such fingerprints.
    #[test]
    fn the_fingerprint_is_the_pinned_hash_of_the_written_bytes() {
        let rendered = Rendered::new(form());
        assert_eq!(
            rendered.json.get(),
            r#"{"method":"elicitation/create","params":{"mode":"form","message":"Really \"delete\"?","requestedSchema":{"type":"object","properties":{"ok":{"type":"boolean","title":"Proceed?"}},"required":["ok"]}}}"#
        );
        let written = serde_json::to_vec(&form()).unwrap();
        assert_eq!(rendered.json.get().as_bytes(), written);
        let digest: [u8; 32] = sha2::Sha256::digest(&written).into();
        assert_eq!(rendered.fingerprint, crate::json::hex(&digest[..16]));
        // `printf '%s' '<the JSON above>' | sha256sum | cut -c1-32`
        assert_eq!(rendered.fingerprint, "0bd134d62bbf897445ad02f810d57641");
    }

    #[test]
    fn rendered_once_per_cell() {
        let cell = OnceLock::new();
        let first = Arc::clone(Rendered::once(&cell, &form()));
        let second = Rendered::once(&cell, &InputRequest::Roots(ListRootsRequest::default()));
        assert!(Arc::ptr_eq(&first, second));
    }

    /// The cached text makes the same `input_required` bytes as the wire
    /// type serialised whole.
    #[test]
    fn input_required_is_written_as_the_wire_type() {
        let meta = ResultMeta::default();
        let requests = vec![
            ("confirm".to_owned(), Arc::new(Rendered::new(form()))),
            (
                "roots".to_owned(),
                Arc::new(Rendered::new(InputRequest::Roots(
                    ListRootsRequest::default(),
                ))),
            ),
        ];
        let ours = serde_json::to_string(&InputRequired {
            requests: &requests,
            request_state: "t2.k.abc",
            meta: &meta,
        })
        .unwrap();
        let mut wire = InputRequiredResult::new(
            requests
                .iter()
                .map(|(k, r)| (k.clone(), r.request.clone()))
                .collect::<IndexMap<_, _>>(),
            Some("t2.k.abc".to_owned()),
        );
        wire.meta = Some(meta);
        assert_eq!(ours, serde_json::to_string(&wire).unwrap());
    }
}
