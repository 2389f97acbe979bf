//! [`SkillCatalog`]: skills assembled once into what the wire needs — the
//! entries (sorted by URI), every file by URI, every directory's children,
//! and the `SKILL.md` resources `resources/list` shows.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::Arc;

use tern_protocol::resource::Resource;
use tern_protocol::skill::{
    self, DIRECTORY_MIME_TYPE, MAX_BYTES, MAX_FILES, SKILL_MD, SKILL_MD_MIME_TYPE, Skill,
    SkillResource, SkillResources,
};

/// A path under a catalogue's root, one segment per name.
pub(super) type Segments = Vec<String>;

/// A skill's files before assembly.
pub(super) struct Source {
    /// The skill path (`acme/refunds`), as segments.
    pub(super) path: Segments,
    /// Where it came from, for messages: the path given, or the folder.
    pub(super) origin: String,
    /// Its files, by path under its folder.
    pub(super) files: BTreeMap<Segments, Arc<[u8]>>,
}

/// A problem found while assembling a catalogue: which skill or file, and
/// what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogWarning {
    path: String,
    message: String,
}

impl CatalogWarning {
    pub(super) fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }

    /// The skill, file or folder concerned.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// What is wrong.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for CatalogWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path, self.message)
    }
}

/// Why a catalogue could not be built: its folder could not be read, or
/// (built in code) a skill breaks a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillCatalogError {
    warning: CatalogWarning,
    io: bool,
}

impl SkillCatalogError {
    pub(super) fn io(path: impl Into<String>, error: &std::io::Error) -> Self {
        Self {
            warning: CatalogWarning::new(path, error.to_string()),
            io: true,
        }
    }

    pub(super) fn invalid(warning: CatalogWarning) -> Self {
        Self { warning, io: false }
    }

    /// The skill, file or folder concerned.
    pub fn path(&self) -> &str {
        self.warning.path()
    }

    /// The folder (or a file in it) could not be read.
    pub fn is_io(&self) -> bool {
        self.io
    }
}

impl fmt::Display for SkillCatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.warning.fmt(f)
    }
}

impl std::error::Error for SkillCatalogError {}

/// One served file.
#[derive(Debug)]
pub(super) struct File {
    pub(super) bytes: Arc<[u8]>,
    pub(super) mime_type: &'static str,
    /// Sent as `text` (UTF-8, no NUL, a textual MIME type); else a `blob`.
    pub(super) text: bool,
}

#[derive(Debug, Default)]
pub(super) struct Catalog {
    /// Sorted by URI.
    pub(super) skills: Vec<Skill>,
    /// `SKILL.md` URI → index in `skills`.
    pub(super) by_uri: HashMap<String, usize>,
    pub(super) files: HashMap<String, File>,
    /// Directory URI (no trailing slash) → its children, sorted by name.
    pub(super) dirs: HashMap<String, Vec<Resource>>,
    /// The `SKILL.md` resources, in the order of `skills`.
    pub(super) listing: Vec<Resource>,
    pub(super) warnings: Vec<CatalogWarning>,
}

/// A catalogue of Agent Skills, served by a server once
/// [`crate::ServerBuilder::skills`] is called: every file a
/// `skill://<skill-path>/<file>` resource, the entries on `skills/list`
/// and `skills/get`, each `SKILL.md` in `resources/list`, each folder on
/// `resources/directory/read`.
///
/// Build one from a folder ([`Self::from_dir`]) or in code
/// ([`Self::builder`]). It is a snapshot in memory, cheap to clone; to
/// change what is served, build another and hand it to
/// [`crate::Server::replace_skills`].
///
/// ```
/// use tern_server::{Server, skill::SkillCatalog};
///
/// let catalog = SkillCatalog::builder()
///     .skill("acme/refunds", [
///         ("SKILL.md", "---\nname: refunds\ndescription: Refund a payment\n---\n# Refunds\n"),
///         ("templates/note.md", "Dear customer,"),
///     ])
///     .build()?;
/// assert_eq!(catalog.skills()[0].uri, "skill://acme/refunds/SKILL.md");
/// let server = Server::builder("shop", "1").skills(catalog).build()?;
/// assert!(server.serves("skills/list"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default)]
pub struct SkillCatalog {
    pub(super) inner: Arc<Catalog>,
}

impl fmt::Debug for SkillCatalog {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SkillCatalog")
            .field(
                "skills",
                &self.inner.skills.iter().map(|s| &s.uri).collect::<Vec<_>>(),
            )
            .field("files", &self.inner.files.len())
            .finish_non_exhaustive()
    }
}

