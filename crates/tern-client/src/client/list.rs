//! `server/discover`, the four paginated lists and `completion/complete`.
//! A list reads at most [`Limits::max_pages`](crate::Limits::max_pages)
//! pages and [`Limits::max_items`](crate::Limits::max_items) items, so a
//! server that always returns `nextCursor` gets an error, not a loop.

use std::collections::BTreeMap;

use tern_protocol::completion::{
    CompleteRequestParams, CompleteResult, CompletionArgument, CompletionContext, Reference,
};
use tern_protocol::discover::DiscoverResult;
use tern_protocol::meta::RequestParams;
use tern_protocol::pagination::PaginatedRequestParams;
use tern_protocol::prompt::{ListPromptsResult, Prompt};
use tern_protocol::resource::{
    ListResourceTemplatesResult, ListResourcesResult, Resource, ResourceTemplate,
};
use tern_protocol::tool::{ListToolsResult, Tool};
use tern_protocol::{ClientRequest, ServerResult, method};

use super::{CallOptions, Client, lock};
use crate::error::ClientError;
use crate::headers::header_params;
use crate::limits::{Limit, Limits};

fn not_the_result(m: &str) -> ClientError {
    ClientError::protocol(format!("the server's reply is not a {m} result"))
}

/// Every item of a paginated list: `page` is asked for the page at each
/// cursor, starting without one, until a page has no `nextCursor`, within
/// the page and item limits.
async fn all_pages<T, F, Fut>(m: &str, limits: &Limits, mut page: F) -> Result<Vec<T>, ClientError>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<T>, Option<String>), ClientError>>,
{
    let mut all = Vec::new();
    let mut cursor = None;
    for _ in 0..limits.max_pages {
        let (items, next) = page(cursor.take()).await?;
        if all.len().saturating_add(items.len()) > limits.max_items {
            return Err(ClientError::limit(
                Limit::Items,
                format!("{m} returned more than {} items", limits.max_items),
            ));
        }
        all.extend(items);
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(all),
        }
    }
    Err(ClientError::limit(
        Limit::Pages,
        format!("{m} still had a next page after {} pages", limits.max_pages),
    ))
}

impl Client {
    /// `server/discover`.
    pub async fn discover(&self) -> Result<DiscoverResult, ClientError> {
        let build = |meta| ClientRequest::Discover(RequestParams { meta });
        match self
            .request(method::DISCOVER, &build, &CallOptions::default())
            .await?
        {
            ServerResult::Discover(d) => Ok(d),
            _ => Err(not_the_result(method::DISCOVER)),
        }
    }

    async fn page(
        &self,
        m: &'static str,
        cursor: Option<&str>,
    ) -> Result<ServerResult, ClientError> {
        let build = |meta| {
            let params = PaginatedRequestParams {
                cursor: cursor.map(str::to_owned),
                meta,
            };
            match m {
                method::TOOLS_LIST => ClientRequest::ListTools(params),
                method::PROMPTS_LIST => ClientRequest::ListPrompts(params),
                method::RESOURCES_LIST => ClientRequest::ListResources(params),
                _ => ClientRequest::ListResourceTemplates(params),
            }
        };
        self.request(m, &build, &CallOptions::default()).await
    }

    /// Re-reads `tools/list` (every page, within the page limit) to refresh
    /// the `x-mcp-header` annotations, after a `-32020`. It sends each page
    /// once, without the retries of [`Client::request`] (which called it).
    pub(super) async fn refresh_tool_headers(&self) -> Result<(), ClientError> {
        let limits = self.inner.limits;
        all_pages(method::TOOLS_LIST, &limits, |cursor| async move {
            let build = |meta| {
                ClientRequest::ListTools(PaginatedRequestParams {
                    cursor: cursor.clone(),
                    meta,
                })
            };
            let ServerResult::ListTools(page) =
                self.send_once(&build, &CallOptions::default()).await?
            else {
                return Err(not_the_result(method::TOOLS_LIST));
            };
            self.remember_headers(&page.tools);
            Ok((Vec::<()>::new(), page.next_cursor))
        })
        .await
        .map(drop)
    }

