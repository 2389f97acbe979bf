//! The Skills extension (`io.modelcontextprotocol/skills`, SEP-2640): a
//! server publishes Agent Skills — folders of files led by a `SKILL.md` — as
//! resources, with a manifest of every file's digest and size, so a host can
//! verify what it loads.
//!
//! The normative text is the extension's specification,
//! `modelcontextprotocol/ext-skills` `specification/stable/skills.mdx`
//! (published at <https://modelcontextprotocol.io/extensions/skills/overview>);
//! the skill format itself (folder layout, frontmatter, names) is the Agent
//! Skills specification's (<https://agentskills.io/specification>).
//!
//! - The wire: [`Skill`] entries (the same in `skills/list` and
//!   `skills/get`), [`ListSkillsResult`], [`GetSkillResult`],
//!   [`ReadResourceDirectoryResult`], and the capability settings
//!   [`SkillsCapability`].
//! - The checks both sides share: [`digest`], [`is_valid_name`],
//!   [`frontmatter`] (a `SKILL.md`'s YAML frontmatter read with YAML 1.2
//!   core-schema typing), [`Skill::validate`] and [`Skill::verify`].
//!
//! Skill bytes always travel over the plain `resources/read`; the extension
//! defines no input requests, so every result here is `complete`.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::capabilities::ServerCapabilities;
use crate::json::JsonObject;
use crate::meta::{RequestMeta, ResultMeta};
use crate::resource::Resource;
use crate::tag::{CacheScope, CompleteTag};

mod check;
pub mod frontmatter;

pub use check::{
    InvalidSkill, VerifyError, VerifyErrorKind, digest, is_valid_digest, is_valid_name,
};
pub use frontmatter::FrontmatterError;

/// The extension id, under `capabilities.extensions` of a server.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";
/// The file every skill has at its root.
pub const SKILL_MD: &str = "SKILL.md";
/// The MIME type a `SKILL.md` resource is served with.
pub const SKILL_MD_MIME_TYPE: &str = "text/markdown";
/// The MIME type of a directory resource (`resources/directory/read`).
pub const DIRECTORY_MIME_TYPE: &str = "inode/directory";
/// The URI scheme skills are served under (a SHOULD; others are allowed).
pub const SKILL_SCHEME: &str = "skill";
/// The most files one skill should list, `SKILL.md` included: servers
/// should not exceed it, hosts must accept skills up to it.
pub const MAX_FILES: usize = 512;
/// The most bytes one skill's files should add up to (16 MiB, summed over
/// `size`): servers should not exceed it, hosts must accept skills up to it.
pub const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// The most characters a name has (Agent Skills).
pub const MAX_NAME_LEN: usize = 64;

/// The `resources` of a skill that publishes no manifest.
const DYNAMIC: &str = "dynamic";

/// One skill (`Skill`): the same entry in `skills/list` and `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Skill {
    /// The URI of the skill's `SKILL.md`, readable with `resources/read`;
    /// its last path segment before `/SKILL.md` is the skill's name.
    pub uri: String,
    /// The `SKILL.md`'s YAML frontmatter as JSON, verbatim and complete:
    /// `name` and `description` always, every other field as written.
    pub frontmatter: JsonObject,
    /// Every file of the skill, or `"dynamic"`.
    pub resources: SkillResources,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<JsonObject>,
}

/// What a skill says about its files (`resources`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillResources {
    /// The complete manifest: every file once, `SKILL.md` included, all
    /// inside the skill's folder (the files of nested skills too).
    Files(Vec<SkillResource>),
    /// The content is generated and has no stable digests (`"dynamic"`).
    Dynamic,
}

impl Serialize for SkillResources {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Files(files) => files.serialize(s),
            Self::Dynamic => s.serialize_str(DYNAMIC),
        }
    }
}

impl<'de> Deserialize<'de> for SkillResources {
    /// An array of files or the string `"dynamic"`, told apart by their JSON
    /// type; any other value makes the entry invalid (the extension's rule),
    /// so it is an error here.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = SkillResources;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an array of {uri, digest, size} or \"dynamic\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Self::Value, E> {
                if v == DYNAMIC {
                    Ok(SkillResources::Dynamic)
                } else {
                    Err(E::custom(format_args!(
                        "resources must be an array of {{uri, digest, size}} or \"dynamic\", \
                         found \"{}\"",
                        crate::error::cut(v, 32)
                    )))
                }
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Self::Value, A::Error> {
                let mut files = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(MAX_FILES));
                while let Some(file) = seq.next_element::<SkillResource>()? {
                    files.push(file);
                }
                Ok(SkillResources::Files(files))
            }
        }
        d.deserialize_any(V)
    }
}

