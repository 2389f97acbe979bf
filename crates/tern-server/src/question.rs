//! Questions a handler can ask the client through MRTR: elicitation (form and
//! URL), and the deprecated sampling and roots.
//!
//! Each question renders to one input request, has a key and a fingerprint:
//! the first half of the SHA-256 of its rendered request's JSON (this
//! server renders it the same way on every leg). An answer counts only for
//! the exact question it was given to. The JSON is written once per
//! question value and reused for the fingerprint and for `inputRequests`
//! (`rendered.rs`).
//!
//! The key is the one chosen with `.key(...)`, else one from what the
//! question *is*, never from its text, so a wording change keeps it (preset
//! answers and answer files go on working): a form's type name in snake
//! case (`Elicit::<OnError>::form(…)` → `on_error`), `url` for a URL
//! question, `sample` and `roots` for the deprecated two. Two questions of
//! one round under one key are an error naming both ([`crate::Ctx::ask`]);
//! [`crate::Ctx::ask_all`] numbers the derived keys of questions that share
//! one (`confirm`, `confirm_2`, …).

use std::marker::PhantomData;

use std::sync::{Arc, Once, OnceLock};

use serde::de::DeserializeOwned;
use tern_protocol::ClientCapabilities;
use tern_protocol::elicitation::{
    ElicitAction, ElicitRequestFormParams, ElicitRequestParams, ElicitRequestUrlParams,
    ElicitResult, RequestedSchema,
};
use tern_protocol::mrtr::{InputRequest, InputResponse};
use tern_protocol::roots::Root;
use tern_protocol::sampling::{
    CreateMessageRequestParams, CreateMessageResult, IncludeContext, SamplingMessage,
};

use crate::form::{FormError, form_schema};
use crate::rendered::Rendered;

/// A type a form answer decodes into: any `Deserialize + JsonSchema` type
/// whose schema is flat (see [`crate::form`]).
pub trait Form: DeserializeOwned + schemars::JsonSchema + Send + 'static {}

impl<T: DeserializeOwned + schemars::JsonSchema + Send + 'static> Form for T {}

/// What the user did with an elicitation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer<T> {
    /// The user answered (a form) or consented (a URL).
    Accept(T),
    /// The user explicitly refused.
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

impl<T> Answer<T> {
    /// The accepted value, if any.
    pub fn accepted(self) -> Option<T> {
        match self {
            Self::Accept(v) => Some(v),
            _ => None,
        }
    }
}

mod sealed {
    /// What only tern's own questions have: their request rendered once
    /// per question value.
    pub trait Sealed {
        /// The request's JSON and fingerprint, rendered on first use.
        fn rendered(&self) -> &std::sync::Arc<crate::rendered::Rendered>;
    }
}

/// A question for the client. Implemented by [`Elicit`], [`Sample`] and
/// [`ListRoots`] only.
pub trait Question: sealed::Sealed + Send + Sync {
    /// What the handler gets back.
    type Output: Send;

    /// The rendered input request.
    fn request(&self) -> &InputRequest;

    /// The key the answer travels under: the one chosen with `.key(...)`, or
    /// the one derived from what the question is (module docs).
    fn key(&self) -> &str;

    /// The key was chosen with `.key(...)` (not derived).
    fn explicit_key(&self) -> bool;

    /// Decodes an answer; `Err` when it does not satisfy the question, which
    /// then is asked again (rule `answers-missing-ask-again`).
    fn decode(&self, response: InputResponse) -> Result<Self::Output, String>;

    /// A question that could not be built (a form type outside the flat
    /// subset): asking it is an internal error.
    fn invalid(&self) -> Option<&FormError> {
        None
    }
}

