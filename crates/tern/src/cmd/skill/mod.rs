//! `tern skills` (the skills a server lists) and `tern skill NAME` (one
//! skill's `SKILL.md`, verified; with `--save DIR` every file of it, each
//! verified: [`save`]), on tern-client's Skills extension.
//!
//! Every string a server sent (names, descriptions, URIs, the `SKILL.md`
//! itself, refusal reasons) is shown through `tern::safe`.

use serde_json::json;
use tern_client::{ErrorKind, SkillListing};
use tern_protocol::skill::Skill;

use super::{Connected, emit, emit_json};
use crate::advice::failure;
use crate::exit::{EXIT_OK, EXIT_SERVER, Failure, usage};

mod save;

/// One line of a server's text.
fn flat(s: &str) -> String {
    let folded: Vec<&str> = s.split_whitespace().collect();
    tern::safe::line(&folded.join(" ")).into_owned()
}

/// Whether the server declares the Skills extension (its `server/discover`,
/// or on a 2025 session its `initialize` result); when it does not, says so
/// on standard error. When the capabilities cannot be read, the error.
#[allow(
    clippy::print_stderr,
    reason = "the note goes beside the (empty) list, on standard error"
)]
async fn offers_skills(c: &Connected) -> Result<bool, Failure> {
    let d = &c.driver;
    let declared = d
        .wait("server/discover", d.client.skills_capability())
        .await?
        .is_some();
    if !declared {
        eprintln!(
            "tern: {} offers no skills (its capabilities do not declare the Skills extension, io.modelcontextprotocol/skills)",
            tern::safe::line(&d.who())
        );
    }
    Ok(declared)
}

/// Every skill the server lists; the entries it refused are reported on
/// standard error (each with why), the others kept.
#[allow(
    clippy::print_stderr,
    reason = "refused entries are reported beside the list, on standard error"
)]
async fn listing(c: &Connected) -> Result<SkillListing, Failure> {
    let d = &c.driver;
    let listing = d.wait("skills/list", d.client.skills()).await?;
    for invalid in &listing.invalid {
        eprintln!(
            "tern: refused {}'s skills/list entry {}{}: {}",
            tern::safe::line(&d.who()),
            invalid.index,
            invalid
                .uri
                .as_deref()
                .map(|u| format!(" ({})", flat(u)))
                .unwrap_or_default(),
            flat(&invalid.reason)
        );
    }
    Ok(listing)
}

/// `tern skills`: name, description and URI of each skill.
pub(super) async fn list(c: &Connected) -> Result<u8, Failure> {
    if !offers_skills(c).await? {
        if c.json {
            emit_json(&json!({ "skills": [] }));
        }
        return Ok(EXIT_OK);
    }
    let listing = listing(c).await?;
    if c.json {
        let invalid: Vec<_> = listing
            .invalid
            .iter()
            .map(|e| json!({"index": e.index, "uri": e.uri, "reason": e.reason}))
            .collect();
        emit_json(&json!({ "skills": listing.skills, "invalid": invalid }));
        return Ok(EXIT_OK);
    }
    let mut out = String::new();
    if listing.skills.is_empty() {
        out.push_str("(no skills)\n");
    }
    for skill in &listing.skills {
        out.push_str(&flat(skill.name().unwrap_or_default()));
        if let Some(d) = skill.description() {
            out.push_str("  ");
            out.push_str(&flat(d));
        }
        out.push_str("\n    ");
        out.push_str(&flat(&skill.uri));
        out.push('\n');
    }
    emit(&out);
    Ok(EXIT_OK)
}

/// The skill `name` names: a `…/SKILL.md` URI (confirmed with `skills/get`),
/// or a name among the listed skills — exactly one of them; an ambiguous
/// name is refused with the URIs to choose from.
async fn resolve(c: &Connected, name: &str) -> Result<Skill, Failure> {
    let d = &c.driver;
    if name.contains("://") {
        return d.wait("skills/get", d.client.skill(name)).await;
    }
    let listing = listing(c).await?;
    let matching: Vec<&Skill> = listing
        .skills
        .iter()
        .filter(|s| s.name() == Some(name))
        .collect();
    match matching[..] {
        [skill] => Ok(skill.clone()),
        [] => {
            let hint =
                crate::suggest::did_you_mean(name, listing.skills.iter().filter_map(Skill::name));
            Err(usage(format!(
                "{} has no skill `{name}`{}; `tern skills` lists its {} skills",
                d.who(),
                tern::safe::line(&hint),
                listing.skills.len()
            )))
        }
        _ => {
            let uris: Vec<String> = matching
                .iter()
                .map(|s| format!("  {}", flat(&s.uri)))
                .collect();
            Err(usage(format!(
                "{} serves {} skills named `{name}`; name one by its URI:\n{}",
                d.who(),
                matching.len(),
                uris.join("\n")
            )))
        }
    }
}

/// A file that failed verification, as the run's failure: exit 3 (a reply
/// tern cannot use), nothing of it shown or written.
pub(super) fn unverified(c: &Connected, e: &tern_client::ClientError) -> Failure {
    if e.kind() == ErrorKind::Verification {
        return Failure {
            code: EXIT_SERVER,
            message: format!(
                "{}; nothing of it was shown or written (the server's entry for the skill and the file it serves disagree)",
                tern::safe::line(&format!("{e:#}"))
            ),
        };
    }
    failure(e, &c.driver.session)
}

/// `tern skill NAME`: the skill's `SKILL.md`, verified against its entry;
/// with `--save DIR`, every file of the skill written under DIR.
pub(super) async fn show(
    c: &Connected,
    name: &str,
    save_to: Option<&std::path::Path>,
) -> Result<u8, Failure> {
    if !offers_skills(c).await? {
        return Err(usage(format!(
            "{} has no skill `{name}`: it offers no skills",
            c.driver.who()
        )));
    }
    let skill = resolve(c, name).await?;
    if let Some(dir) = save_to {
        return save::save(c, &skill, dir).await;
    }
    let d = &c.driver;
    let md = d
        .wait_raw("resources/read", d.client.read_skill_md(&skill))
        .await?
        .map_err(|e| unverified(c, &e))?;
    let text = md
        .text
        .unwrap_or_else(|| String::from_utf8_lossy(&md.bytes).into_owned());
    if c.json {
        emit_json(&json!({ "skill": skill, "text": text }));
    } else {
        emit(&text);
        if !text.ends_with('\n') {
            emit("\n");
        }
    }
    Ok(EXIT_OK)
}