/// One file of a skill's manifest (`SkillResource`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SkillResource {
    /// The file's resource URI.
    pub uri: String,
    /// `sha256:` and 64 lowercase hex digits, over the file's raw bytes.
    pub digest: String,
    /// The byte length of those same raw bytes.
    pub size: u64,
}

impl SkillResource {
    /// The manifest entry of `bytes` served at `uri`.
    pub fn of(uri: impl Into<String>, bytes: &[u8]) -> Self {
        Self {
            uri: uri.into(),
            digest: digest(bytes),
            size: bytes.len() as u64,
        }
    }
}

impl Skill {
    /// `frontmatter.name`, when it is a string.
    pub fn name(&self) -> Option<&str> {
        self.frontmatter
            .get("name")
            .and_then(serde_json::Value::as_str)
    }

    /// `frontmatter.description`, when it is a string.
    pub fn description(&self) -> Option<&str> {
        self.frontmatter
            .get("description")
            .and_then(serde_json::Value::as_str)
    }

    /// The skill's root: its `SKILL.md` URI without `/SKILL.md` (no
    /// trailing slash); `None` when the URI is not a `…/<name>/SKILL.md`.
    pub fn root(&self) -> Option<&str> {
        check::root_of(&self.uri)
    }

    /// The manifest, when the skill publishes one.
    pub fn files(&self) -> Option<&[SkillResource]> {
        match &self.resources {
            SkillResources::Files(files) => Some(files),
            SkillResources::Dynamic => None,
        }
    }

    /// The manifest entry for `uri`, when the manifest lists it.
    pub fn file(&self, uri: &str) -> Option<&SkillResource> {
        self.files()?.iter().find(|f| f.uri == uri)
    }
}

/// The extension's settings object under `capabilities.extensions`
/// (`{}` or `{"directoryRead": true}`: straight under the id, no envelope).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SkillsCapability {
    /// `resources/directory/read` is served (default `false`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directory_read: Option<bool>,
    /// Every other member, as received.
    #[serde(flatten)]
    pub extra: JsonObject,
}

impl SkillsCapability {
    /// The settings `capabilities` declare, when they declare the extension
    /// with a settings object (anything else is not a declaration a client
    /// may act on).
    pub fn of(capabilities: &ServerCapabilities) -> Option<Self> {
        let value = capabilities.extensions.as_ref()?.get(SKILLS_EXTENSION)?;
        value.is_object().then(|| Self::deserialize(value).ok())?
    }

    /// `resources/directory/read` may be called.
    pub fn directory_read(&self) -> bool {
        self.directory_read == Some(true)
    }
}

/// Params of `skills/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetSkillRequestParams {
    /// The URI of a skill's `SKILL.md`.
    pub uri: String,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// Params of `resources/directory/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceDirectoryRequestParams {
    /// The directory resource, written without a trailing slash.
    pub uri: String,
    /// The opaque cursor of the page wanted; absent for the first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// The request's `_meta`.
    #[serde(rename = "_meta")]
    pub meta: RequestMeta,
}

/// An entry of a `skills/list` page that is not a skill: kept apart, so one
/// bad entry does not hide the others (the host reports it and goes on).
#[derive(Debug, Clone, PartialEq)]
pub struct InvalidEntry {
    /// Where it was on its page.
    pub index: usize,
    /// Its `uri`, when it had a string one.
    pub uri: Option<String>,
    /// Why it is not a skill.
    pub reason: String,
}