/// The capabilities `request` needs from the client, and whether `declared`
/// has them (rule `ask-declared-only`: sub-capabilities and elicitation modes
/// included).
pub(crate) fn required_capabilities(request: &InputRequest) -> (ClientCapabilities, &'static str) {
    match request {
        InputRequest::Elicitation(e) => match &e.params {
            ElicitRequestParams::Form(_) => (
                ClientCapabilities::default().with_elicitation_form(),
                "elicitation (form mode)",
            ),
            ElicitRequestParams::Url(_) => (
                ClientCapabilities::default().with_elicitation_url(),
                "elicitation (URL mode)",
            ),
        },
        InputRequest::Sampling(s) => {
            let mut caps = ClientCapabilities::default().with_sampling();
            let needs_tools = s.params.tools.is_some() || s.params.tool_choice.is_some();
            let needs_context = matches!(
                s.params.include_context,
                Some(IncludeContext::ThisServer | IncludeContext::AllServers)
            );
            if let Some(sampling) = caps.sampling.as_mut() {
                if needs_tools {
                    sampling.tools = Some(tern_protocol::JsonObject::new());
                }
                if needs_context {
                    sampling.context = Some(tern_protocol::JsonObject::new());
                }
            }
            let what = if needs_tools {
                "sampling with tools"
            } else {
                "sampling"
            };
            (caps, what)
        }
        InputRequest::Roots(_) => (ClientCapabilities::default().with_roots(), "roots"),
    }
}

/// `declared` covers what `request` needs.
pub(crate) fn declared(request: &InputRequest, declared: &ClientCapabilities) -> bool {
    match request {
        InputRequest::Elicitation(e) => match &e.params {
            ElicitRequestParams::Form(_) => declared.elicitation_form(),
            ElicitRequestParams::Url(_) => declared.elicitation_url(),
        },
        InputRequest::Sampling(s) => {
            let tools_ok = (s.params.tools.is_none() && s.params.tool_choice.is_none())
                || declared.sampling_tools();
            let context_ok = !matches!(
                s.params.include_context,
                Some(IncludeContext::ThisServer | IncludeContext::AllServers)
            ) || declared.sampling_context();
            declared.sampling() && tools_ok && context_ok
        }
        InputRequest::Roots(_) => declared.roots(),
    }
}

/// A question as a handler's author knows it, for an error that names it:
/// its kind and message (cut short).
pub(crate) fn describe(request: &InputRequest) -> String {
    let cut = |text: &str| tern_protocol::error::cut(text, 60).into_owned();
    match request {
        InputRequest::Elicitation(e) => match &e.params {
            ElicitRequestParams::Form(f) => format!("the form \"{}\"", cut(&f.message)),
            ElicitRequestParams::Url(u) => format!("the URL question \"{}\"", cut(&u.message)),
        },
        InputRequest::Sampling(_) => "a sampling request".to_owned(),
        InputRequest::Roots(_) => "a roots request".to_owned(),
    }
}

/// The default key of a form of type `T`: its name in snake case, without
/// its path or generic arguments (`my_app::forms::OnError<X>` →
/// `on_error`; `URLInput` → `url_input`).
pub(crate) fn key_of_type<T: ?Sized>() -> String {
    let full = std::any::type_name::<T>();
    let bare = full.split('<').next().unwrap_or(full);
    let name = bare.rsplit("::").next().unwrap_or(bare);
    let chars: Vec<char> = name.chars().collect();
    let mut out = String::with_capacity(name.len() + 4);
    for (i, &c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let after_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let before_lower = i > 0
                && chars[i - 1].is_uppercase()
                && chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if (after_lower || before_lower) && !out.ends_with('_') {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(c);
        }
    }
    if out.is_empty() {
        "form".to_owned()
    } else {
        out
    }
}

/// An elicitation: a form whose answer decodes into `T`, or (with `T = ()`)
/// a URL the user is asked to open.
pub struct Elicit<T> {
    key: String,
    explicit: bool,
    request: InputRequest,
    schema: Option<Arc<RequestedSchema>>,
    error: Option<FormError>,
    rendered: OnceLock<Arc<Rendered>>,
    _answer: PhantomData<fn() -> T>,
}

impl<T> std::fmt::Debug for Elicit<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elicit")
            .field("key", &self.key)
            .field("request", &self.request)
            .finish_non_exhaustive()
    }
}

impl<T: Form> Elicit<T> {
    /// A form question: the schema comes from `T`. Servers must not ask for
    /// secrets this way (spec: Elicitation › User Interaction Model); use
    /// [`Elicit::url`].
    pub fn form(message: impl Into<String>) -> Self {
        let (schema, error) = match form_schema::<T>() {
            Ok(s) => (Some(s), None),
            Err(e) => (None, Some(e)),
        };
        let requested = schema.as_deref().cloned().unwrap_or_default();
        let params = ElicitRequestFormParams::new(message, requested);
        Self {
            key: key_of_type::<T>(),
            explicit: false,
            request: InputRequest::elicit(ElicitRequestParams::Form(params)),
            schema,
            error,
            rendered: OnceLock::new(),
            _answer: PhantomData,
        }
    }
}