    /// Keeps the header params of `tools`; returns which tools are valid.
    fn remember_headers(&self, tools: &[Tool]) -> Vec<bool> {
        let mut headers = lock(&self.inner.tool_headers);
        tools
            .iter()
            .map(|tool| match header_params(&tool.input_schema) {
                Ok(params) => {
                    headers.insert(tool.name.clone(), params);
                    true
                }
                Err(why) => {
                    tracing::warn!(tool = %tool.name, %why, "tool dropped: invalid x-mcp-header");
                    headers.remove(&tool.name);
                    false
                }
            })
            .collect()
    }

    /// One page of `tools/list`. Tools whose `x-mcp-header` annotations are
    /// invalid are dropped from the page, with a warning (spec: Streamable
    /// HTTP › Custom Headers from Tool Parameters › Schema Extension).
    pub async fn list_tools_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListToolsResult, ClientError> {
        let ServerResult::ListTools(mut page) = self.page(method::TOOLS_LIST, cursor).await? else {
            return Err(not_the_result(method::TOOLS_LIST));
        };
        let valid = self.remember_headers(&page.tools);
        let mut valid = valid.into_iter();
        page.tools.retain(|_| valid.next().unwrap_or(false));
        Ok(page)
    }

    /// Every tool, every page.
    pub async fn list_tools(&self) -> Result<Vec<Tool>, ClientError> {
        all_pages(
            method::TOOLS_LIST,
            &self.inner.limits,
            |cursor| async move {
                let page = self.list_tools_page(cursor.as_deref()).await?;
                Ok((page.tools, page.next_cursor))
            },
        )
        .await
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListPromptsResult, ClientError> {
        match self.page(method::PROMPTS_LIST, cursor).await? {
            ServerResult::ListPrompts(p) => Ok(p),
            _ => Err(not_the_result(method::PROMPTS_LIST)),
        }
    }

    /// Every prompt, every page.
    pub async fn list_prompts(&self) -> Result<Vec<Prompt>, ClientError> {
        all_pages(
            method::PROMPTS_LIST,
            &self.inner.limits,
            |cursor| async move {
                let page = self.list_prompts_page(cursor.as_deref()).await?;
                Ok((page.prompts, page.next_cursor))
            },
        )
        .await
    }

    /// One page of `resources/list`.
    pub async fn list_resources_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListResourcesResult, ClientError> {
        match self.page(method::RESOURCES_LIST, cursor).await? {
            ServerResult::ListResources(p) => Ok(p),
            _ => Err(not_the_result(method::RESOURCES_LIST)),
        }
    }

    /// Every resource, every page.
    pub async fn list_resources(&self) -> Result<Vec<Resource>, ClientError> {
        all_pages(
            method::RESOURCES_LIST,
            &self.inner.limits,
            |cursor| async move {
                let page = self.list_resources_page(cursor.as_deref()).await?;
                Ok((page.resources, page.next_cursor))
            },
        )
        .await
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates_page(
        &self,
        cursor: Option<&str>,
    ) -> Result<ListResourceTemplatesResult, ClientError> {
        match self.page(method::RESOURCES_TEMPLATES_LIST, cursor).await? {
            ServerResult::ListResourceTemplates(p) => Ok(p),
            _ => Err(not_the_result(method::RESOURCES_TEMPLATES_LIST)),
        }
    }

    /// Every resource template, every page.
    pub async fn list_resource_templates(&self) -> Result<Vec<ResourceTemplate>, ClientError> {
        all_pages(
            method::RESOURCES_TEMPLATES_LIST,
            &self.inner.limits,
            |cursor| async move {
                let page = self.list_resource_templates_page(cursor.as_deref()).await?;
                Ok((page.resource_templates, page.next_cursor))
            },
        )
        .await
    }

    /// `completion/complete`; `context` holds the arguments already resolved.
    pub async fn complete(
        &self,
        reference: Reference,
        argument: &str,
        value: &str,
        context: Option<BTreeMap<String, String>>,
    ) -> Result<CompleteResult, ClientError> {
        let build = |meta| {
            ClientRequest::Completion(CompleteRequestParams {
                reference: reference.clone(),
                argument: CompletionArgument {
                    name: argument.to_owned(),
                    value: value.to_owned(),
                },
                context: context.clone().map(|arguments| CompletionContext {
                    arguments: Some(arguments),
                }),
                meta,
            })
        };
        match self
            .request(method::COMPLETION_COMPLETE, &build, &CallOptions::default())
            .await?
        {
            ServerResult::Completion(c) => Ok(c),
            _ => Err(not_the_result(method::COMPLETION_COMPLETE)),
        }
    }
}
