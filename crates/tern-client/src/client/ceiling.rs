//! The per-call capability ceiling ([`super::CallOptions::with_ceiling`]): a
//! call declares what the client's handlers can answer *and* the ceiling
//! allows, member by member — elicitation by mode, sampling with or without
//! tools and context, roots, each extension by id. A gateway forwards its own
//! client's capabilities this way, never more (a server must not ask what the
//! request did not declare, rule `ask-declared-only`).

use tern_protocol::ClientCapabilities;
use tern_protocol::capabilities::{ElicitationCapability, SamplingCapability};

/// `caps` cut down to what `ceiling` declares. Settings inside a member
/// (`elicitation.form`'s object, an extension's settings) are `caps`'s own.
/// `experimental` and unknown members pass only where the ceiling has the
/// same member.
pub(crate) fn within(caps: ClientCapabilities, ceiling: &ClientCapabilities) -> ClientCapabilities {
    let ClientCapabilities {
        experimental,
        roots,
        sampling,
        elicitation,
        extensions,
        mut extra,
    } = caps;
    let elicitation = elicitation.and_then(|e| {
        // `{}` is form mode only: name the modes before cutting.
        let form = (e.form.is_some() || e.url.is_none())
            .then(|| e.form.clone().unwrap_or_default())
            .filter(|_| ceiling.elicitation_form());
        let url = e.url.filter(|_| ceiling.elicitation_url());
        (form.is_some() || url.is_some()).then(|| ElicitationCapability {
            form,
            url,
            extra: e.extra,
        })
    });
    let sampling = sampling
        .filter(|_| ceiling.sampling())
        .map(|s| SamplingCapability {
            tools: s.tools.filter(|_| ceiling.sampling_tools()),
            context: s.context.filter(|_| ceiling.sampling_context()),
            extra: s.extra,
        });
    let extensions = extensions
        .map(|mut e| {
            e.retain(|id, _| ceiling.extension(id));
            e
        })
        .filter(|e| !e.is_empty());
    extra.retain(|k, _| ceiling.extra.contains_key(k));
    ClientCapabilities {
        experimental: experimental.filter(|_| ceiling.experimental.is_some()),
        roots: roots.filter(|_| ceiling.roots.is_some()),
        sampling,
        elicitation,
        extensions,
        extra,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tern_protocol::JsonObject;

    use super::*;

    fn all() -> ClientCapabilities {
        let mut caps = ClientCapabilities::default()
            .with_elicitation_form()
            .with_elicitation_url()
            .with_sampling()
            .with_roots()
            .with_extension("io.modelcontextprotocol/tasks");
        let sampling = caps.sampling.as_mut().unwrap();
        sampling.tools = Some(JsonObject::new());
        sampling.context = Some(JsonObject::new());
        caps
    }

    fn caps(v: serde_json::Value) -> ClientCapabilities {
        serde_json::from_value(v).unwrap()
    }

    fn wire(c: &ClientCapabilities) -> serde_json::Value {
        serde_json::to_value(c).unwrap()
    }

    #[test]
    fn each_member_is_cut_to_the_ceiling() {
        for (ceiling, expected) in [
            (json!({}), json!({})),
            // `elicitation: {}` is form mode only.
            (
                json!({"elicitation": {}}),
                json!({"elicitation": {"form": {}}}),
            ),
            (
                json!({"elicitation": {"url": {}}}),
                json!({"elicitation": {"url": {}}}),
            ),
            (json!({"sampling": {}}), json!({"sampling": {}})),
            (
                json!({"sampling": {"tools": {}}}),
                json!({"sampling": {"tools": {}}}),
            ),
            (json!({"roots": {}}), json!({"roots": {}})),
            (
                json!({"extensions": {"io.modelcontextprotocol/tasks": {}, "x/y": {}}}),
                json!({"extensions": {"io.modelcontextprotocol/tasks": {}}}),
            ),
        ] {
            assert_eq!(
                wire(&within(all(), &caps(ceiling.clone()))),
                expected,
                "{ceiling}"
            );
        }
        // A full ceiling takes nothing away.
        assert_eq!(within(all(), &all()), all());
    }

    #[test]
    fn the_ceiling_never_adds() {
        let form_only = ClientCapabilities::default().with_elicitation_form();
        assert_eq!(
            wire(&within(form_only.clone(), &all())),
            json!({"elicitation": {"form": {}}})
        );
        assert_eq!(
            wire(&within(ClientCapabilities::default(), &all())),
            json!({})
        );
        // A bare `elicitation: {}` of the handlers is form mode, and stays so.
        let bare = caps(json!({"elicitation": {}}));
        assert_eq!(
            wire(&within(bare, &caps(json!({"elicitation": {"url": {}}})))),
            json!({})
        );
    }
}
