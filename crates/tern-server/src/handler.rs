//! Handlers are plain `async fn`s whose parameters are extractors: [`Ctx`],
//! [`Args<T>`], [`Principal`] and [`Uri`], in any order, up to four.

use std::future::Future;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tern_protocol::JsonObject;
use tern_protocol::content::{
    ContentBlock, ResourceContents, Role, TextContent, TextResourceContents,
};
use tern_protocol::prompt::{GetPromptResult, PromptMessage};
use tern_protocol::resource::ReadResourceResult;
use tern_protocol::tool::CallToolResult;

use crate::ctx::Ctx;
use crate::error::ToolError;
use crate::future::BoxFuture;
use crate::principal::Principal;

/// What a handler is called with.
#[derive(Debug)]
pub struct CallParts {
    pub(crate) ctx: Ctx,
    /// Tool arguments, prompt arguments, or resource template variables: a
    /// JSON object, shared rather than copied.
    pub(crate) arguments: Arc<Value>,
    /// The resource URI (resources only).
    pub(crate) uri: Option<String>,
}

impl CallParts {
    /// The call's context (as the [`Ctx`] extractor gives it).
    pub fn ctx(&self) -> &Ctx {
        &self.ctx
    }

    /// The tool's arguments, the prompt's arguments or the resource
    /// template's variables: a JSON object.
    pub fn arguments(&self) -> &Value {
        &self.arguments
    }

    /// The resource URI of a read (`None` for a tool or a prompt).
    pub fn uri(&self) -> Option<&str> {
        self.uri.as_deref()
    }
}

/// What an extractor gives the handler wrapper: its value (or error) at
/// once, or a future that asks the client first ([`Asked`]). The wrapper
/// polls every extractor's future together, so all the questions a
/// handler's parameters ask go in one round, and the body runs only once
/// every answer is in.
pub enum Extracted<T> {
    /// Ready.
    Ready(Result<T, ToolError>),
    /// Ready once the client answered.
    Asking(BoxFuture<'static, Result<T, ToolError>>),
}

impl<T> std::fmt::Debug for Extracted<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Ready(_) => "Extracted::Ready",
            Self::Asking(_) => "Extracted::Asking",
        })
    }
}

impl<T> Extracted<T> {
    async fn resolve(self) -> Result<T, ToolError> {
        match self {
            Self::Ready(r) => r,
            Self::Asking(f) => f.await,
        }
    }
}

/// Something a handler can take as a parameter.
///
/// `from_call` is synchronous: most extractors read the call (its
/// arguments, its principal, its URI). One that must ask the client first
/// overrides [`FromCall::extract`] to return a future (the design's choice:
/// a second, asynchronous method with a synchronous default keeps every
/// plain extractor free of a boxed future per call). A custom extractor:
///
/// ```
/// use tern_server::handler::{CallParts, FromCall};
/// use tern_server::ToolError;
///
/// /// The caller's tenant, from the `tenant` argument, lower-cased.
/// struct Tenant(String);
///
/// impl FromCall for Tenant {
///     fn from_call(parts: &CallParts) -> Result<Self, ToolError> {
///         parts.arguments()["tenant"]
///             .as_str()
///             .map(|t| Tenant(t.to_lowercase()))
///             .ok_or_else(|| ToolError::new("a `tenant` argument is needed"))
///     }
/// }
/// ```
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be a handler's parameter",
    note = "a parameter is an extractor: `Ctx`, `Args<T>` (T: Deserialize + JsonSchema), `Asked<T>`, `Principal`, `Uri`, or a type that implements `FromCall`"
)]
pub trait FromCall: Sized + Send + 'static {
    /// Extracts it; an error ends the call as a tool error.
    fn from_call(parts: &CallParts) -> Result<Self, ToolError>;

    /// How the handler wrapper extracts it: [`Self::from_call`], ready at
    /// once, unless the extractor must ask the client first.
    fn extract(parts: &CallParts) -> Extracted<Self> {
        Extracted::Ready(Self::from_call(parts))
    }

    /// The JSON Schema of the arguments this extractor reads, if it reads
    /// them.
    fn arguments_schema() -> Option<JsonObject> {
        None
    }
}

impl FromCall for Ctx {
    fn from_call(parts: &CallParts) -> Result<Self, ToolError> {
        Ok(parts.ctx.clone())
    }
}

impl FromCall for Principal {
    fn from_call(parts: &CallParts) -> Result<Self, ToolError> {
        Ok(parts.ctx.principal().clone())
    }
}