impl SkillCatalog {
    /// Starts a catalogue built in code.
    pub fn builder() -> SkillCatalogBuilder {
        SkillCatalogBuilder::default()
    }

    /// The entries, sorted by URI: what `skills/list` pages through.
    pub fn skills(&self) -> &[Skill] {
        &self.inner.skills
    }

    /// The entry whose `SKILL.md` is at `uri`.
    pub fn skill(&self, uri: &str) -> Option<&Skill> {
        self.inner.by_uri.get(uri).map(|&i| &self.inner.skills[i])
    }

    /// The bytes served at `uri`, when it is a file of the catalogue.
    pub fn file(&self, uri: &str) -> Option<&[u8]> {
        self.inner.files.get(uri).map(|f| &*f.bytes)
    }

    /// The URIs of the catalogue's files, in no particular order.
    pub(crate) fn file_uris(&self) -> impl Iterator<Item = &str> {
        self.inner.files.keys().map(String::as_str)
    }

    /// What was skipped while the catalogue was assembled from a folder,
    /// and why (also logged, at warn level); always empty for a
    /// catalogue built in code, which fails instead.
    pub fn warnings(&self) -> &[CatalogWarning] {
        &self.inner.warnings
    }

    /// The `SKILL.md` resources `resources/list` shows.
    pub(crate) fn listing(&self) -> &[Resource] {
        &self.inner.listing
    }
}

/// One skill's files as given to the builder: path under the folder, bytes.
type GivenFiles = Vec<(String, Vec<u8>)>;

/// Builds a [`SkillCatalog`] in code: each skill by its path and files.
#[derive(Debug, Default)]
pub struct SkillCatalogBuilder {
    skills: Vec<(String, GivenFiles)>,
}

impl SkillCatalogBuilder {
    /// Adds the skill at `path` (`refunds`, or with an organisational
    /// prefix `acme/refunds`: its last segment is the skill's name) with
    /// `files`, each by its path under the skill's folder (`SKILL.md`,
    /// `templates/note.md`). A skill nested in another (`acme/refunds/partial`)
    /// has its own entry, and its files are in the enclosing skill's
    /// manifest too.
    #[must_use]
    pub fn skill<P, B>(
        mut self,
        path: impl Into<String>,
        files: impl IntoIterator<Item = (P, B)>,
    ) -> Self
    where
        P: Into<String>,
        B: Into<Vec<u8>>,
    {
        self.skills.push((
            path.into(),
            files
                .into_iter()
                .map(|(p, b)| (p.into(), b.into()))
                .collect(),
        ));
        self
    }

    /// Checks every skill and assembles the catalogue. Any problem fails
    /// the build, naming the skill: a path or file name that is not
    /// `/`-separated names (no `.`, `..` or empty segment), no `SKILL.md`,
    /// one that is not UTF-8 or whose frontmatter cannot be read, a name
    /// that breaks the naming rules or is not the path's last segment, no
    /// description, a file given twice with different bytes, a skill over
    /// 512 files or 16 MiB.
    pub fn build(self) -> Result<SkillCatalog, SkillCatalogError> {
        let mut sources = Vec::with_capacity(self.skills.len());
        for (path, files) in self.skills {
            let segments = segments(&path).ok_or_else(|| {
                SkillCatalogError::invalid(CatalogWarning::new(
                    &path,
                    "a skill path is names separated by /, with no empty, . or .. segment",
                ))
            })?;
            let mut map = BTreeMap::new();
            for (file, bytes) in files {
                let rel = segments_of_file(&file).ok_or_else(|| {
                    SkillCatalogError::invalid(CatalogWarning::new(
                        format!("{path}/{file}"),
                        "a file path is names separated by /, with no empty, . or .. segment",
                    ))
                })?;
                if map.insert(rel, Arc::from(bytes)).is_some() {
                    return Err(SkillCatalogError::invalid(CatalogWarning::new(
                        format!("{path}/{file}"),
                        "the file is given twice",
                    )));
                }
            }
            sources.push(Source {
                path: segments,
                origin: path,
                files: map,
            });
        }
        assemble(&sources, Problems::Fail).map(|inner| SkillCatalog {
            inner: Arc::new(inner),
        })
    }
}

