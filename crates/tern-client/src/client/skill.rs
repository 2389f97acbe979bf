//! The Skills extension (`io.modelcontextprotocol/skills`) as a host uses
//! it: list and get skills (every entry checked against the extension's
//! rules), read a skill's files verified against its entry, read a skill's
//! folders.
//!
//! The host's obligations the extension's specification
//! (`modelcontextprotocol/ext-skills` `specification/stable/skills.mdx`)
//! sets, and how this module keeps them:
//!
//! - nothing is sent for skills unless the server declared the extension
//!   (each call reads `server/discover`, answered from the `initialize`
//!   result on a 2025-11-25 session), and `resources/directory/read` only
//!   with `directoryRead: true` — otherwise [`ErrorKind::NotOffered`];
//! - nothing is prefetched: listing reads no file; a file is read when
//!   [`Client::read_skill_file`] is called for it;
//! - only a URI the entry lists is read (a `"dynamic"` skill: one inside its
//!   folder); its size, then its digest, must be the manifest's; the
//!   skill's own `SKILL.md` must also have the entry's frontmatter, field by
//!   field — otherwise [`ErrorKind::Verification`], and the bytes are not
//!   handed over.
//!
//! [`ErrorKind::NotOffered`]: crate::ErrorKind::NotOffered
//! [`ErrorKind::Verification`]: crate::ErrorKind::Verification

use std::collections::HashMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use tern_protocol::content::ResourceContents;
use tern_protocol::pagination::PaginatedRequestParams;
use tern_protocol::resource::Resource;
use tern_protocol::skill::{
    GetSkillRequestParams, InvalidEntry, ReadResourceDirectoryRequestParams, Skill,
    SkillsCapability,
};
use tern_protocol::{ClientRequest, ServerResult, method};

use super::{CallOptions, Client};
use crate::error::ClientError;
use crate::limits::Limit;

/// What [`Client::skills`] found: the entries that are skills, and the ones
/// refused (each with why), so one bad entry does not hide the others.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SkillListing {
    /// The valid entries, in the server's order.
    pub skills: Vec<Skill>,
    /// The refused entries; `index` counts across every page.
    pub invalid: Vec<InvalidEntry>,
}

/// A skill file as read and verified by [`Client::read_skill_file`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SkillFile {
    /// The URI read: the entry's spelling of it.
    pub uri: String,
    /// The MIME type the server gave.
    pub mime_type: Option<String>,
    /// Exactly the bytes the manifest's digest covers.
    pub bytes: Vec<u8>,
    /// The bytes as text, when the server sent text.
    pub text: Option<String>,
    /// Size and digest were checked (`false` only for a `"dynamic"`
    /// skill, whose files have none).
    pub verified: bool,
}

impl Client {
    /// The server's Skills settings, or `None` when it does not declare the
    /// extension (read from `server/discover`; one request, none on a
    /// 2025-11-25 session, where the `initialize` result answers).
    pub async fn skills_capability(&self) -> Result<Option<SkillsCapability>, ClientError> {
        let discovered = self.discover().await?;
        Ok(SkillsCapability::of(&discovered.capabilities))
    }

    async fn require_skills(&self) -> Result<SkillsCapability, ClientError> {
        self.skills_capability().await?.ok_or_else(|| {
            ClientError::not_offered(
                "the server does not declare the Skills extension (io.modelcontextprotocol/skills)",
            )
        })
    }

