//! Argument completion: registration ([`CompletionDef`]) and
//! `completion/complete`.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use tern_protocol::completion::Reference;

use crate::future::BoxFuture;

/// What a completion handler is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompletionRequest {
    /// The argument being completed.
    pub argument: String,
    /// What the user typed so far.
    pub value: String,
    /// Arguments already resolved.
    pub context: BTreeMap<String, String>,
}

type CompletionFn = Arc<dyn Fn(CompletionRequest) -> BoxFuture<'static, Vec<String>> + Send + Sync>;

/// Completions for the arguments of a prompt or the variables of a resource
/// template, for [`crate::ServerBuilder::completion`].
#[derive(Clone)]
pub struct CompletionDef {
    pub(crate) reference: Reference,
    pub(crate) handler: CompletionFn,
}

impl std::fmt::Debug for CompletionDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompletionDef")
            .field("reference", &self.reference)
            .finish_non_exhaustive()
    }
}

impl CompletionDef {
    /// Completes arguments of the prompt `name`.
    pub fn prompt<F, Fut>(name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(CompletionRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<String>> + Send + 'static,
    {
        let reference = Reference::Prompt(tern_protocol::completion::PromptReference {
            name: name.into(),
            title: None,
        });
        Self {
            reference,
            handler: Arc::new(move |r| Box::pin(handler(r))),
        }
    }

    /// Completes variables of the resource template `uri_template`.
    pub fn resource_template<F, Fut>(uri_template: impl Into<String>, handler: F) -> Self
    where
        F: Fn(CompletionRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<String>> + Send + 'static,
    {
        let reference =
            Reference::ResourceTemplate(tern_protocol::completion::ResourceTemplateReference {
                uri: uri_template.into(),
            });
        Self {
            reference,
            handler: Arc::new(move |r| Box::pin(handler(r))),
        }
    }

    pub(crate) fn key(reference: &Reference) -> String {
        match reference {
            Reference::Prompt(p) => format!("prompt:{}", p.name),
            Reference::ResourceTemplate(t) => format!("template:{}", t.uri),
        }
    }
}