/// The result of `skills/list` (`ListSkillsResult`).
///
/// Decoding reads each entry on its own: an entry that is not a [`Skill`]
/// (no `resources`, a `frontmatter` that is not an object…) goes to
/// [`Self::invalid`] instead of failing the page. Entries that decode are
/// still to be checked with [`Skill::validate`].
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ListSkillsResult {
    /// Always `complete`.
    pub result_type: CompleteTag,
    /// This page of skills. Entries are atomic: none is split across pages.
    pub skills: Vec<Skill>,
    /// The entries of this page that did not decode (never serialised).
    #[serde(skip)]
    pub invalid: Vec<InvalidEntry>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Cache lifetime (required on the wire at 2026-07-28; optional on
    /// decode, as for the base lists: see [`crate::result`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

impl<'de> Deserialize<'de> for ListSkillsResult {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire {
            #[serde(default)]
            result_type: CompleteTag,
            skills: Vec<serde_json::Value>,
            #[serde(default)]
            next_cursor: Option<String>,
            #[serde(default)]
            ttl_ms: Option<u64>,
            #[serde(default)]
            cache_scope: Option<CacheScope>,
            #[serde(rename = "_meta", default)]
            meta: Option<ResultMeta>,
        }
        let wire = Wire::deserialize(d)?;
        let mut skills = Vec::with_capacity(wire.skills.len());
        let mut invalid = Vec::new();
        for (index, value) in wire.skills.into_iter().enumerate() {
            let uri = value
                .get("uri")
                .and_then(serde_json::Value::as_str)
                .map(str::to_owned);
            match Skill::deserialize(value) {
                Ok(skill) => skills.push(skill),
                Err(e) => invalid.push(InvalidEntry {
                    index,
                    uri,
                    reason: crate::error::tidy(&e.to_string()),
                }),
            }
        }
        Ok(Self {
            result_type: wire.result_type,
            skills,
            invalid,
            next_cursor: wire.next_cursor,
            ttl_ms: wire.ttl_ms,
            cache_scope: wire.cache_scope,
            meta: wire.meta,
        })
    }
}

/// The result of `skills/get` (`GetSkillResult`): one entry, no cursor.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GetSkillResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// The skill whose `SKILL.md` was named.
    pub skill: Skill,
    /// Cache lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

/// The result of `resources/directory/read`: the direct children of a
/// directory (subdirectories as [`DIRECTORY_MIME_TYPE`] resources).
///
/// The extension types it as a paginated result only; tern's server also
/// sends the cache hints (the TypeScript SDK 2.4 client requires them at
/// 2026-07-28), and tern's client does not require them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadResourceDirectoryResult {
    /// Always `complete`.
    #[serde(default)]
    pub result_type: CompleteTag,
    /// This page of children.
    pub resources: Vec<Resource>,
    /// The cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Cache lifetime.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
    /// Cache scope.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_scope: Option<CacheScope>,
    /// `_meta`.
    #[serde(rename = "_meta", default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ResultMeta>,
}

impl ListSkillsResult {
    /// A page of skills with its caching hints (required on the wire).
    pub fn new(skills: Vec<Skill>, ttl_ms: u64, cache_scope: CacheScope) -> Self {
        Self {
            skills,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            ..Self::default()
        }
    }
}

impl GetSkillResult {
    /// One skill with its caching hints (required on the wire).
    pub fn new(skill: Skill, ttl_ms: u64, cache_scope: CacheScope) -> Self {
        Self {
            result_type: CompleteTag,
            skill,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            meta: None,
        }
    }
}

