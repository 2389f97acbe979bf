//! The optional parts this `tern` was built with (its Cargo features), and
//! the error a flag answers when the part it needs was left out.

/// Each optional part and whether this build has it.
pub const FEATURES: [(&str, bool); 4] = [
    ("fleet", cfg!(feature = "fleet")),
    ("sqlite", cfg!(feature = "sqlite")),
    ("validate", cfg!(feature = "validate")),
    ("otel", cfg!(feature = "otel")),
];

/// The features this build has, comma-separated (`none` when none).
pub fn features() -> String {
    let on: Vec<&str> = FEATURES
        .iter()
        .filter(|(_, on)| *on)
        .map(|(name, _)| *name)
        .collect();
    if on.is_empty() {
        "none".to_owned()
    } else {
        on.join(", ")
    }
}

/// What `what` (a flag, or a flag's value) answers in a build without
/// `feature`.
pub fn without(what: &str, feature: &str) -> String {
    format!(
        "{what} needs a tern built with the `{feature}` feature \
         (cargo install tern --features {feature}); this one has: {}",
        features()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_list_names_exactly_the_features_built_in() {
        let list = super::features();
        for (name, on) in super::FEATURES {
            assert_eq!(list.split(", ").any(|f| f == name), on, "{name} in {list}");
        }
        assert!(super::without("--redis", "fleet").contains("--features fleet"));
    }
}