/// `path` as segments: non-empty, none empty, `.` or `..`.
pub(super) fn segments(path: &str) -> Option<Segments> {
    let parts: Segments = path.split('/').map(str::to_owned).collect();
    (!path.is_empty()
        && parts
            .iter()
            .all(|s| !matches!(s.as_str(), "" | "." | "..") && !s.contains(['\\', '\0'])))
    .then_some(parts)
}

fn segments_of_file(path: &str) -> Option<Segments> {
    segments(path)
}

/// Percent-encodes what a URI path segment cannot hold as is (RFC 3986:
/// unreserved, sub-delims, `:` and `@` stay; the authority takes no `:`
/// or `@`).
fn encode(segment: &str, authority: bool) -> String {
    let mut out = String::with_capacity(segment.len());
    for b in segment.bytes() {
        let keep = b.is_ascii_alphanumeric()
            || matches!(
                b,
                b'-' | b'.'
                    | b'_'
                    | b'~'
                    | b'!'
                    | b'$'
                    | b'&'
                    | b'\''
                    | b'('
                    | b')'
                    | b'*'
                    | b'+'
                    | b','
                    | b';'
                    | b'='
            )
            || (!authority && matches!(b, b':' | b'@'));
        if keep {
            out.push(char::from(b));
        } else {
            const HEX: &[u8; 16] = b"0123456789ABCDEF";
            out.push('%');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 0x0f)]));
        }
    }
    out
}

/// The `skill://` URI of a path under the catalogue's root.
pub(super) fn uri_of(path: &[String]) -> String {
    let mut uri = String::from("skill://");
    for (i, segment) in path.iter().enumerate() {
        if i > 0 {
            uri.push('/');
        }
        uri.push_str(&encode(segment, i == 0));
    }
    uri
}

/// The MIME type a file is served with, by its extension; and whether
/// that type is text.
fn mime_of(name: &str) -> Option<(&'static str, bool)> {
    let ext = name.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match ext.as_str() {
        "md" | "markdown" => ("text/markdown", true),
        "txt" | "text" => ("text/plain", true),
        "json" => ("application/json", true),
        "yaml" | "yml" => ("application/yaml", true),
        "toml" => ("application/toml", true),
        "xml" => ("application/xml", true),
        "html" | "htm" => ("text/html", true),
        "css" => ("text/css", true),
        "csv" => ("text/csv", true),
        "js" | "mjs" => ("text/javascript", true),
        "py" => ("text/x-python", true),
        "sh" => ("text/x-shellscript", true),
        "svg" => ("image/svg+xml", true),
        "png" => ("image/png", false),
        "jpg" | "jpeg" => ("image/jpeg", false),
        "gif" => ("image/gif", false),
        "webp" => ("image/webp", false),
        "pdf" => ("application/pdf", false),
        "zip" => ("application/zip", false),
        _ => return None,
    })
}

fn file_of(name: &str, bytes: Arc<[u8]>) -> File {
    let utf8 = std::str::from_utf8(&bytes).is_ok_and(|t| !t.contains('\0'));
    let (mime_type, textual) = mime_of(name).unwrap_or(if utf8 {
        ("text/plain", true)
    } else {
        ("application/octet-stream", false)
    });
    File {
        bytes,
        mime_type,
        text: textual && utf8,
    }
}

/// The Agent Skills format's rules beyond the extension's (served anyway,
/// but worth a warning: hosts such as the TypeScript SDK's refuse such a
/// skill): a description of at most 1,024 characters, a `compatibility`
/// of 1–500, `metadata` mapping strings to strings.
fn agent_skills_rules(frontmatter: &tern_protocol::JsonObject) -> Vec<String> {
    let mut out = Vec::new();
    let chars = |v: &serde_json::Value| v.as_str().map(|s| s.chars().count());
    if frontmatter
        .get("description")
        .and_then(chars)
        .is_some_and(|n| n > 1024)
    {
        out.push("the description is over 1,024 characters (the Agent Skills limit)".to_owned());
    }
    if let Some(c) = frontmatter.get("compatibility")
        && !chars(c).is_some_and(|n| (1..=500).contains(&n))
    {
        out.push("compatibility is not a string of 1-500 characters (Agent Skills)".to_owned());
    }
    if let Some(m) = frontmatter.get("metadata")
        && !m
            .as_object()
            .is_some_and(|m| m.values().all(serde_json::Value::is_string))
    {
        out.push("metadata does not map strings to strings (Agent Skills)".to_owned());
    }
    out
}