impl ReadResourceDirectoryResult {
    /// A page of children with caching hints.
    pub fn new(resources: Vec<Resource>, ttl_ms: u64, cache_scope: CacheScope) -> Self {
        Self {
            resources,
            ttl_ms: Some(ttl_ms),
            cache_scope: Some(cache_scope),
            ..Self::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn resources_are_files_or_the_word_dynamic() {
        let files: SkillResources = serde_json::from_value(json!([
            {"uri": "skill://a/SKILL.md", "digest": digest(b"x"), "size": 1}
        ]))
        .unwrap();
        assert!(matches!(files, SkillResources::Files(ref f) if f.len() == 1));
        let dynamic: SkillResources = serde_json::from_value(json!("dynamic")).unwrap();
        assert_eq!(dynamic, SkillResources::Dynamic);
        assert_eq!(serde_json::to_value(&dynamic).unwrap(), json!("dynamic"));
        for bad in [json!("static"), json!({}), json!(null), json!(3)] {
            assert!(
                serde_json::from_value::<SkillResources>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_bad_entry_is_kept_apart_not_failing_the_page() {
        let page: ListSkillsResult = serde_json::from_value(json!({
            "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
            "nextCursor": "n",
            "skills": [
                {"uri": "skill://a/SKILL.md", "frontmatter": {"name": "a", "description": "d"},
                 "resources": "dynamic"},
                {"uri": "skill://b/SKILL.md", "frontmatter": {"name": "b", "description": "d"}},
                "not an object"
            ]
        }))
        .unwrap();
        assert_eq!(page.skills.len(), 1);
        assert_eq!(page.invalid.len(), 2);
        assert_eq!(page.invalid[0].index, 1);
        assert_eq!(page.invalid[0].uri.as_deref(), Some("skill://b/SKILL.md"));
        assert!(
            page.invalid[0].reason.contains("resources"),
            "{:?}",
            page.invalid
        );
        assert_eq!(page.next_cursor.as_deref(), Some("n"));
        // Serialising writes the skills only, with the tag.
        let again = serde_json::to_value(&page).unwrap();
        assert_eq!(again["skills"].as_array().unwrap().len(), 1);
        assert_eq!(again["resultType"], "complete");
    }

    #[test]
    fn the_capability_is_a_settings_object_under_the_id() {
        let caps: ServerCapabilities = serde_json::from_value(json!({
            "extensions": {SKILLS_EXTENSION: {"directoryRead": true}}
        }))
        .unwrap();
        assert!(SkillsCapability::of(&caps).unwrap().directory_read());
        let empty: ServerCapabilities =
            serde_json::from_value(json!({"extensions": {SKILLS_EXTENSION: {}}})).unwrap();
        assert!(!SkillsCapability::of(&empty).unwrap().directory_read());
        let not_an_object: ServerCapabilities =
            serde_json::from_value(json!({"extensions": {SKILLS_EXTENSION: true}})).unwrap();
        assert!(SkillsCapability::of(&not_an_object).is_none());
        assert!(SkillsCapability::of(&ServerCapabilities::default()).is_none());
        assert_eq!(
            serde_json::to_value(SkillsCapability {
                directory_read: Some(true),
                ..SkillsCapability::default()
            })
            .unwrap(),
            json!({"directoryRead": true})
        );
    }

    #[test]
    fn the_three_methods_decode_by_method_and_re_encode() {
        use std::str::FromStr;

        use crate::{ClientRequest, Message, ResultContext, ServerResult};
        let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                          "io.modelcontextprotocol/clientCapabilities": {}});
        for (method, params) in [
            ("skills/list", json!({"cursor": "c", "_meta": meta})),
            (
                "skills/get",
                json!({"uri": "skill://a/SKILL.md", "_meta": meta}),
            ),
            (
                "resources/directory/read",
                json!({"uri": "skill://a", "cursor": "c", "_meta": meta}),
            ),
        ] {
            let text =
                json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
            let Message::Request(req) = Message::from_str(&text).unwrap() else {
                panic!("a request")
            };
            let typed = ClientRequest::from_request(&req).unwrap();
            assert_eq!(typed.method(), method);
            assert!(typed.meta().is_some());
            assert_eq!(typed.name(), None, "no Mcp-Name for {method}");
            assert!(!typed.may_require_input());
            assert_eq!(
                serde_json::to_value(typed.with_id(&req.id)).unwrap(),
                serde_json::from_str::<serde_json::Value>(&text).unwrap()
            );
        }
        let missing = ClientRequest::decode("skills/get", None).unwrap_err();
        assert!(missing.is_params());

        let get = json!({"skill": {"uri": "skill://a/SKILL.md",
            "frontmatter": {"name": "a", "description": "d"}, "resources": "dynamic"},
            "ttlMs": 0, "cacheScope": "private"})
        .to_string();
        let ServerResult::GetSkill(r) =
            ServerResult::decode("skills/get", &get, ResultContext::default()).unwrap()
        else {
            panic!("a skills/get result")
        };
        assert_eq!(r.skill.name(), Some("a"));
        let dir = r#"{"resultType":"complete","resources":[{"uri":"skill://a/t","name":"t","mimeType":"inode/directory"}]}"#;
        assert!(matches!(
            ServerResult::decode("resources/directory/read", dir, ResultContext::default()),
            Ok(ServerResult::ReadResourceDirectory(_))
        ));
        // MRTR is not in play for any of them.
        let ir = r#"{"resultType":"input_required","requestState":"s"}"#;
        for m in ["skills/list", "skills/get", "resources/directory/read"] {
            assert!(
                ServerResult::decode(m, ir, ResultContext::default()).is_err(),
                "{m}"
            );
        }
    }
}
