//! Per-upstream allow lists (`principals`, `scopes` of the servers file,
//! [`crate::config::Access`]): a caller an upstream does not let in sees
//! none of its entries listed, and its calls, reads, completions and
//! subscriptions to them are answered as for names nobody has — the
//! upstream's existence is not revealed. A list filtered this way is
//! `cacheScope: private` (it varies by caller).

use serde_json::{Value, json};
use tern_protocol::error::ErrorObject;
use tern_protocol::method;
use tern_server::Principal;
use tern_server::auth::AccessToken;
use tern_server::relay::ListKind;

use crate::catalogue::Catalogue;
use crate::config::Access;

/// Who asks: its principal and its token's scopes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Caller<'a> {
    principal: Option<&'a str>,
    scopes: &'a [String],
}

impl<'a> Caller<'a> {
    /// `principal`, with the scopes of `token` (none without one).
    pub(crate) fn new(principal: &'a Principal, token: Option<&'a AccessToken>) -> Self {
        Self {
            principal: principal.id(),
            scopes: token.map_or(&[], |t| t.scopes.as_slice()),
        }
    }

    /// `access` lets this caller in.
    pub(crate) fn may(&self, access: &Access) -> bool {
        access.allows(self.principal, self.scopes)
    }
}

/// What a caller an upstream does not let in is answered for `target` of
/// `method`: what a name nobody has gets, so the upstream is not revealed.
pub(crate) fn unknown(method: &str, target: &str) -> ErrorObject {
    match method {
        method::TOOLS_CALL => ErrorObject::invalid_params(format!("Unknown tool: {target}")),
        method::PROMPTS_GET => ErrorObject::invalid_params(format!("Unknown prompt: {target}")),
        _ => ErrorObject::invalid_params("Resource not found").with_data(json!({"uri": target})),
    }
}

/// The upstream that lists `item` (of `kind`), by the catalogue's routes.
fn upstream_of(catalogue: &Catalogue, kind: ListKind, item: &Value) -> Option<usize> {
    match kind {
        ListKind::Tools => catalogue
            .tools
            .route(item["name"].as_str()?)
            .map(|r| r.upstream),
        ListKind::Prompts => catalogue
            .prompts
            .route(item["name"].as_str()?)
            .map(|r| r.upstream),
        _ => catalogue.resource_upstream(item["uri"].as_str()?),
    }
}

/// The entries of `items` (of `kind`) whose upstream `allowed` says the
/// caller may reach. Templates come with their upstream.
pub(crate) fn filter(
    catalogue: &Catalogue,
    kind: ListKind,
    items: Vec<Value>,
    allowed: &dyn Fn(usize) -> bool,
) -> Vec<Value> {
    items
        .into_iter()
        .filter(|item| upstream_of(catalogue, kind, item).is_some_and(allowed))
        .collect()
}

/// The templates of `catalogue` whose upstream `allowed` lets in.
pub(crate) fn templates(catalogue: &Catalogue, allowed: &dyn Fn(usize) -> bool) -> Vec<Value> {
    catalogue
        .templates
        .iter()
        .filter(|(_, i)| allowed(*i))
        .map(|(t, _)| t.clone())
        .collect()
}