/// One skill's entry, or why it is not one.
fn entry(
    source: &Source,
    all: &BTreeMap<Segments, Arc<[u8]>>,
) -> Result<(Skill, Vec<CatalogWarning>), String> {
    let md = source
        .files
        .get(&vec![SKILL_MD.to_owned()])
        .ok_or_else(|| format!("the skill has no {SKILL_MD}"))?;
    let text = std::str::from_utf8(md).map_err(|_| format!("{SKILL_MD} is not UTF-8 text"))?;
    let frontmatter = skill::frontmatter::parse(text).map_err(|e| format!("{SKILL_MD}: {e}"))?;
    let last = source.path.last().map_or("", String::as_str);
    match frontmatter.get("name") {
        Some(serde_json::Value::String(name)) if name == last => {}
        Some(serde_json::Value::String(name)) => {
            return Err(format!(
                "{SKILL_MD}: the name \"{name}\" is not the skill's folder name \"{last}\""
            ));
        }
        _ => return Err(format!("{SKILL_MD}: the frontmatter has no string name")),
    }
    if !skill::is_valid_name(last) {
        return Err(format!(
            "the name \"{last}\" is not 1-64 characters of a-z, 0-9 and single inner hyphens"
        ));
    }
    match frontmatter.get("description") {
        Some(serde_json::Value::String(d)) if !d.is_empty() => {}
        _ => {
            return Err(format!(
                "{SKILL_MD}: the frontmatter has no non-empty string description"
            ));
        }
    }
    let mut warnings = Vec::new();
    if let Some(serde_json::Value::Object(metadata)) = frontmatter.get("metadata") {
        for key in metadata
            .keys()
            .filter(|k| k.starts_with("io.modelcontextprotocol/"))
        {
            warnings.push(CatalogWarning::new(
                &source.origin,
                format!(
                    "metadata key {key} is under the prefix the MCP extensions reserve, and no \
                     extension defines it"
                ),
            ));
        }
    }
    warnings.extend(
        agent_skills_rules(&frontmatter)
            .into_iter()
            .map(|why| CatalogWarning::new(&source.origin, why)),
    );
    // Every file under the skill's folder, nested skills' included.
    let mut files = Vec::new();
    let mut total: u64 = 0;
    for (path, bytes) in all.range(source.path.clone()..) {
        if !path.starts_with(&source.path) {
            break;
        }
        if path.len() == source.path.len() {
            continue;
        }
        total = total.saturating_add(bytes.len() as u64);
        files.push(SkillResource::of(uri_of(path), bytes));
    }
    if files.len() > MAX_FILES {
        return Err(format!(
            "the skill has {} files, over the limit of {MAX_FILES}",
            files.len()
        ));
    }
    if total > MAX_BYTES {
        return Err(format!(
            "the skill's files add up to {total} bytes, over the limit of {MAX_BYTES}"
        ));
    }
    let mut md_path = source.path.clone();
    md_path.push(SKILL_MD.to_owned());
    let skill = Skill {
        uri: uri_of(&md_path),
        frontmatter,
        resources: SkillResources::Files(files),
        meta: None,
    };
    // The extension's rules, checked as a host checks them.
    skill.validate().map_err(|e| e.to_string())?;
    Ok((skill, warnings))
}

/// What assembling does with a skill that breaks a rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Problems {
    /// Fails (a catalogue built in code: the author's to fix).
    Fail,
    /// Skips it with a warning (a folder: the others are still served).
    Skip,
}

/// Assembles `sources` into a catalogue.
pub(super) fn assemble(
    sources: &[Source],
    problems: Problems,
) -> Result<Catalog, SkillCatalogError> {
    let mut catalog = Catalog::default();
    let mut all: BTreeMap<Segments, Arc<[u8]>> = BTreeMap::new();
    for source in sources {
        for (rel, bytes) in &source.files {
            let mut path = source.path.clone();
            path.extend(rel.iter().cloned());
            if let Some(before) = all.insert(path.clone(), Arc::clone(bytes))
                && before != *bytes
            {
                return Err(SkillCatalogError::invalid(CatalogWarning::new(
                    path.join("/"),
                    "the file is given twice, with different bytes",
                )));
            }
        }
    }
    let mut accepted: Vec<Skill> = Vec::new();
    for source in sources {
        match entry(source, &all) {
            Ok((skill, warnings)) => {
                catalog.warnings.extend(warnings);
                accepted.push(skill);
            }
            Err(why) if problems == Problems::Fail => {
                return Err(SkillCatalogError::invalid(CatalogWarning::new(
                    &source.origin,
                    why,
                )));
            }
            Err(why) => catalog.warnings.push(CatalogWarning::new(
                &source.origin,
                format!("skipped: {why}"),
            )),
        }
    }
    accepted.sort_by(|a, b| a.uri.cmp(&b.uri));
    if let Some(pair) = accepted.windows(2).find(|w| w[0].uri == w[1].uri) {
        return Err(SkillCatalogError::invalid(CatalogWarning::new(
            &pair[0].uri,
            "the skill is given twice",
        )));
    }
    catalog.warnings.extend(shared_names(&accepted));
    serve_files(&mut catalog, &accepted, &all);
    for (i, skill) in accepted.iter().enumerate() {
        catalog.by_uri.insert(skill.uri.clone(), i);
        let mut md = Resource::new(&skill.uri, skill.name().unwrap_or_default());
        md.description = skill.description().map(str::to_owned);
        md.mime_type = Some(SKILL_MD_MIME_TYPE.to_owned());
        md.size = skill.file(&skill.uri).map(|f| f.size);
        catalog.listing.push(md);
    }
    catalog.skills = accepted;
    for warning in &catalog.warnings {
        tracing::warn!(path = %warning.path(), "skills: {}", warning.message());
    }
    Ok(catalog)
}