/// The resource URI a read asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Uri(pub String);

impl FromCall for Uri {
    fn from_call(parts: &CallParts) -> Result<Self, ToolError> {
        parts
            .uri
            .clone()
            .map(Uri)
            .ok_or_else(|| ToolError::internal("Uri extracted outside a resource read"))
    }
}

/// Typed arguments. For a tool, the `inputSchema` comes from `T`'s
/// `JsonSchema` and arguments are validated against it before the handler
/// runs (feature `validate`, on by default), then decoded into `T`, a
/// failure either way answered as a tool error the model can read; for a
/// prompt, `T`'s fields are the prompt's arguments; for a resource
/// template, they are the template's variables.
#[derive(Debug, Clone, PartialEq)]
pub struct Args<T>(pub T);

impl<T: DeserializeOwned + JsonSchema + Send + 'static> FromCall for Args<T> {
    fn from_call(parts: &CallParts) -> Result<Self, ToolError> {
        T::deserialize(&*parts.arguments).map(Args).map_err(|e| {
            ToolError::new(tern_protocol::error::tidy(&format!(
                "Invalid arguments: {e}"
            )))
        })
    }

    fn arguments_schema() -> Option<JsonObject> {
        let schema = schemars::generate::SchemaSettings::draft2020_12()
            .into_generator()
            .into_root_schema_for::<T>();
        match schema.to_value() {
            Value::Object(mut o) => {
                o.remove("$schema");
                o.remove("title");
                properties_at_the_root(&mut o);
                Some(o)
            }
            _ => None,
        }
    }
}

/// An arguments schema that is a union of object variants (an `enum` of
/// struct variants: schemars writes `oneOf` / `anyOf` branches, each with
/// its own `properties`) rewritten as the 2026-07-28 `Tool.inputSchema`
/// guidance asks: "declare `properties` at the schema root and keep the
/// branches to presence assertions such as `required`", since a type
/// constraint inside a branch that does not match is not enforced.
///
/// - The root is `"type": "object"` with every variant's properties.
/// - A property the variants agree on keeps its schema; one whose schema
///   differs between variants (a tag's `const`, say) gets `anyOf` of their
///   schemas at the root: a value must fit one of them. Which one its
///   variant needs is the handler's deserializer's to check (an argument
///   that fits another variant's schema is refused there, `isError`).
/// - The branches keep only `required`, under `anyOf` (presence-only
///   branches may overlap, which `oneOf` would refuse).
///
/// A schema that is not such a union is left as it is.
fn properties_at_the_root(schema: &mut JsonObject) {
    let Some((union, branches)) = ["oneOf", "anyOf"].iter().find_map(|k| {
        schema
            .get(*k)
            .and_then(Value::as_array)
            .map(|b| (*k, b.clone()))
    }) else {
        return;
    };
    let objects: Option<Vec<&JsonObject>> = branches
        .iter()
        .map(|b| {
            b.as_object()
                .filter(|o| o.get("type").and_then(Value::as_str) == Some("object"))
        })
        .collect();
    let Some(objects) = objects.filter(|o| !o.is_empty()) else {
        return;
    };
    let mut properties = JsonObject::new();
    let mut variants: JsonObject = JsonObject::new();
    for branch in &objects {
        for (name, prop) in branch
            .get("properties")
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
        {
            let seen = variants
                .entry(name.clone())
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = seen
                && !list.contains(prop)
            {
                list.push(prop.clone());
            }
        }
    }
    for (name, list) in variants {
        let Value::Array(mut list) = list else {
            continue;
        };
        let merged = if list.len() == 1 {
            list.remove(0)
        } else {
            serde_json::json!({ "anyOf": list })
        };
        properties.insert(name, merged);
    }
    let presence: Vec<Value> = objects
        .iter()
        .map(|b| {
            let required = b
                .get("required")
                .cloned()
                .unwrap_or_else(|| Value::Array(Vec::new()));
            serde_json::json!({ "required": required })
        })
        .collect();
    schema.remove(union);
    schema.insert("type".into(), Value::String("object".into()));
    schema.insert("properties".into(), Value::Object(properties));
    schema.insert("anyOf".into(), Value::Array(presence));
}

/// A form a handler takes as a parameter (`Asked<T>`): the question it
/// is asked with, made from the call (its arguments, say).
pub trait Asks: crate::question::Form {
    /// The question (its message; its key, by default the type's name).
    fn question(parts: &CallParts) -> crate::question::Elicit<Self>;
}

