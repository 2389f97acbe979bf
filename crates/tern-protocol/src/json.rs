//! JSON helpers shared by the wire types: the open-object alias, string tags that
//! must hold one fixed value, and number formatting.

use serde::{Deserialize, Deserializer, Serializer};

/// A JSON object whose keys are kept in the order they arrived.
///
/// Used wherever the spec leaves an object open (`_meta`, `experimental`,
/// schemas, `arguments`, `metadata`): every key survives a round trip.
pub type JsonObject = serde_json::Map<String, serde_json::Value>;

/// Declares a zero-sized type that serialises as one fixed string and refuses
/// every other string when decoding, naming what it found.
macro_rules! string_tag {
    ($(#[$meta:meta])* $name:ident = $lit:literal) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        pub struct $name;

        impl $name {
            /// The one value this tag takes on the wire.
            pub const VALUE: &'static str = $lit;
        }

        impl ::serde::Serialize for $name {
            fn serialize<S: ::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str($lit)
            }
        }

        impl<'de> ::serde::Deserialize<'de> for $name {
            fn deserialize<D: ::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let found = $crate::json::TagStr::deserialize(d)?;
                if found.0 == $lit {
                    Ok($name)
                } else {
                    Err(<D::Error as ::serde::de::Error>::custom(format_args!(
                        "expected \"{}\", found \"{}\"",
                        $lit, found.0
                    )))
                }
            }
        }
    };
}
pub(crate) use string_tag;

/// A string read for comparison with a tag; says what it found when it is not
/// a string at all.
#[derive(Debug)]
pub(crate) struct TagStr(pub(crate) String);

impl<'de> Deserialize<'de> for TagStr {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = TagStr;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<TagStr, E> {
                Ok(TagStr(v.to_owned()))
            }
            fn visit_string<E: serde::de::Error>(self, v: String) -> Result<TagStr, E> {
                Ok(TagStr(v))
            }
        }
        d.deserialize_str(V)
    }
}

/// The largest integer JSON peers agree on (2^53 − 1).
const MAX_SAFE_INTEGER: f64 = 9_007_199_254_740_991.0;

/// Writes an `f64` that holds a whole number as a JSON integer (`50`, not
/// `50.0`), so a value read as `50` is written back as `50`.
#[allow(
    clippy::trivially_copy_pass_by_ref,
    reason = "serde's serialize_with passes fields by reference"
)]
pub(crate) fn compact_f64<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
    if v.fract() == 0.0 && v.abs() <= MAX_SAFE_INTEGER {
        #[allow(
            clippy::cast_possible_truncation,
            reason = "checked above: a whole number within ±2^53"
        )]
        s.serialize_i64(*v as i64)
    } else {
        s.serialize_f64(*v)
    }
}

/// [`compact_f64`] for optional fields.
#[allow(
    clippy::ref_option,
    reason = "serde's serialize_with passes fields by reference"
)]
pub(crate) fn compact_opt_f64<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => compact_f64(v, s),
        None => s.serialize_none(),
    }
}

/// Deserialises a field that must be present to count, keeping an explicit
/// `null` distinguishable from an absent key (`Some(Value::Null)` vs `None`).
pub(crate) fn present<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<serde_json::Value>, D::Error> {
    serde_json::Value::deserialize(d).map(Some)
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::result::CompleteTag as Hello;

    #[test]
    fn tag_round_trips_and_names_what_it_found() {
        assert_eq!(serde_json::to_string(&Hello).unwrap(), "\"complete\"");
        assert_eq!(
            serde_json::from_str::<Hello>("\"complete\"").unwrap(),
            Hello
        );
        let err = serde_json::from_str::<Hello>("\"bye\"")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("expected \"complete\", found \"bye\""),
            "{err}"
        );
        assert!(serde_json::from_str::<Hello>("1").is_err());
    }

    #[test]
    fn whole_floats_are_written_as_integers() {
        #[derive(serde::Serialize)]
        struct N {
            #[serde(serialize_with = "compact_f64")]
            n: f64,
        }
        assert_eq!(
            serde_json::to_string(&N { n: 50.0 }).unwrap(),
            r#"{"n":50}"#
        );
        assert_eq!(
            serde_json::to_string(&N { n: 0.5 }).unwrap(),
            r#"{"n":0.5}"#
        );
        assert_eq!(
            serde_json::to_string(&N { n: 1e300 }).unwrap(),
            r#"{"n":1e+300}"#
        );
    }
}

/// Why [`unique_members`] refused a JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateMember {
    /// The repeated member name, cut to 64 characters.
    pub name: String,
}

impl std::fmt::Display for DuplicateMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the member \"{}\" appears twice in one object",
            self.name
        )
    }
}

impl std::error::Error for DuplicateMember {}

/// How deep and how wide a JSON text may be: checked in the same one pass
/// as repeated names ([`check_shape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct JsonLimits {
    /// Most arrays and objects open inside one another: default 64 (real
    /// arguments nest a handful of levels; `serde_json` itself stops at 128).
    pub max_depth: usize,
    /// Most members of one object: default 100,000. Arrays are bounded by
    /// the body size only: a tool may well take a 100,000-element array.
    pub max_members: usize,
}