impl Elicit<()> {
    /// A URL-mode question: `accept` means only that the user consented to open
    /// `url`; the outcome is learnt on a later retry (rule
    /// `url-elicitation-consent`). The URL must carry no credentials or
    /// personal data.
    pub fn url(message: impl Into<String>, url: impl Into<String>) -> Self {
        let params = ElicitRequestUrlParams::new(message, url);
        Self {
            key: "url".to_owned(),
            explicit: false,
            request: InputRequest::elicit(ElicitRequestParams::Url(params)),
            schema: None,
            error: None,
            rendered: OnceLock::new(),
            _answer: PhantomData,
        }
    }
}

impl<T> Elicit<T> {
    /// Sets the key the answer travels under (default: the form type's
    /// name in snake case, `url` for a URL question).
    #[must_use]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self.explicit = true;
        self
    }
}

impl<T> sealed::Sealed for Elicit<T> {
    fn rendered(&self) -> &Arc<Rendered> {
        Rendered::once(&self.rendered, &self.request)
    }
}

impl<T: DeserializeOwned + Send + 'static> Question for Elicit<T> {
    type Output = Answer<T>;

    fn request(&self) -> &InputRequest {
        &self.request
    }

    fn key(&self) -> &str {
        &self.key
    }

    fn explicit_key(&self) -> bool {
        self.explicit
    }

    fn decode(&self, response: InputResponse) -> Result<Answer<T>, String> {
        let InputResponse::Elicitation(ElicitResult { action, content }) = response else {
            return Err("not an elicitation answer".into());
        };
        match action {
            ElicitAction::Decline => Ok(Answer::Decline),
            ElicitAction::Cancel => Ok(Answer::Cancel),
            ElicitAction::Accept => {
                let content = match &self.schema {
                    // URL mode: consent only; any content is ignored.
                    None => serde_json::Value::Null,
                    Some(schema) => {
                        let mut content = content.ok_or("a form answer needs content")?;
                        content.retain(|k, _| schema.properties.contains_key(k));
                        schema.check(&content)?;
                        serde_json::to_value(content).map_err(|e| e.to_string())?
                    }
                };
                T::deserialize(content)
                    .map(Answer::Accept)
                    .map_err(|e| e.to_string())
            }
        }
    }

    fn invalid(&self) -> Option<&FormError> {
        self.error.as_ref()
    }
}

static SAMPLING_WARNING: Once = Once::new();
static ROOTS_WARNING: Once = Once::new();

/// A sampling question (deprecated by SEP-2577: call the model provider
/// directly where you can). Needs the client's `sampling` capability.
#[derive(Debug)]
pub struct Sample {
    key: Option<String>,
    request: InputRequest,
    rendered: OnceLock<Arc<Rendered>>,
}

impl Sample {
    /// Asks the client's model with these params.
    #[deprecated(
        note = "sampling is deprecated in MCP 2026-07-28 (SEP-2577); call your model provider directly"
    )]
    pub fn new(params: CreateMessageRequestParams) -> Self {
        SAMPLING_WARNING
            .call_once(|| tracing::warn!("this server asks for sampling, deprecated by SEP-2577"));
        Self {
            key: None,
            request: InputRequest::sampling(params),
            rendered: OnceLock::new(),
        }
    }

    /// Asks the client's model one user message.
    #[deprecated(
        note = "sampling is deprecated in MCP 2026-07-28 (SEP-2577); call your model provider directly"
    )]
    #[allow(deprecated, reason = "a shorthand of the deprecated constructor")]
    pub fn text(prompt: impl Into<String>, max_tokens: u64) -> Self {
        Self::new(CreateMessageRequestParams {
            messages: vec![SamplingMessage::user_text(prompt)],
            max_tokens,
            ..CreateMessageRequestParams::default()
        })
    }

    /// Sets the key the answer travels under.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

impl sealed::Sealed for Sample {
    fn rendered(&self) -> &Arc<Rendered> {
        Rendered::once(&self.rendered, &self.request)
    }
}

impl Question for Sample {
    type Output = CreateMessageResult;

    fn request(&self) -> &InputRequest {
        &self.request
    }

    fn key(&self) -> &str {
        self.key.as_deref().unwrap_or("sample")
    }

    fn explicit_key(&self) -> bool {
        self.key.is_some()
    }