/// A question a handler declares instead of asking: `Asked(answer):
/// Asked<Region>` in its parameters. The wrapper asks every `Asked`
/// parameter of the handler in one round before the body runs (under MRTR,
/// the tool answers `input_required` and the body runs once the retry
/// carries every answer; under a task or a 2025 session, the answers are
/// awaited), and the body gets each [`crate::Answer`]: decline and cancel
/// are values to match, never a panic. A request that did not declare
/// elicitation ends `-32021`, as `ctx.ask` does: "the client cannot ask"
/// stays apart from "the user said no".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked<T>(pub crate::question::Answer<T>);

impl<T: Asks> FromCall for Asked<T> {
    /// Always an error: an `Asked` parameter is extracted by asking
    /// ([`FromCall::extract`]), which the handler wrapper does.
    fn from_call(_parts: &CallParts) -> Result<Self, ToolError> {
        Err(ToolError::internal(
            "an Asked<T> parameter is extracted by asking the client (FromCall::extract)",
        ))
    }

    fn extract(parts: &CallParts) -> Extracted<Self> {
        let ctx = parts.ctx.clone();
        let question = T::question(parts);
        Extracted::Asking(Box::pin(async move { Ok(Asked(ctx.ask(question).await?)) }))
    }
}

/// An `async fn` usable as a handler, by arity and extractor types `M`,
/// returning `R`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a handler",
    label = "expected an `async fn` whose parameters are extractors",
    note = "a handler is an `async fn` of at most four extractors (`Ctx`, `Args<T>`, `Asked<T>`, `Principal`, `Uri`, or a `FromCall` type) returning a tool, prompt or resource result; an `Args<T>` needs `T: Deserialize + JsonSchema` (derive both)"
)]
pub trait Handler<M, R>: Clone + Send + Sync + 'static {
    /// Runs the handler.
    fn call(&self, parts: CallParts) -> BoxFuture<'static, Result<R, ToolError>>;

    /// The arguments schema from the extractors (the first that has one).
    fn arguments_schema() -> Option<JsonObject>;
}

impl<F, Fut, R> Handler<(), R> for F
where
    F: Fn() -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: Send + 'static,
{
    fn call(&self, _parts: CallParts) -> BoxFuture<'static, Result<R, ToolError>> {
        let f = self.clone();
        Box::pin(async move { Ok(f().await) })
    }

    fn arguments_schema() -> Option<JsonObject> {
        None
    }
}

macro_rules! handler_arity {
    ($($e:ident),+) => {
        impl<F, Fut, R, $($e),+> Handler<($($e,)+), R> for F
        where
            F: Fn($($e),+) -> Fut + Clone + Send + Sync + 'static,
            Fut: Future<Output = R> + Send + 'static,
            R: Send + 'static,
            $($e: FromCall,)+
        {
            #[allow(non_snake_case, reason = "one binding per extractor type")]
            fn call(&self, parts: CallParts) -> BoxFuture<'static, Result<R, ToolError>> {
                let f = self.clone();
                $(let $e = $e::extract(&parts);)+
                Box::pin(async move {
                    // Together: every parameter's question in one round.
                    let ($($e,)+) = tokio::join!($($e.resolve()),+);
                    $(let $e = $e?;)+
                    Ok(f($($e),+).await)
                })
            }

            fn arguments_schema() -> Option<JsonObject> {
                None$(.or_else($e::arguments_schema))+
            }
        }
    };
}

handler_arity!(A);
handler_arity!(A, B);
handler_arity!(A, B, C);
handler_arity!(A, B, C, D);

/// Structured tool output: serialised into `structuredContent` and, for
/// clients that read only text, into a text block.
#[derive(Debug, Clone, PartialEq)]
pub struct Json<T>(pub T);

/// What a tool handler may return.
pub trait IntoToolResult {
    /// The result, or the error that ends the call.
    fn into_tool_result(self) -> Result<CallToolResult, ToolError>;

    /// What the server sends: by default [`Self::into_tool_result`]'s
    /// result. [`Json`] answers its value serialised once, which the server
    /// writes into `structuredContent` and the text block as it is, never
    /// building a `serde_json::Value` tree of it.
    fn into_tool_output(self) -> Result<ToolOutput, ToolError>
    where
        Self: Sized,
    {
        self.into_tool_result().map(ToolOutput::from)
    }
}

/// A tool's outcome on its way to the wire (see
/// [`IntoToolResult::into_tool_output`]).
#[derive(Debug)]
pub struct ToolOutput(pub(crate) Output);

