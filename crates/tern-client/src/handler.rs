//! Input handlers: who answers the server's questions. The capabilities a
//! request declares are derived from the handlers installed, so a server only
//! asks what this client can answer; tern never invents an answer.

use tern_protocol::Implementation;
use tern_protocol::elicitation::{ElicitRequestFormParams, ElicitRequestUrlParams, ElicitResult};
use tern_protocol::roots::Root;
use tern_protocol::sampling::{CreateMessageRequestParams, CreateMessageResult};

use crate::future::BoxFuture;

/// What a handler knows about the question it answers (rule
/// `embedded-request-trust`: show who asks).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Question {
    /// The key the answer travels under.
    pub key: String,
    /// The server asking, as its results describe it.
    pub server: Option<Implementation>,
    /// The method of the call that asked (`tools/call`, …).
    pub method: String,
    /// The tool name, prompt name or resource URI of that call.
    pub target: String,
}

/// A handler could not answer (the user closed the terminal, the model
/// provider failed, …). The call stops: there is no way to report one failed
/// answer to the server (rule `no-per-answer-error`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HandlerError(pub String);

impl std::fmt::Display for HandlerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HandlerError {}

/// Answers elicitations. Decline and cancel are answers the user gives, not
/// errors.
///
/// ```
/// use tern_client::transport::BoxFuture;
/// use tern_client::{Client, Elicitation, HandlerError, Question};
/// use tern_protocol::elicitation::{ElicitRequestFormParams, ElicitResult, ElicitValue};
///
/// /// Says yes to every yes/no field, and declines anything else.
/// struct AlwaysYes;
///
/// impl Elicitation for AlwaysYes {
///     fn form(
///         &self,
///         question: Question,
///         params: ElicitRequestFormParams,
///     ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
///         eprintln!("{} asks: {}", question.target, params.message);
///         let mut content = indexmap::IndexMap::new();
///         for (field, schema) in &params.requested_schema.properties {
///             if !matches!(schema, tern_protocol::elicitation::PrimitiveSchema::Boolean(_)) {
///                 return Box::pin(async { Ok(ElicitResult::decline()) });
///             }
///             content.insert(field.clone(), ElicitValue::Bool(true));
///         }
///         Box::pin(async move { Ok(ElicitResult::accept(content)) })
///     }
/// }
///
/// // Installed, it declares `elicitation.form` and answers every round.
/// let builder = Client::builder().elicitation(AlwaysYes);
/// # drop(builder);
/// ```
pub trait Elicitation: Send + Sync + 'static {
    /// Answers a form.
    fn form(
        &self,
        question: Question,
        params: ElicitRequestFormParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>>;

    /// Answers a URL-mode question: show the server and the full URL, get the
    /// user's consent before opening it (accept means consent only, rule
    /// `url-elicitation-consent`).
    fn url(
        &self,
        question: Question,
        params: ElicitRequestUrlParams,
    ) -> BoxFuture<'_, Result<ElicitResult, HandlerError>> {
        let _ = (question, params);
        Box::pin(async { Err(HandlerError("URL mode is not supported".into())) })
    }

    /// Form mode is supported (declared as `elicitation.form`).
    fn supports_form(&self) -> bool {
        true
    }

    /// URL mode is supported (declared as `elicitation.url`).
    fn supports_url(&self) -> bool {
        false
    }
}

/// Answers sampling requests (deprecated by SEP-2577, still supported).
pub trait Sampling: Send + Sync + 'static {
    /// Produces a completion.
    fn create_message(
        &self,
        question: Question,
        params: CreateMessageRequestParams,
    ) -> BoxFuture<'_, Result<CreateMessageResult, HandlerError>>;

    /// `tools` / `toolChoice` are supported (declared as `sampling.tools`).
    fn supports_tools(&self) -> bool {
        false
    }
}

/// Lists the client's roots (deprecated by SEP-2577, still supported).
pub trait Roots: Send + Sync + 'static {
    /// The roots, `file://` URIs.
    fn list_roots(&self, question: Question) -> BoxFuture<'_, Result<Vec<Root>, HandlerError>>;
}

/// Fixed roots.
#[derive(Debug, Clone, Default)]
pub struct StaticRoots(pub Vec<Root>);

impl Roots for StaticRoots {
    fn list_roots(&self, _question: Question) -> BoxFuture<'_, Result<Vec<Root>, HandlerError>> {
        let roots = self.0.clone();
        Box::pin(async move { Ok(roots) })
    }
}