impl Default for JsonLimits {
    fn default() -> Self {
        Self {
            max_depth: 64,
            max_members: 100_000,
        }
    }
}

impl JsonLimits {
    /// No bound but `serde_json`'s own.
    pub const UNBOUNDED: Self = Self {
        max_depth: usize::MAX,
        max_members: usize::MAX,
    };

    /// Sets [`Self::max_depth`] (at least 1).
    #[must_use]
    pub fn max_depth(mut self, n: usize) -> Self {
        self.max_depth = n.max(1);
        self
    }

    /// Sets [`Self::max_members`] (at least 1).
    #[must_use]
    pub fn max_members(mut self, n: usize) -> Self {
        self.max_members = n.max(1);
        self
    }
}

/// What [`check_shape`] refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShapeError {
    /// A member name repeated in one object.
    Duplicate(DuplicateMember),
    /// Arrays and objects nested deeper than the limit.
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// An object with more members than the limit.
    TooManyMembers {
        /// The limit.
        limit: usize,
    },
}

impl std::fmt::Display for ShapeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Duplicate(d) => d.fmt(f),
            Self::TooDeep { limit } => {
                write!(f, "arrays and objects nest deeper than {limit} levels")
            }
            Self::TooManyMembers { limit } => {
                write!(f, "an object has more than {limit} members")
            }
        }
    }
}

impl std::error::Error for ShapeError {}

/// Checks that no object anywhere in `text` names a member twice.
///
/// RFC 8259 leaves duplicate names undefined, and readers disagree (serde's
/// maps keep the last, a gateway may read the first): one reading for the
/// headers and another for the handler is how a `Mcp-Name` check is
/// bypassed. tern refuses such input everywhere instead of picking one. One
/// pass, no values kept; text that is not JSON passes (the real decoder
/// reports it).
pub fn unique_members(text: &str) -> Result<(), DuplicateMember> {
    // Unbounded: a repetition is all it can refuse.
    match check_shape(text, &JsonLimits::UNBOUNDED) {
        Err(ShapeError::Duplicate(d)) => Err(d),
        _ => Ok(()),
    }
}

/// [`unique_members`], and `text` within `limits`' depth and width, in one
/// pass.
#[allow(
    clippy::too_many_lines,
    reason = "one walk: its visitor types are declared where it uses them"
)]
pub fn check_shape(text: &str, limits: &JsonLimits) -> Result<(), ShapeError> {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

    /// What the walk keeps: the first problem found, the depth, and the
    /// names of the objects open on the way down, each object's after its
    /// parent's (one buffer for the whole text, not one per object).
    struct State<'de> {
        found: Option<ShapeError>,
        names: Vec<std::borrow::Cow<'de, str>>,
        depth: usize,
        limits: JsonLimits,
    }

    impl State<'_> {
        /// One level down; `false` (and the problem kept) past the limit.
        fn enter(&mut self) -> bool {
            self.depth += 1;
            if self.depth > self.limits.max_depth {
                self.found = Some(ShapeError::TooDeep {
                    limit: self.limits.max_depth,
                });
                return false;
            }
            true
        }
    }

    struct Check<'s, 'de>(&'s mut State<'de>);

    impl<'de> DeserializeSeed<'de> for Check<'_, 'de> {
        type Value = ();

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Check<'_, 'de> {
        type Value = ();

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("any JSON value")
        }

        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, _: &str) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            if !self.0.enter() {
                return Err(serde::de::Error::custom("too deep"));
            }
            while seq.next_element_seed(Check(&mut *self.0))?.is_some() {}
            self.0.depth -= 1;
            Ok(())
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            // Most objects are small: a linear scan over borrowed names
            // (allocating only for escaped ones) at the end of the shared
            // buffer, and a hash set past 16 members, so a huge object
            // costs linear time, not quadratic.
            if !self.0.enter() {
                return Err(serde::de::Error::custom("too deep"));
            }
            let start = self.0.names.len();
            let mut many: Option<std::collections::HashSet<std::borrow::Cow<'de, str>>> = None;
            let mut members = 0_usize;
            while let Some(key) = map.next_key_seed(Key)? {
                members += 1;
                if members > self.0.limits.max_members {
                    self.0.found = Some(ShapeError::TooManyMembers {
                        limit: self.0.limits.max_members,
                    });
                    return Err(serde::de::Error::custom("too many members"));
                }
                let repeated = if let Some(set) = &mut many {
                    !set.insert(key.clone())
                } else {
                    let mine = &self.0.names[start..];
                    if mine.contains(&key) {
                        true
                    } else if mine.len() < 16 {
                        self.0.names.push(key.clone());
                        false
                    } else {
                        let mut set: std::collections::HashSet<_> =
                            self.0.names.drain(start..).collect();
                        set.insert(key.clone());
                        many = Some(set);
                        false
                    }
                };
                if repeated {
                    self.0.found = Some(ShapeError::Duplicate(DuplicateMember {
                        name: key.chars().take(64).collect(),
                    }));
                    return Err(serde::de::Error::custom("duplicate member"));
                }
                // A nested object's names go after this one's and are gone
                // again when it ends.
                map.next_value_seed(Check(&mut *self.0))?;
            }
            self.0.names.truncate(start);
            self.0.depth -= 1;
            Ok(())
        }
    }

    /// A member name, borrowed from the text unless it has escapes.
    struct Key;

    impl<'de> DeserializeSeed<'de> for Key {
        type Value = std::borrow::Cow<'de, str>;

        fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_str(self)
        }
    }

    impl<'de> Visitor<'de> for Key {
        type Value = std::borrow::Cow<'de, str>;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a member name")
        }

        fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
            Ok(std::borrow::Cow::Borrowed(v))
        }

        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok(std::borrow::Cow::Owned(v.to_owned()))
        }
    }

    let mut state = State {
        found: None,
        names: Vec::with_capacity(32),
        depth: 0,
        limits: *limits,
    };
    let mut de = serde_json::Deserializer::from_str(text);
    // serde_json's own recursion limit (128) stands when ours is higher;
    // text it refuses for that is not JSON this walk passes judgement on.
    let _ = Check(&mut state).deserialize(&mut de);
    state.found.map_or(Ok(()), Err)
}