#[derive(Debug)]
pub(crate) enum Output {
    /// A result as it is.
    Result(CallToolResult),
    /// [`Json`]'s value, serialised: both the structured content and the
    /// text of the one text block.
    Structured(Box<serde_json::value::RawValue>),
}

impl From<CallToolResult> for ToolOutput {
    fn from(result: CallToolResult) -> Self {
        Self(Output::Result(result))
    }
}

impl IntoToolResult for CallToolResult {
    fn into_tool_result(self) -> Result<CallToolResult, ToolError> {
        Ok(self)
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> Result<CallToolResult, ToolError> {
        Ok(CallToolResult::text(self))
    }
}

impl IntoToolResult for &'static str {
    fn into_tool_result(self) -> Result<CallToolResult, ToolError> {
        Ok(CallToolResult::text(self))
    }
}

impl IntoToolResult for Vec<ContentBlock> {
    fn into_tool_result(self) -> Result<CallToolResult, ToolError> {
        Ok(CallToolResult {
            content: self,
            ..CallToolResult::default()
        })
    }
}

impl<T: Serialize> IntoToolResult for Json<T> {
    fn into_tool_result(self) -> Result<CallToolResult, ToolError> {
        let value = serde_json::to_value(&self.0).map_err(ToolError::internal)?;
        let text = serde_json::to_string(&value).map_err(ToolError::internal)?;
        Ok(CallToolResult {
            content: vec![ContentBlock::text(text)],
            structured_content: Some(value),
            ..CallToolResult::default()
        })
    }

    /// `T` serialised straight to text: the same JSON as through a value
    /// tree, except that an `f32` is written as itself (`0.1`, not its f64
    /// widening) and a `u128`/`i128` past 64 bits is written instead of
    /// refused. A value that repeats a member name (a `#[serde(flatten)]`
    /// map overlapping a field) goes through the value tree instead, which
    /// keeps one of each: tern sends no object its own reader would refuse.
    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        let raw = serde_json::value::to_raw_value(&self.0).map_err(ToolError::internal)?;
        if tern_protocol::unique_members(raw.get()).is_err() {
            return self.into_tool_result().map(ToolOutput::from);
        }
        Ok(ToolOutput(Output::Structured(raw)))
    }
}

impl<T: IntoToolResult, E: Into<ToolError>> IntoToolResult for Result<T, E> {
    fn into_tool_result(self) -> Result<CallToolResult, ToolError> {
        self.map_err(Into::into)?.into_tool_result()
    }

    fn into_tool_output(self) -> Result<ToolOutput, ToolError> {
        self.map_err(Into::into)?.into_tool_output()
    }
}

/// What a prompt handler may return.
pub trait IntoPromptResult {
    /// The prompt, or the error that ends the request.
    fn into_prompt_result(self) -> Result<GetPromptResult, ToolError>;
}

impl IntoPromptResult for GetPromptResult {
    fn into_prompt_result(self) -> Result<GetPromptResult, ToolError> {
        Ok(self)
    }
}

impl IntoPromptResult for Vec<PromptMessage> {
    fn into_prompt_result(self) -> Result<GetPromptResult, ToolError> {
        Ok(GetPromptResult {
            messages: self,
            ..GetPromptResult::default()
        })
    }
}

impl IntoPromptResult for String {
    /// One user message with this text.
    fn into_prompt_result(self) -> Result<GetPromptResult, ToolError> {
        Ok(GetPromptResult {
            messages: vec![PromptMessage {
                role: Role::User,
                content: ContentBlock::Text(TextContent::new(self)),
            }],
            ..GetPromptResult::default()
        })
    }
}

impl<T: IntoPromptResult, E: Into<ToolError>> IntoPromptResult for Result<T, E> {
    fn into_prompt_result(self) -> Result<GetPromptResult, ToolError> {
        self.map_err(Into::into)?.into_prompt_result()
    }
}

/// What a resource handler may return. Text becomes text contents of the URI
/// read, with the resource's MIME type.
pub trait IntoReadResult {
    /// The contents, or the error that ends the request.
    fn into_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, ToolError>;
}

impl IntoReadResult for String {
    fn into_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, ToolError> {
        Ok(vec![ResourceContents::Text(TextResourceContents {
            mime_type: mime_type.map(str::to_owned),
            ..TextResourceContents::new(uri, self)
        })])
    }
}

