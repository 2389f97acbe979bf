//! "Did you mean": the closest of some names to what was typed.

/// `" (did you mean `NAME`?)"` for the candidate closest to `typed`, when
/// one is close enough to be a likely slip; empty otherwise.
pub(crate) fn did_you_mean<'a>(
    typed: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> String {
    closest(typed, candidates).map_or_else(String::new, |c| format!(" (did you mean `{c}`?)"))
}

/// The candidate closest to `typed` (Jaro-Winkler similarity above 0.8, or
/// the same ignoring case), if any.
pub(crate) fn closest<'a>(
    typed: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let lower = typed.to_lowercase();
    candidates
        .into_iter()
        .map(|c| {
            let score = if c.to_lowercase() == lower {
                1.0
            } else {
                strsim::jaro_winkler(&lower, &c.to_lowercase())
            };
            (score, c)
        })
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slip_is_suggested_and_a_stranger_is_not() {
        let names = ["provision_database", "deploy", "summarise"];
        assert_eq!(
            did_you_mean("provision_databse", names),
            " (did you mean `provision_database`?)"
        );
        assert_eq!(closest("DEPLOY", names), Some("deploy"));
        assert_eq!(did_you_mean("weather", names), "");
    }
}
