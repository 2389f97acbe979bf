//! The 2025-11-25 subset a dual-era server or client needs (spec: Versioning
//! and Compatibility › Backward Compatibility with Initialization-Based
//! Versions): `initialize` and its result, `notifications/initialized`, `ping`,
//! and the server-to-client requests (with ids) that MRTR replaced.
//!
//! Legacy results carry no `resultType`.
//!
//! Also here: the version list and negotiation ([`negotiate`]), and the
//! methods, params and error code 2026-07-28 removed (`logging/setLevel`,
//! `resources/subscribe` / `unsubscribe`, `notifications/elicitation/complete`,
//! `notifications/roots/list_changed`, `-32042`).

use serde::{Deserialize, Serialize, Serializer};

use crate::capabilities::{ClientCapabilities, Implementation, ServerCapabilities};
use crate::elicitation::ElicitRequestParams;
use crate::error::DecodeError;
use crate::json::JsonObject;
use crate::jsonrpc::{RequestId, serialize_request};
use crate::roots::ListRootsRequestParams;
use crate::sampling::CreateMessageRequestParams;

/// The 2025 versions a dual-era peer speaks, newest first.
pub const VERSIONS: &[&str] = &["2025-11-25", "2025-06-18", "2025-03-26"];
/// The newest legacy version.
pub const LATEST: &str = "2025-11-25";
/// Versions older than [`VERSIONS`] that still name the session era (a
/// request with one of these headers is legacy, even if tern will not
/// negotiate it).
const SESSION_ERA: &[&str] = &["2024-11-05"];

/// The version a 2025 server answers `initialize` with (2025-11-25
/// lifecycle): the requested one if it is supported, otherwise the newest it
/// supports — so a client asking for 2026-07-28 gets [`LATEST`].
pub fn negotiate(requested: &str) -> &'static str {
    VERSIONS
        .iter()
        .find(|v| **v == requested)
        .copied()
        .unwrap_or(LATEST)
}

/// `version` names the session era (2024-11-05 to 2025-11-25): an
/// `MCP-Protocol-Version` header with it is not a modern request.
pub fn is_session_era(version: &str) -> bool {
    VERSIONS.contains(&version) || SESSION_ERA.contains(&version)
}

/// `logging/setLevel`.
pub const SET_LEVEL: &str = "logging/setLevel";
/// `resources/subscribe`.
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
/// `resources/unsubscribe`.
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
/// `notifications/elicitation/complete` (URL mode).
pub const NOTIFICATION_ELICITATION_COMPLETE: &str = "notifications/elicitation/complete";
/// `notifications/roots/list_changed`.
pub const NOTIFICATION_ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
/// `-32042`: URL elicitation required (2025-11-25): the request cannot go
/// on until the user visits the URLs in `data.elicitations`.
pub const URL_ELICITATION_REQUIRED: i64 = -32042;