impl IntoReadResult for ResourceContents {
    fn into_contents(
        self,
        _uri: &str,
        _mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, ToolError> {
        Ok(vec![self])
    }
}

impl IntoReadResult for Vec<ResourceContents> {
    fn into_contents(
        self,
        _uri: &str,
        _mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, ToolError> {
        Ok(self)
    }
}

impl IntoReadResult for ReadResourceResult {
    fn into_contents(
        self,
        _uri: &str,
        _mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, ToolError> {
        Ok(self.contents)
    }
}

impl<T: IntoReadResult, E: Into<ToolError>> IntoReadResult for Result<T, E> {
    fn into_contents(
        self,
        uri: &str,
        mime_type: Option<&str>,
    ) -> Result<Vec<ResourceContents>, ToolError> {
        self.map_err(Into::into)?.into_contents(uri, mime_type)
    }
}

/// A type-erased handler producing `T`.
pub(crate) type Erased<T> =
    Arc<dyn Fn(CallParts) -> BoxFuture<'static, Result<T, ToolError>> + Send + Sync>;

pub(crate) fn erase_tool<H, M, R>(h: H) -> Erased<ToolOutput>
where
    H: Handler<M, R>,
    R: IntoToolResult + Send + 'static,
{
    Arc::new(move |parts| {
        let fut = h.call(parts);
        Box::pin(async move { fut.await?.into_tool_output() })
    })
}

pub(crate) fn erase_prompt<H, M, R>(h: H) -> Erased<GetPromptResult>
where
    H: Handler<M, R>,
    R: IntoPromptResult + Send + 'static,
{
    Arc::new(move |parts| {
        let fut = h.call(parts);
        Box::pin(async move { fut.await?.into_prompt_result() })
    })
}

pub(crate) fn erase_resource<H, M, R>(
    h: H,
    mime_type: Option<String>,
) -> Erased<Vec<ResourceContents>>
where
    H: Handler<M, R>,
    R: IntoReadResult + Send + 'static,
{
    Arc::new(move |parts| {
        let uri = parts.uri.clone().unwrap_or_default();
        let fut = h.call(parts);
        let mime_type = mime_type.clone();
        Box::pin(async move { fut.await?.into_contents(&uri, mime_type.as_deref()) })
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_union_of_variants_gets_its_properties_at_the_root() {
        let mut schema = json!({"oneOf": [
            {"type": "object", "properties": {"kind": {"type": "string", "const": "copy"}, "from": {"type": "string"}, "to": {"type": "string"}}, "required": ["kind", "from", "to"]},
            {"type": "object", "properties": {"kind": {"type": "string", "const": "delete"}, "from": {"type": "string"}}, "required": ["kind", "from"]}
        ], "$defs": {"X": {}}})
        .as_object()
        .unwrap()
        .clone();
        properties_at_the_root(&mut schema);
        assert_eq!(schema["type"], "object");
        // Agreed: kept; differing: anyOf of both; one variant's own: kept.
        assert_eq!(schema["properties"]["from"], json!({"type": "string"}));
        assert_eq!(
            schema["properties"]["kind"],
            json!({"anyOf": [{"type": "string", "const": "copy"}, {"type": "string", "const": "delete"}]})
        );
        assert_eq!(schema["properties"]["to"], json!({"type": "string"}));
        assert_eq!(
            schema["anyOf"],
            json!([{"required": ["kind", "from", "to"]}, {"required": ["kind", "from"]}])
        );
        assert!(schema.get("oneOf").is_none());
        assert_eq!(schema["$defs"], json!({"X": {}}), "the rest is kept");
        // Enforced now: a wrong type fails at the root, whichever variant.
        #[cfg(feature = "validate")]
        {
            let v = jsonschema::draft202012::new(&Value::Object(schema)).unwrap();
            assert!(v.is_valid(&json!({"kind": "delete", "from": "a"})));
            assert!(
                !v.is_valid(&json!({"kind": "delete", "from": 7})),
                "from's type holds for every variant"
            );
            assert!(!v.is_valid(&json!({"kind": "move", "from": "a"})));
            assert!(
                !v.is_valid(&json!({"kind": "copy"})),
                "a variant's required set must be met"
            );
        }
    }

    #[test]
    fn a_plain_object_schema_is_left_alone() {
        let original =
            json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]});
        let mut schema = original.as_object().unwrap().clone();
        properties_at_the_root(&mut schema);
        assert_eq!(Value::Object(schema), original);
        // A union of non-objects is not a union of variants.
        let original = json!({"anyOf": [{"type": "string"}, {"type": "integer"}]});
        let mut schema = original.as_object().unwrap().clone();
        properties_at_the_root(&mut schema);
        assert_eq!(Value::Object(schema), original);
    }
}
