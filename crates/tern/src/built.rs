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
        "{what} needs a tern built with the `{feature}` feature (from a \
         checkout: cargo install --locked --path crates/tern --features \
         {feature}); this one has: {}",
        features()
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_error_names_the_flag_the_feature_and_how_to_build_it() {
        let error = super::without("--redis", "fleet");
        assert!(
            error.starts_with("--redis needs a tern built with the `fleet` feature"),
            "{error}"
        );
        assert!(
            error.contains("--path crates/tern --features fleet"),
            "{error}"
        );
        assert!(error.ends_with(&super::features()), "{error}");
    }
}