    /// Every skill the server lists (every page, within the client's page
    /// and item limits), each entry checked with [`Skill::validate`]: the
    /// ones that fail, and every copy of a URI listed twice, are in
    /// [`SkillListing::invalid`] with the reason. No file is read. A server
    /// without the extension is [`crate::ErrorKind::NotOffered`], and is
    /// sent nothing but `server/discover`.
    pub async fn skills(&self) -> Result<SkillListing, ClientError> {
        self.require_skills().await?;
        let limits = self.inner.limits;
        let mut entries: Vec<Result<Skill, InvalidEntry>> = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..limits.max_pages {
            let build = |meta| {
                ClientRequest::ListSkills(PaginatedRequestParams {
                    cursor: cursor.clone(),
                    meta,
                })
            };
            let ServerResult::ListSkills(page) = self
                .request(method::SKILLS_LIST, &build, &CallOptions::default())
                .await?
            else {
                return Err(ClientError::protocol(
                    "the server's reply is not a skills/list result",
                ));
            };
            let offset = entries.len();
            let count = page.skills.len() + page.invalid.len();
            if offset.saturating_add(count) > limits.max_items {
                return Err(ClientError::limit(
                    Limit::Items,
                    format!("skills/list returned more than {} items", limits.max_items),
                ));
            }
            // Back in the page's order, the undecodable ones where they were.
            let mut skills = page.skills.into_iter();
            let mut invalid = page.invalid.into_iter().peekable();
            for index in 0..count {
                let entry = match invalid.next_if(|e| e.index == index) {
                    Some(e) => Err(InvalidEntry {
                        index: offset + index,
                        ..e
                    }),
                    None => skills.next().ok_or_else(|| InvalidEntry {
                        index: offset + index,
                        uri: None,
                        reason: "missing".into(),
                    }),
                };
                entries.push(entry);
            }
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(listing(entries)),
            }
        }
        Err(ClientError::limit(
            Limit::Pages,
            format!(
                "skills/list still had a next page after {} pages",
                limits.max_pages
            ),
        ))
    }

    /// One skill by its `SKILL.md` URI (`skills/get`), listed or not — to
    /// confirm a URI from the server's instructions, a user or another
    /// skill, or to refresh an entry. The entry must be valid and be the
    /// one asked for. A server without the extension is
    /// [`crate::ErrorKind::NotOffered`]; an unknown skill is the server's
    /// `-32602`.
    pub async fn skill(&self, uri: &str) -> Result<Skill, ClientError> {
        self.require_skills().await?;
        let build = |meta| {
            ClientRequest::GetSkill(GetSkillRequestParams {
                uri: uri.to_owned(),
                meta,
            })
        };
        let ServerResult::GetSkill(result) = self
            .request(method::SKILLS_GET, &build, &CallOptions::default())
            .await?
        else {
            return Err(ClientError::protocol(
                "the server's reply is not a skills/get result",
            ));
        };
        if result.skill.uri != uri {
            return Err(ClientError::protocol(
                "skills/get answered with another skill than the one asked for",
            ));
        }
        result.skill.validate().map_err(|e| {
            ClientError::protocol("skills/get answered with an invalid skill entry").because(e)
        })?;
        Ok(result.skill)
    }

    /// Reads one file of `skill` and verifies it against the entry:
    /// `uri` must be listed in it (for a `"dynamic"` skill: inside its
    /// folder; checked before anything is sent), the bytes read must have
    /// the listed size and digest, and the skill's own `SKILL.md` must be
    /// UTF-8 with the entry's frontmatter. Any failure is
    /// [`crate::ErrorKind::Verification`] and no bytes are returned: the
    /// host must not use the file, nor the skill for its `SKILL.md`. Pass
    /// the skill's [`Skill::uri`] to read its `SKILL.md`.
    pub async fn read_skill_file(
        &self,
        skill: &Skill,
        uri: &str,
    ) -> Result<SkillFile, ClientError> {
        // Unlisted: refused before anything is sent.
        if !skill.covers(uri) {
            return Err(skill
                .verify(uri, &[])
                .map_or_else(ClientError::verification, |()| {
                    ClientError::request("the file is not the skill's")
                }));
        }
        let result = self.read_resource(uri, &CallOptions::default()).await?;
        let content = match result.contents.iter().find(|c| c.uri() == uri) {
            Some(content) => content,
            None if result.contents.len() == 1 => &result.contents[0],
            None => {
                return Err(ClientError::protocol(format!(
                    "resources/read returned {} contents, none of them {uri}",
                    result.contents.len()
                )));
            }
        };
        let (bytes, text, mime_type) = match content {
            ResourceContents::Text(t) => (
                t.text.as_bytes().to_vec(),
                Some(t.text.clone()),
                t.mime_type.clone(),
            ),
            ResourceContents::Blob(b) => (
                STANDARD.decode(&b.blob).map_err(|e| {
                    ClientError::protocol("resources/read returned a blob that is not base64")
                        .because(e)
                })?,
                None,
                b.mime_type.clone(),
            ),
        };
        skill
            .verify(uri, &bytes)
            .map_err(ClientError::verification)?;
        Ok(SkillFile {
            uri: uri.to_owned(),
            mime_type,
            text,
            verified: skill.files().is_some(),
            bytes,
        })
    }

    /// Reads `skill`'s `SKILL.md`, verified ([`Self::read_skill_file`]).
    pub async fn read_skill_md(&self, skill: &Skill) -> Result<SkillFile, ClientError> {
        self.read_skill_file(skill, &skill.uri).await
    }

    /// The direct children of a directory resource (`resources/directory/
    /// read`, every page): subfolders have the MIME type `inode/directory`.
    /// Only when the server declares `directoryRead`; otherwise
    /// [`crate::ErrorKind::NotOffered`] and nothing is sent. A listing
    /// never extends a skill's manifest: a file it shows that the entry
    /// does not list is not part of the skill until `skills/get` says so.
    pub async fn read_skill_directory(&self, uri: &str) -> Result<Vec<Resource>, ClientError> {
        if !self.require_skills().await?.directory_read() {
            return Err(ClientError::not_offered(
                "the server does not declare directoryRead for the Skills extension",
            ));
        }
        let limits = self.inner.limits;
        let mut all = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..limits.max_pages {
            let build = |meta| {
                ClientRequest::ReadResourceDirectory(ReadResourceDirectoryRequestParams {
                    uri: uri.to_owned(),
                    cursor: cursor.clone(),
                    meta,
                })
            };
            let ServerResult::ReadResourceDirectory(page) = self
                .request(
                    method::RESOURCES_DIRECTORY_READ,
                    &build,
                    &CallOptions::default(),
                )
                .await?
            else {
                return Err(ClientError::protocol(
                    "the server's reply is not a resources/directory/read result",
                ));
            };
            if all.len().saturating_add(page.resources.len()) > limits.max_items {
                return Err(ClientError::limit(
                    Limit::Items,
                    format!(
                        "resources/directory/read returned more than {} items",
                        limits.max_items
                    ),
                ));
            }
            all.extend(page.resources);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(all),
            }
        }
        Err(ClientError::limit(
            Limit::Pages,
            format!(
                "resources/directory/read still had a next page after {} pages",
                limits.max_pages
            ),
        ))
    }
}

/// The entries checked: each against the extension's rules, and a URI
/// listed more than once refused in every copy.
fn listing(entries: Vec<Result<Skill, InvalidEntry>>) -> SkillListing {
    let mut counts: HashMap<String, usize> = HashMap::new();
    for entry in &entries {
        let uri = match entry {
            Ok(skill) => Some(&skill.uri),
            Err(e) => e.uri.as_ref(),
        };
        if let Some(uri) = uri {
            *counts.entry(uri.clone()).or_default() += 1;
        }
    }
    let mut out = SkillListing::default();
    for (index, entry) in entries.into_iter().enumerate() {
        match entry {
            Ok(skill) => {
                let mut problems = match skill.validate() {
                    Ok(()) => Vec::new(),
                    Err(e) => e.problems().to_vec(),
                };
                if counts.get(&skill.uri).copied().unwrap_or(0) > 1 {
                    problems.push("the same uri is listed more than once".to_owned());
                }
                if problems.is_empty() {
                    out.skills.push(skill);
                } else {
                    out.invalid.push(InvalidEntry {
                        index,
                        uri: Some(skill.uri),
                        reason: problems.join("; "),
                    });
                }
            }
            Err(e) => out.invalid.push(e),
        }
    }
    out
}