#[cfg(test)]
mod unique_tests {
    use super::*;

    #[test]
    fn depth_and_width_are_bounded_in_the_same_pass() {
        let limits = JsonLimits::default().max_depth(3).max_members(2);
        assert_eq!(check_shape(r#"{"a":[{"b":1}]}"#, &limits), Ok(()));
        assert_eq!(
            check_shape(r#"{"a":[{"b":[1]}]}"#, &limits),
            Err(ShapeError::TooDeep { limit: 3 })
        );
        assert_eq!(
            check_shape("[[[[]]]]", &limits),
            Err(ShapeError::TooDeep { limit: 3 })
        );
        assert_eq!(
            check_shape(r#"{"a":1,"b":2,"c":3}"#, &limits),
            Err(ShapeError::TooManyMembers { limit: 2 })
        );
        // Long arrays are not members: a 100,000-element array passes.
        let long = format!("[{}]", vec!["0"; 100_000].join(","));
        assert_eq!(check_shape(&long, &JsonLimits::default()), Ok(()));
        // Siblings do not add up to depth.
        assert_eq!(check_shape("[[1],[2],[[3]]]", &limits), Ok(()));
        let deep = format!("{}{}", "[".repeat(65), "]".repeat(65));
        assert!(check_shape(&deep, &JsonLimits::default()).is_err());
        assert_eq!(
            unique_members(&deep),
            Ok(()),
            "unbounded: depth is not a duplicate"
        );
    }

    #[test]
    fn repeated_members_are_found_at_any_depth() {
        for ok in [
            r#"{"a":1,"b":{"a":2},"c":[{"a":3},{"a":4}]}"#,
            "[]",
            r#""x""#,
            r#"{"a\u0062":1,"ab2":2}"#,
            "not json",
        ] {
            assert_eq!(unique_members(ok), Ok(()), "{ok}");
        }
        for (bad, name) in [
            (r#"{"taskId":1,"taskId":2}"#, "taskId"),
            (r#"{"arguments":{"to":"a","to":"b"}}"#, "to"),
            (r#"{"x":[1,{"deep":{"k":1,"k":2}}]}"#, "k"),
            // An escaped name is the same name.
            (r#"{"ab":1,"a\u0062":2}"#, "ab"),
        ] {
            assert_eq!(unique_members(bad).unwrap_err().name, name, "{bad}");
        }
        // Past the linear scan's 16 members, the hash set finds it too.
        let wide: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
        let text = format!("{{{},\"k3\":0}}", wide.join(","));
        assert_eq!(unique_members(&text).unwrap_err().name, "k3");
        assert_eq!(unique_members(&format!("{{{}}}", wide.join(","))), Ok(()));
        // Objects share one buffer of names: a nested object's names are
        // its own, and its parent's are still all there after it.
        for ok in [
            r#"{"a":{"b":1},"b":2}"#,
            r#"{"a":{"x":1,"y":{"z":1}},"b":{"x":2},"x":3,"z":[{"z":1}]}"#,
        ] {
            assert_eq!(unique_members(ok), Ok(()), "{ok}");
        }
        for (bad, name) in [
            (r#"{"a":{"b":1},"a":2}"#, "a"),
            (r#"{"a":{"b":{"c":1}},"d":{"c":1,"c":2}}"#, "c"),
        ] {
            assert_eq!(unique_members(bad).unwrap_err().name, name, "{bad}");
        }
        let nested = format!(r#"{{"p":1,"w":{{{}}},"q":2,"p":3}}"#, wide.join(","));
        assert_eq!(unique_members(&nested).unwrap_err().name, "p");
        let wide_parent = format!(r#"{{{},"inner":{{"k1":1}},"k1":5}}"#, wide.join(","));
        assert_eq!(unique_members(&wide_parent).unwrap_err().name, "k1");
        let long = format!(r#"{{"{0}":1,"{0}":2}}"#, "n".repeat(1000));
        assert_eq!(unique_members(&long).unwrap_err().name.len(), 64);
    }
}