/// Params of `logging/setLevel`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetLevelRequestParams {
    /// The lowest level the client wants to receive.
    pub level: crate::logging::LoggingLevel,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Params of `resources/subscribe` and `resources/unsubscribe`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubscribeRequestParams {
    /// The resource.
    pub uri: String,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Params of `notifications/elicitation/complete`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitationCompleteParams {
    /// The `elicitationId` of the URL elicitation that finished.
    pub elicitation_id: String,
}

/// Params of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequestParams {
    /// The version the client wants.
    pub protocol_version: String,
    /// The client's capabilities for the session (legacy members such as
    /// `roots.listChanged` are kept).
    pub capabilities: ClientCapabilities,
    /// The client.
    pub client_info: Implementation,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// The result of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The version chosen for the session.
    pub protocol_version: String,
    /// The server's capabilities.
    pub capabilities: ServerCapabilities,
    /// The server.
    pub server_info: Implementation,
    /// How to use this server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// Params of `ping` (either direction, 2025-11-25 only), at most a `_meta`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PingParams {
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// A server-to-client request of the 2025-11-25 era: each MRTR question
/// becomes one of these on the legacy leg.
#[derive(Debug, Clone, PartialEq)]
pub enum LegacyServerRequest {
    /// `elicitation/create`.
    Elicit(ElicitRequestParams),
    /// `sampling/createMessage`.
    CreateMessage(CreateMessageRequestParams),
    /// `roots/list`.
    ListRoots(Option<ListRootsRequestParams>),
    /// `ping`.
    Ping(Option<PingParams>),
}

impl LegacyServerRequest {
    /// The method.
    pub fn method(&self) -> &'static str {
        match self {
            Self::Elicit(_) => "elicitation/create",
            Self::CreateMessage(_) => "sampling/createMessage",
            Self::ListRoots(_) => "roots/list",
            Self::Ping(_) => "ping",
        }
    }

    /// Decodes a server-to-client request a 2025-11-25 server sent; `None`
    /// for a method that is not one of these four.
    pub fn decode(
        method: &str,
        params: Option<&serde_json::value::RawValue>,
    ) -> Result<Option<Self>, DecodeError> {
        fn p<T: serde::de::DeserializeOwned>(
            method: &str,
            params: Option<&serde_json::value::RawValue>,
        ) -> Result<Option<T>, DecodeError> {
            params
                .map(|raw| {
                    serde_json::from_str(raw.get()).map_err(|e| DecodeError::params(method, e))
                })
                .transpose()
        }
        Ok(Some(match method {
            "elicitation/create" => Self::Elicit(
                p(method, params)?.ok_or_else(|| DecodeError::params(method, "missing params"))?,
            ),
            "sampling/createMessage" => Self::CreateMessage(
                p(method, params)?.ok_or_else(|| DecodeError::params(method, "missing params"))?,
            ),
            "roots/list" => Self::ListRoots(p(method, params)?),
            "ping" => Self::Ping(p(method, params)?),
            _ => return Ok(None),
        }))
    }

    /// Writes this request as a JSON-RPC request with `id`.
    pub fn serialize_with_id<S: Serializer>(
        &self,
        id: &RequestId,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        match self {
            Self::Elicit(p) => serialize_request(id, self.method(), Some(p), s),
            Self::CreateMessage(p) => serialize_request(id, self.method(), Some(p), s),
            Self::ListRoots(p) => serialize_request(id, self.method(), p.as_ref(), s),
            Self::Ping(p) => serialize_request(id, self.method(), p.as_ref(), s),
        }
    }

    /// This request as a JSON-RPC message with `id`.
    pub fn to_message(&self, id: &RequestId) -> serde_json::Value {
        self.serialize_with_id(id, serde_json::value::Serializer)
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    #[test]
    fn versions_negotiate_per_the_2025_rules() {
        assert_eq!(negotiate("2025-11-25"), "2025-11-25");
        assert_eq!(negotiate("2025-06-18"), "2025-06-18");
        assert_eq!(negotiate("2025-03-26"), "2025-03-26");
        assert_eq!(
            negotiate("2026-07-28"),
            LATEST,
            "a modern version gets the newest legacy one"
        );
        assert_eq!(negotiate("2024-11-05"), LATEST);
        assert_eq!(negotiate(""), LATEST);
        assert!(is_session_era("2024-11-05") && is_session_era("2025-11-25"));
        assert!(!is_session_era("2026-07-28") && !is_session_era("garbage"));
    }

    #[test]
    fn removed_params_round_trip() {
        let level: SetLevelRequestParams =
            serde_json::from_value(json!({"level": "warning"})).unwrap();
        assert_eq!(
            serde_json::to_value(&level).unwrap(),
            json!({"level": "warning"})
        );
        assert!(serde_json::from_value::<SetLevelRequestParams>(json!({"level": "loud"})).is_err());
        let sub: SubscribeRequestParams =
            serde_json::from_value(json!({"uri": "file:///a"})).unwrap();
        assert_eq!(sub.uri, "file:///a");
        let done = ElicitationCompleteParams {
            elicitation_id: "e-1".into(),
        };
        assert_eq!(
            serde_json::to_value(&done).unwrap(),
            json!({"elicitationId": "e-1"})
        );
    }

    use super::*;
    use crate::elicitation::ElicitRequestUrlParams;
    use crate::request::ClientRequest;

    #[test]
    fn initialize_round_trips_with_legacy_capabilities() {
        let params = json!({
            "protocolVersion": "2025-11-25",
            "capabilities": {"roots": {"listChanged": true}, "elicitation": {"form": {}}, "tasks": {"list": {}}},
            "clientInfo": {"name": "old-client", "version": "0.9"}
        });
        let raw = serde_json::value::to_raw_value(&params).unwrap();
        let ClientRequest::Initialize(init) =
            ClientRequest::decode("initialize", Some(&raw)).unwrap()
        else {
            panic!("initialize decodes as Initialize");
        };
        assert!(init.capabilities.roots());
        assert!(
            init.capabilities.extra.contains_key("tasks"),
            "legacy members are kept"
        );
        assert_eq!(serde_json::to_value(&init).unwrap(), params);

        let result = InitializeResult {
            protocol_version: "2025-11-25".into(),
            capabilities: ServerCapabilities::default(),
            server_info: Implementation::new("tern", "0.1.0"),
            instructions: None,
            meta: None,
        };
        let value = serde_json::to_value(&result).unwrap();
        assert!(
            value.get("resultType").is_none(),
            "legacy results carry no resultType"
        );
        assert_eq!(value["serverInfo"]["name"], "tern");
    }

    #[test]
    fn server_to_client_requests_carry_ids() {
        let url = ElicitRequestUrlParams {
            elicitation_id: Some("e-1".into()),
            ..ElicitRequestUrlParams::new("Connect", "https://example.com/c")
        };
        let msg = LegacyServerRequest::Elicit(ElicitRequestParams::Url(url))
            .to_message(&RequestId::Number(7));
        assert_eq!(
            msg,
            json!({"jsonrpc": "2.0", "id": 7, "method": "elicitation/create",
                   "params": {"mode": "url", "message": "Connect", "url": "https://example.com/c", "elicitationId": "e-1"}})
        );
        let ping = LegacyServerRequest::Ping(None).to_message(&RequestId::from("p"));
        assert_eq!(ping, json!({"jsonrpc": "2.0", "id": "p", "method": "ping"}));
        let roots = LegacyServerRequest::ListRoots(None).to_message(&RequestId::Number(1));
        assert_eq!(roots["method"], "roots/list");
    }

    #[test]
    fn server_to_client_requests_decode_by_method() {
        use std::str::FromStr;
        let msg = crate::jsonrpc::Message::from_str(
            r#"{"jsonrpc":"2.0","id":9,"method":"elicitation/create","params":{"message":"Name?","requestedSchema":{"type":"object","properties":{}}}}"#,
        )
        .unwrap();
        let crate::jsonrpc::Message::Request(req) = msg else {
            panic!("a request")
        };
        let decoded = LegacyServerRequest::decode(&req.method, req.params.as_deref())
            .unwrap()
            .unwrap();
        assert!(matches!(
            decoded,
            LegacyServerRequest::Elicit(ElicitRequestParams::Form(_))
        ));
        assert_eq!(decoded.to_message(&req.id)["params"]["message"], "Name?");
        assert!(matches!(
            LegacyServerRequest::decode("ping", None),
            Ok(Some(LegacyServerRequest::Ping(None)))
        ));
        assert!(
            LegacyServerRequest::decode("roots/list", None)
                .unwrap()
                .is_some()
        );
        assert!(
            LegacyServerRequest::decode("tools/list", None)
                .unwrap()
                .is_none()
        );
        assert!(LegacyServerRequest::decode("sampling/createMessage", None).is_err());
    }

    #[test]
    fn removed_methods_stay_raw_for_a_method_not_found_answer() {
        let raw = serde_json::value::to_raw_value(&json!({"level": "debug"})).unwrap();
        let req = ClientRequest::decode("logging/setLevel", Some(&raw)).unwrap();
        assert!(
            matches!(&req, ClientRequest::Other { method, params: Some(_) } if method == "logging/setLevel")
        );
        assert!(crate::method::REMOVED.contains(&req.method()));
        assert!(matches!(
            ClientRequest::decode("ping", None).unwrap(),
            ClientRequest::Ping(None)
        ));
    }
}