    fn decode(&self, response: InputResponse) -> Result<CreateMessageResult, String> {
        match response {
            InputResponse::Sampling(r) => Ok(*r),
            _ => Err("not a sampling answer".into()),
        }
    }
}

/// A roots question (deprecated by SEP-2577: take paths as tool arguments
/// where you can). Needs the client's `roots` capability.
#[derive(Debug)]
pub struct ListRoots {
    key: Option<String>,
    request: InputRequest,
    rendered: OnceLock<Arc<Rendered>>,
}

impl ListRoots {
    /// Asks for the client's roots.
    #[deprecated(
        note = "roots are deprecated in MCP 2026-07-28 (SEP-2577); take paths as arguments"
    )]
    #[allow(
        clippy::new_without_default,
        reason = "deprecated constructor; Default would hide the deprecation"
    )]
    pub fn new() -> Self {
        ROOTS_WARNING
            .call_once(|| tracing::warn!("this server asks for roots, deprecated by SEP-2577"));
        // `params: {}`, as the conformance suite's reference sends it.
        let request = InputRequest::Roots(tern_protocol::mrtr::ListRootsRequest {
            params: Some(tern_protocol::roots::ListRootsRequestParams::default()),
            ..tern_protocol::mrtr::ListRootsRequest::default()
        });
        Self {
            key: None,
            request,
            rendered: OnceLock::new(),
        }
    }

    /// Sets the key the answer travels under.
    #[must_use]
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
}

impl sealed::Sealed for ListRoots {
    fn rendered(&self) -> &Arc<Rendered> {
        Rendered::once(&self.rendered, &self.request)
    }
}

impl Question for ListRoots {
    type Output = Vec<Root>;

    fn request(&self) -> &InputRequest {
        &self.request
    }

    fn key(&self) -> &str {
        self.key.as_deref().unwrap_or("roots")
    }

    fn explicit_key(&self) -> bool {
        self.key.is_some()
    }

    fn decode(&self, response: InputResponse) -> Result<Vec<Root>, String> {
        match response {
            // Roots › Data Types: every root is a file:// URI; anything else
            // asks again.
            InputResponse::Roots(r)
                if r.roots.iter().all(|root| root.uri.starts_with("file://")) =>
            {
                Ok(r.roots)
            }
            InputResponse::Roots(_) => Err("a root is not a file:// URI".into()),
            _ => Err("not a roots answer".into()),
        }
    }
}

/// Any input request as it came — an upstream server's, which a gateway
/// relays — answered with the client's [`InputResponse`] as it is, of the
/// request's kind. The key is the one given (an upstream's own key), never
/// derived. Under MRTR it is asked like any question; under the *await*
/// strategy (a 2025-11-25 session, a task) it goes to the session as an
/// `elicitation/create`, `sampling/createMessage` or `roots/list`, or into
/// the task's `inputRequests`.
///
/// ```
/// use tern_protocol::mrtr::InputRequest;
/// use tern_server::question::AskInput;
///
/// let upstream: InputRequest = serde_json::from_value(serde_json::json!({
///     "method": "elicitation/create",
///     "params": {"mode": "form", "message": "Region?", "requestedSchema": {
///         "type": "object", "properties": {"region": {"type": "string"}}}}
/// })).unwrap();
/// let question = AskInput::new("region", upstream);
/// # let _ = question;
/// ```
#[derive(Debug, Clone)]
pub struct AskInput {
    key: String,
    request: InputRequest,
    rendered: OnceLock<Arc<Rendered>>,
}

impl AskInput {
    /// `request`, asked under `key`.
    pub fn new(key: impl Into<String>, request: InputRequest) -> Self {
        Self {
            key: key.into(),
            request,
            rendered: OnceLock::new(),
        }
    }
}

impl sealed::Sealed for AskInput {
    fn rendered(&self) -> &Arc<Rendered> {
        Rendered::once(&self.rendered, &self.request)
    }
}

impl Question for AskInput {
    type Output = InputResponse;

    fn request(&self) -> &InputRequest {
        &self.request
    }

    fn key(&self) -> &str {
        &self.key
    }

    fn explicit_key(&self) -> bool {
        true
    }

    fn decode(&self, response: InputResponse) -> Result<InputResponse, String> {
        // Already decoded as the request's kind (`Ctx::ask`).
        Ok(response)
    }
}
