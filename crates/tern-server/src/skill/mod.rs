//! The Skills extension (`io.modelcontextprotocol/skills`) on the server: a
//! [`SkillCatalog`] served once [`crate::ServerBuilder::skills`] is called.
//!
//! What the server then does, as the extension's specification
//! (`modelcontextprotocol/ext-skills` `specification/stable/skills.mdx`)
//! says:
//!
//! - declares `capabilities.extensions["io.modelcontextprotocol/skills"] =
//!   {"directoryRead": true}` and the `resources` capability (in
//!   `server/discover`, and in the `initialize` result of a 2025-11-25
//!   session);
//! - answers `skills/list` (paged like the other lists, opaque cursors, an
//!   entry never split), `skills/get` (`-32602` for a URI that is not a
//!   served skill) and `resources/directory/read` (the direct children of
//!   a folder, subfolders as `inode/directory`; `-32602` for a file or an
//!   unknown URI; paged), with cache hints on all three (the list hints of
//!   [`crate::ServerBuilder::list_cache`]);
//! - serves each file as a `skill://<skill-path>/<file>` resource on
//!   `resources/read` (text for UTF-8 text, a blob otherwise; `SKILL.md`
//!   always text, `text/markdown`; the read hints of
//!   [`crate::ServerBuilder::read_cache`]) and lists each `SKILL.md` in
//!   `resources/list` with its frontmatter's name and description.
//!
//! None of it is gated on the client's capabilities: the extension defines
//! no client declaration. A catalogue replaced at run time
//! ([`crate::Server::replace_skills`]) is announced as
//! `notifications/resources/list_changed` when the listing changed (the
//! extension has no notification of its own).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tern_protocol::JsonObject;
use tern_protocol::content::{BlobResourceContents, ResourceContents, TextResourceContents};
use tern_protocol::error::ErrorObject;
use tern_protocol::meta::ResultMeta;
use tern_protocol::resource::{ReadResourceRequestParams, ReadResourceResult};
use tern_protocol::skill::{
    GetSkillResult, ListSkillsResult, ReadResourceDirectoryRequestParams,
    ReadResourceDirectoryResult, SKILLS_EXTENSION, SkillsCapability,
};

use crate::cache::CacheHints;
use crate::error::short;
use crate::json::{Json, to_json};
use crate::paging::page;

mod catalog;
mod dir;

pub use catalog::{CatalogWarning, SkillCatalog, SkillCatalogBuilder, SkillCatalogError};

/// What a served catalogue declares under `capabilities.extensions`.
pub(crate) fn declaration() -> (String, serde_json::Value) {
    let settings = SkillsCapability {
        directory_read: Some(true),
        extra: JsonObject::new(),
    };
    (
        SKILLS_EXTENSION.to_owned(),
        serde_json::to_value(settings).unwrap_or_default(),
    )
}

/// `skills/list`: one page of the entries.
pub(crate) fn list(
    catalog: &SkillCatalog,
    cursor: Option<&str>,
    page_size: usize,
    hints: CacheHints,
    meta: Option<ResultMeta>,
) -> Result<Json, ErrorObject> {
    let (skills, next_cursor) = page(cursor, catalog.skills(), page_size)?;
    Ok(to_json(&ListSkillsResult {
        next_cursor,
        meta,
        ..ListSkillsResult::new(skills, hints.ttl_ms, hints.scope)
    }))
}

/// `skills/get`: the entry of a served skill, listed or not.
pub(crate) fn get(
    catalog: &SkillCatalog,
    uri: &str,
    hints: CacheHints,
    meta: Option<ResultMeta>,
) -> Result<Json, ErrorObject> {
    let skill = catalog.skill(uri).ok_or_else(|| {
        ErrorObject::invalid_params(format!("No skill is served at {}", short(uri)))
            .with_data(serde_json::json!({ "uri": short(uri) }))
    })?;
    Ok(to_json(&GetSkillResult {
        meta,
        ..GetSkillResult::new(skill.clone(), hints.ttl_ms, hints.scope)
    }))
}

/// `resources/directory/read`: one page of a folder's direct children.
pub(crate) fn read_directory(
    catalog: &SkillCatalog,
    params: &ReadResourceDirectoryRequestParams,
    page_size: usize,
    hints: CacheHints,
    meta: Option<ResultMeta>,
) -> Result<Json, ErrorObject> {
    let uri = &params.uri;
    let children = catalog.inner.dirs.get(uri.as_str()).ok_or_else(|| {
        let why = if catalog.inner.files.contains_key(uri.as_str()) {
            "is a file, not a directory"
        } else {
            "is not a directory this server serves"
        };
        ErrorObject::invalid_params(format!("{} {why}", short(uri)))
            .with_data(serde_json::json!({ "uri": short(uri) }))
    })?;
    let (resources, next_cursor) = page(params.cursor.as_deref(), children, page_size)?;
    Ok(to_json(&ReadResourceDirectoryResult {
        next_cursor,
        meta,
        ..ReadResourceDirectoryResult::new(resources, hints.ttl_ms, hints.scope)
    }))
}

/// `resources/read` of a skill file; `None` when `params.uri` is not one.
/// Skill files never ask a question: a `requestState` is one this server
/// never issued for them, refused as any other.
pub(crate) fn read(
    catalog: &SkillCatalog,
    params: &ReadResourceRequestParams,
    hints: CacheHints,
    meta: impl FnOnce() -> Option<ResultMeta>,
) -> Option<Result<Json, ErrorObject>> {
    let file = catalog.inner.files.get(params.uri.as_str())?;
    if params.request_state.is_some() {
        tracing::info!(reason = "a skill file asks nothing", "requestState refused");
        return Some(Err(ErrorObject::invalid_params(
            crate::engine::runner::INVALID_STATE,
        )));
    }
    let uri = params.uri.clone();
    let mime_type = Some(file.mime_type.to_owned());
    let contents = if file.text {
        // `text` was checked to be UTF-8 when the catalogue was built.
        let text = String::from_utf8_lossy(&file.bytes).into_owned();
        ResourceContents::Text(TextResourceContents {
            uri,
            mime_type,
            text,
            meta: None,
        })
    } else {
        ResourceContents::Blob(BlobResourceContents {
            uri,
            mime_type,
            blob: STANDARD.encode(&file.bytes),
            meta: None,
        })
    };
    Some(Ok(to_json(&ReadResourceResult {
        meta: meta(),
        ..ReadResourceResult::new(vec![contents], hints.ttl_ms, hints.scope)
    })))
}