/// Names served more than once (allowed: hosts tell skills apart by URI;
/// but worth knowing).
fn shared_names(skills: &[Skill]) -> Vec<CatalogWarning> {
    let mut names: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for s in skills {
        names
            .entry(s.name().unwrap_or_default())
            .or_default()
            .push(&s.uri);
    }
    names
        .into_iter()
        .filter(|(_, uris)| uris.len() > 1)
        .map(|(name, uris)| {
            CatalogWarning::new(
                name,
                format!(
                    "the name is served at {}: hosts must tell them apart by URI",
                    uris.join(" and ")
                ),
            )
        })
        .collect()
}

/// The files of the accepted skills' manifests, and every folder above
/// each of them (up to the first segment) with what is directly in it.
fn serve_files(catalog: &mut Catalog, accepted: &[Skill], all: &BTreeMap<Segments, Arc<[u8]>>) {
    let served: BTreeSet<&str> = accepted
        .iter()
        .filter_map(Skill::files)
        .flatten()
        .map(|f| f.uri.as_str())
        .collect();
    let mut children: BTreeMap<String, BTreeMap<String, Resource>> = BTreeMap::new();
    for (path, bytes) in all {
        let uri = uri_of(path);
        if !served.contains(uri.as_str()) {
            continue;
        }
        let name = path.last().map_or("", String::as_str);
        let file = file_of(name, Arc::clone(bytes));
        let mut resource = Resource::new(&uri, name);
        resource.mime_type = Some(file.mime_type.to_owned());
        resource.size = Some(bytes.len() as u64);
        for depth in (1..path.len()).rev() {
            let child = if depth + 1 == path.len() {
                resource.clone()
            } else {
                let mut d = Resource::new(uri_of(&path[..=depth]), &path[depth]);
                d.mime_type = Some(DIRECTORY_MIME_TYPE.to_owned());
                d
            };
            children
                .entry(uri_of(&path[..depth]))
                .or_default()
                .insert(path[depth].clone(), child);
        }
        catalog.files.insert(uri, file);
    }
    catalog.dirs = children
        .into_iter()
        .map(|(dir, kids)| (dir, kids.into_values().collect()))
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_encode_what_a_segment_cannot_hold() {
        assert_eq!(
            uri_of(&["acme".into(), "refunds".into(), "a b#c.md".into()]),
            "skill://acme/refunds/a%20b%23c.md"
        );
        assert_eq!(
            uri_of(&["a:b@c".into(), "x:y@z".into()]),
            "skill://a%3Ab%40c/x:y@z"
        );
        assert_eq!(uri_of(&["é".into()]), "skill://%C3%A9");
    }

    #[test]
    fn text_is_utf8_of_a_textual_type() {
        assert!(file_of("a.md", Arc::from(&b"# x"[..])).text);
        assert!(file_of("noext", Arc::from(&b"plain"[..])).text);
        assert!(!file_of("noext", Arc::from(&b"a\0b"[..])).text);
        assert!(!file_of("a.md", Arc::from(&[0xff, 0xfe][..])).text);
        let png = file_of("a.png", Arc::from(&b"PNG"[..]));
        assert_eq!((png.mime_type, png.text), ("image/png", false));
        assert_eq!(
            file_of("a.bin", Arc::from(&[0xff][..])).mime_type,
            "application/octet-stream"
        );
    }
}
