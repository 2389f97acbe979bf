//! `tern-protocol`: every wire type of the Model Context Protocol, revision
//! 2026-07-28, and of its Tasks and Skills extensions, with the 2025-11-25
//! subset a dual-era peer needs.
//!
//! The crate has no I/O and no async runtime. It is strict where the spec is
//! fixed (`jsonrpc` is `"2.0"`, ids are never `null`, tags hold one value) and
//! lossless where it is open (`_meta`, capabilities, schemas, `arguments` and
//! `structuredContent` keep every member).
//!
//! Messages are classified by their members ([`Message`]); request params are
//! decoded by method ([`ClientRequest::decode`]); results by the method of the
//! request they answer plus `resultType` ([`ServerResult::decode`]), never by
//! trying shapes in turn.
//!
//! ```
//! use std::str::FromStr;
//!
//! use tern_protocol::{ClientRequest, Message, Outcome, ResultContext, ServerResult};
//!
//! let text = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{
//!     "name":"get_weather","arguments":{"city":"Paris"},
//!     "_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",
//!              "io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}}}"#;
//! let Message::Request(request) = Message::from_str(text)? else { unreachable!() };
//! let ClientRequest::CallTool(call) = ClientRequest::from_request(&request)? else { unreachable!() };
//! assert_eq!(call.name, "get_weather");
//! assert!(call.meta.client_capabilities.elicitation_form());
//!
//! // The answer: a question (MRTR) instead of a result.
//! let result = r#"{"resultType":"input_required","requestState":"t1.k.abc",
//!     "inputRequests":{"unit":{"method":"elicitation/create","params":{
//!         "message":"Celsius or Fahrenheit?","requestedSchema":{"type":"object",
//!         "properties":{"unit":{"type":"string","enum":["C","F"]}}}}}}}"#;
//! let decoded = ServerResult::decode("tools/call", result, ResultContext::default())?;
//! let ServerResult::CallTool(Outcome::InputRequired(ir)) = decoded else { unreachable!() };
//! assert_eq!(ir.request_state.as_deref(), Some("t1.k.abc"));
//!
//! // The same text answering tools/list is refused (rule `input-required-methods`).
//! assert!(ServerResult::decode("tools/list", result, ResultContext::default()).is_err());
//! # Ok::<(), tern_protocol::DecodeError>(())
//! ```
//!
//! Features: none. Stability: pre-1.0; the wire types follow the spec revision
//! they name, and growing enums are `#[non_exhaustive]`.

mod annotations;
pub mod capabilities;
pub mod completion;
pub mod content;
pub mod discover;
pub mod elicitation;
pub mod error;
mod format;
pub mod header;
pub(crate) mod json;
pub mod jsonrpc;
pub mod legacy;
mod level;
pub mod logging;
pub mod meta;
pub mod method;
pub mod mrtr;
pub mod notification;
pub mod pagination;
pub mod progress;
pub mod prompt;
pub mod request;
pub mod resource;
pub mod result;
pub mod roots;
pub mod sampling;
pub mod skill;
pub mod subscription;
mod tag;
pub mod task;
pub mod tool;

pub use capabilities::{ClientCapabilities, Icon, Implementation, ServerCapabilities};
pub use content::ContentBlock;
pub use error::{DecodeError, ErrorObject};
pub use json::{DuplicateMember, JsonLimits, JsonObject, ShapeError, check_shape, unique_members};
pub use jsonrpc::{Message, RequestId};
pub use meta::{ProgressToken, RequestMeta, ResultMeta};
pub use mrtr::{
    InputKind, InputRequest, InputRequests, InputRequiredResult, InputResponse, InputResponses,
};
pub use notification::{ClientNotification, ServerNotification};
pub use request::ClientRequest;
pub use result::{Outcome, ResultContext, ServerResult};

/// Protocol versions.
pub mod version {
    /// The revision tern implements.
    pub const LATEST: &str = "2026-07-28";
    /// The previous revision, served on the legacy leg.
    pub const LEGACY: &str = "2025-11-25";
}
