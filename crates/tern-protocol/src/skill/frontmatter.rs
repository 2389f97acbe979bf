//! A `SKILL.md`'s YAML frontmatter as JSON, typed by the YAML 1.2 core
//! schema — what a standard YAML 1.2 parser reads (npm `yaml@2`, which the
//! official conformance suite compares with, and the TypeScript SDK's
//! reader), so that an entry's `frontmatter` and a host's own reading of
//! the file agree.
//!
//! - **The block**: the text starts with a `---` line (after an optional
//!   byte-order mark; lines may end in CRLF) and the frontmatter runs to
//!   the next line that is `---` (trailing spaces or tabs allowed).
//! - **Typing** (YAML 1.2.2, section 10.3.2 "Core Schema"), for plain scalars:
//!   `null`/`Null`/`NULL`/`~`/empty is null; `true`/`True`/`TRUE` and the
//!   three `false` spellings are booleans; `[-+]?[0-9]+`, `0o[0-7]+` and
//!   `0x[0-9a-fA-F]+` are integers; `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)`
//!   with an optional exponent is a float; everything else — `yes`, `no`,
//!   `on`, `off`, `-0x1F`, `1_000`, dates — is a string (they were not in
//!   YAML 1.1's sense here). Quoted and block scalars are strings.
//! - **JSON's limits**: `.inf`, `-.inf` and `.nan` (and floats too large to
//!   be finite) have no JSON form, so they are refused; an integer beyond
//!   64 bits becomes the nearest float, as a JavaScript reader has it.
//!   Floats stay floats (`1e3` is `1000.0`): compare numbers by value
//!   ([`differences`] does), as JSON peers do. `-0` becomes `-0.0`, so a
//!   JavaScript reader keeps its sign as it does reading the YAML.
//! - **Refused** rather than read differently from other parsers: a
//!   repeated key (YAML forbids it; `yaml@2` refuses it too), a key that is
//!   not a string (`1: x`, `? [a]`; quote it), a tag other than the core
//!   schema's (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!seq`,
//!   `!!map`, and `!`), an alias of a mapping or sequence (the
//!   exponential-expansion attack; aliases of scalars are read, within a
//!   budget of the frontmatter's own length), `!!float` on an integer
//!   (YAML 1.2 reads `!!float 1` as 1.0, `yaml@2` as "1"), more than one
//!   document,
//!   nesting deeper than 64, and a root that is not a mapping. Merge keys
//!   (`<<`) are not in the core schema: `<<` is a plain key.

use std::collections::HashMap;
use std::fmt;

use serde_json::{Number, Value};
use yaml_rust2::parser::{Event, Parser, Tag};
use yaml_rust2::scanner::{Marker, TScalarStyle};

use crate::json::JsonObject;

/// How deep mappings and sequences may nest.
const MAX_DEPTH: usize = 64;
/// The core schema's tags.
const CORE: &str = "tag:yaml.org,2002:";

/// A frontmatter that cannot be read (or has no JSON form).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontmatterError {
    line: Option<usize>,
    message: String,
}

impl FrontmatterError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            line: None,
            message: message.into(),
        }
    }

    fn at(mark: Marker, message: impl Into<String>) -> Self {
        Self {
            line: Some(mark.line()),
            message: message.into(),
        }
    }

    /// The line of the frontmatter (1 is the line after the opening
    /// `---`) where the problem is, when known.
    pub fn line(&self) -> Option<usize> {
        self.line
    }
}

impl fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "frontmatter line {line}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for FrontmatterError {}

/// Splits a `SKILL.md` into its frontmatter's YAML and the markdown body
/// after the closing `---` line.
pub fn split(markdown: &str) -> Result<(&str, &str), FrontmatterError> {
    let text = markdown.strip_prefix('\u{feff}').unwrap_or(markdown);
    let rest = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
        .ok_or_else(|| FrontmatterError::new("SKILL.md does not begin with a --- line"))?;
    // The closing line: `---`, spaces or tabs, then a line end or the end.
    for (at, _) in rest.match_indices('\n') {
        let line = &rest[at + 1..];
        let Some(after) = line.strip_prefix("---") else {
            continue;
        };
        let after = after.trim_start_matches([' ', '\t']);
        let body = if after.is_empty() {
            Some(after)
        } else {
            after
                .strip_prefix('\n')
                .or_else(|| after.strip_prefix("\r\n"))
        };
        if let Some(body) = body {
            let yaml = &rest[..at];
            return Ok((yaml.strip_suffix('\r').unwrap_or(yaml), body));
        }
    }
    Err(FrontmatterError::new(
        "the frontmatter has no closing --- line",
    ))
}

/// The frontmatter of a `SKILL.md`, as JSON.
pub fn parse(markdown: &str) -> Result<JsonObject, FrontmatterError> {
    let (yaml, _) = split(markdown)?;
    parse_yaml(yaml)
}

/// YAML text (a frontmatter's, without its `---` lines), as a JSON object.
pub fn parse_yaml(yaml: &str) -> Result<JsonObject, FrontmatterError> {
    let mut composer = Composer {
        stack: Vec::new(),
        anchors: HashMap::new(),
        root: None,
        documents: 0,
        budget: yaml.len(),
    };
    let mut parser = Parser::new_from_str(yaml);
    loop {
        let (event, mark) = parser
            .next_token()
            .map_err(|e| FrontmatterError::at(*e.marker(), e.info().to_owned()))?;
        if event == Event::StreamEnd {
            break;
        }
        composer.event(event, mark)?;
    }
    match composer.root {
        Some(Value::Object(map)) => Ok(map),
        None | Some(Value::Null) => Err(FrontmatterError::new("the frontmatter is empty")),
        Some(_) => Err(FrontmatterError::new("the frontmatter is not a mapping")),
    }
}

/// What an anchor names.
enum Anchored {
    Scalar(Value),
    Collection,
}

enum Frame {
    Seq(Vec<Value>),
    Map(JsonObject, Option<String>),
}

struct Composer {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Anchored>,
    root: Option<Value>,
    documents: usize,
    /// Bytes aliases may still copy.
    budget: usize,
}

impl Composer {
    fn event(&mut self, event: Event, mark: Marker) -> Result<(), FrontmatterError> {
        match event {
            Event::DocumentStart => {
                self.documents += 1;
                if self.documents > 1 {
                    return Err(FrontmatterError::at(
                        mark,
                        "the frontmatter holds more than one YAML document",
                    ));
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let value = scalar(&text, style, tag.as_ref(), mark)?;
                if anchor > 0 {
                    self.anchors.insert(anchor, Anchored::Scalar(value.clone()));
                }
                self.push(value, mark)?;
            }
            Event::SequenceStart(anchor, ref tag) | Event::MappingStart(anchor, ref tag) => {
                let seq = matches!(event, Event::SequenceStart(..));
                let allowed = if seq { "seq" } else { "map" };
                if let Some(tag) = tag
                    && full(tag) != format!("{CORE}{allowed}")
                {
                    return Err(FrontmatterError::at(
                        mark,
                        format!("unsupported tag {}", shown(tag)),
                    ));
                }
                if self.stack.len() >= MAX_DEPTH {
                    return Err(FrontmatterError::at(
                        mark,
                        format!("nesting deeper than {MAX_DEPTH}"),
                    ));
                }
                if anchor > 0 {
                    self.anchors.insert(anchor, Anchored::Collection);
                }
                self.stack.push(if seq {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map(JsonObject::new(), None)
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let value = match self.stack.pop() {
                    Some(Frame::Seq(items)) => Value::Array(items),
                    Some(Frame::Map(map, _)) => Value::Object(map),
                    None => return Err(FrontmatterError::at(mark, "unbalanced collection")),
                };
                self.push(value, mark)?;
            }
            Event::Alias(id) => match self.anchors.get(&id) {
                Some(Anchored::Scalar(value)) => {
                    let cost = match value {
                        Value::String(s) => s.len(),
                        _ => 8,
                    };
                    self.budget = self.budget.checked_sub(cost).ok_or_else(|| {
                        FrontmatterError::at(mark, "aliases expand past the frontmatter's size")
                    })?;
                    let value = value.clone();
                    self.push(value, mark)?;
                }
                Some(Anchored::Collection) => {
                    return Err(FrontmatterError::at(
                        mark,
                        "an alias of a mapping or sequence is refused (write it out)",
                    ));
                }
                None => return Err(FrontmatterError::at(mark, "an alias of no anchor")),
            },
            Event::Nothing | Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => {}
        }
        Ok(())
    }

    /// Puts a finished node where it belongs: the root, the next item of a
    /// sequence, or a mapping's key (a string, never twice) or value.
    fn push(&mut self, value: Value, mark: Marker) -> Result<(), FrontmatterError> {
        match self.stack.last_mut() {
            None => {
                if self.root.replace(value).is_some() {
                    return Err(FrontmatterError::at(
                        mark,
                        "the frontmatter holds more than one YAML document",
                    ));
                }
            }
            Some(Frame::Seq(items)) => items.push(value),
            Some(Frame::Map(map, key @ None)) => {
                let Value::String(k) = value else {
                    return Err(FrontmatterError::at(
                        mark,
                        format!(
                            "a mapping key must be a string, found {} (quote it)",
                            kind(&value)
                        ),
                    ));
                };
                if map.contains_key(&k) {
                    return Err(FrontmatterError::at(
                        mark,
                        format!("the key \"{}\" is repeated", crate::error::cut(&k, 64)),
                    ));
                }
                *key = Some(k);
            }
            Some(Frame::Map(map, key)) => {
                if let Some(k) = key.take() {
                    map.insert(k, value);
                }
            }
        }
        Ok(())
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a sequence",
        Value::Object(_) => "a mapping",
    }
}

fn full(tag: &Tag) -> String {
    format!("{}{}", tag.handle, tag.suffix)
}

fn shown(tag: &Tag) -> String {
    let full = full(tag);
    match full.strip_prefix(CORE) {
        Some(core) => format!("!!{}", crate::error::cut(core, 32)),
        None => crate::error::cut(&full, 48).into_owned(),
    }
}

/// One scalar: a plain one typed by the core schema, a quoted or block one
/// a string, unless a core tag says otherwise.
fn scalar(
    text: &str,
    style: TScalarStyle,
    tag: Option<&Tag>,
    mark: Marker,
) -> Result<Value, FrontmatterError> {
    let wrong = |what: &str| {
        FrontmatterError::at(
            mark,
            format!("\"{}\" is not {what}", crate::error::cut(text, 32)),
        )
    };
    let Some(tag) = tag else {
        return if style == TScalarStyle::Plain {
            core(text).map_err(|why| FrontmatterError::at(mark, why))
        } else {
            Ok(Value::String(text.to_owned()))
        };
    };
    let full = full(tag);
    match full.strip_prefix(CORE) {
        Some("str") => Ok(Value::String(text.to_owned())),
        Some("null") if is_null(text) => Ok(Value::Null),
        Some("null") => Err(wrong("a null")),
        Some("bool") => bool_of(text)
            .map(Value::Bool)
            .ok_or_else(|| wrong("a boolean")),
        Some("int") => int(text)
            .ok_or_else(|| wrong("an integer"))?
            .map_err(|why| FrontmatterError::at(mark, why)),
        // Only float-looking text: YAML 1.2 reads `!!float 1` as 1.0 and
        // yaml@2 as the string "1"; tern takes neither side.
        Some("float") => match float(text) {
            Some(value) => value.map_err(|why| FrontmatterError::at(mark, why)),
            None => Err(wrong("a float")),
        },
        _ if full == "!" => Ok(Value::String(text.to_owned())),
        _ => Err(FrontmatterError::at(
            mark,
            format!("unsupported tag {}", shown(tag)),
        )),
    }
}

fn is_null(text: &str) -> bool {
    matches!(text, "" | "~" | "null" | "Null" | "NULL")
}

fn bool_of(text: &str) -> Option<bool> {
    match text {
        "true" | "True" | "TRUE" => Some(true),
        "false" | "False" | "FALSE" => Some(false),
        _ => None,
    }
}

fn digits(text: &str, radix: u32) -> bool {
    !text.is_empty() && text.chars().all(|c| c.is_digit(radix))
}

/// An integer of the core schema (`[-+]?[0-9]+`, `0o[0-7]+`,
/// `0x[0-9a-fA-F]+`): `None` when `text` is not one.
fn int(text: &str) -> Option<Result<Value, String>> {
    let (body, radix) = if let Some(oct) = text.strip_prefix("0o") {
        (oct, 8)
    } else if let Some(hex) = text.strip_prefix("0x") {
        (hex, 16)
    } else {
        let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
        if !digits(unsigned, 10) {
            return None;
        }
        return Some(Ok(decimal(text)));
    };
    if !digits(body, radix) {
        return None;
    }
    if let Ok(n) = u64::from_str_radix(body, radix) {
        return Some(Ok(Value::Number(n.into())));
    }
    // Past 64 bits: the nearest float, as a JavaScript reader has it.
    let n = body.chars().fold(0f64, |acc, c| {
        acc * f64::from(radix) + f64::from(c.to_digit(radix).unwrap_or(0))
    });
    Some(finite(n))
}

/// A decimal integer (already matched): exact in 64 bits, else the nearest
/// float.
fn decimal(text: &str) -> Value {
    // `-0` is the integer 0 to YAML, but a JavaScript reader keeps its sign
    // (and compares -0 and 0 as different with `isDeepStrictEqual`): the
    // float -0.0 reads as -0 there too.
    if text.starts_with('-') && text[1..].bytes().all(|b| b == b'0') {
        return Number::from_f64(-0.0).map_or(Value::Null, Value::Number);
    }
    if let Ok(n) = text.parse::<i64>() {
        return Value::Number(n.into());
    }
    if let Ok(n) = text.strip_prefix('+').unwrap_or(text).parse::<u64>() {
        return Value::Number(n.into());
    }
    text.parse::<f64>()
        .ok()
        .and_then(Number::from_f64)
        .map_or_else(|| Value::String(text.to_owned()), Value::Number)
}

fn finite(n: f64) -> Result<Value, String> {
    Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| "a number too large for JSON".to_owned())
}

/// A float of the core schema: `None` when `text` is not one.
fn float(text: &str) -> Option<Result<Value, String>> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    if matches!(unsigned, ".inf" | ".Inf" | ".INF") || matches!(text, ".nan" | ".NaN" | ".NAN") {
        return Some(Err(format!(
            "{text} has no JSON form (infinities and NaN cannot be carried in frontmatter)"
        )));
    }
    let (mantissa, exponent) = match unsigned.find(['e', 'E']) {
        Some(at) => (&unsigned[..at], Some(&unsigned[at + 1..])),
        None => (unsigned, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        // `.5`, `1.`, `1.5`
        Some((whole, frac)) => {
            (digits(whole, 10) && (frac.is_empty() || digits(frac, 10)))
                || (whole.is_empty() && digits(frac, 10))
        }
        // `1e3` (a bare `1` is an integer, matched before).
        None => exponent.is_some() && digits(mantissa, 10),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e), 10));
    if !(mantissa_ok && exponent_ok) {
        return None;
    }
    Some(match text.parse::<f64>() {
        Ok(n) if n.is_finite() => finite(n),
        _ => Err(format!(
            "{} is too large to be a finite number",
            crate::error::cut(text, 32)
        )),
    })
}

/// A plain scalar typed by the core schema, in its order: null, bool,
/// int, float, else a string.
fn core(text: &str) -> Result<Value, String> {
    if is_null(text) {
        return Ok(Value::Null);
    }
    if let Some(b) = bool_of(text) {
        return Ok(Value::Bool(b));
    }
    if let Some(n) = int(text).or_else(|| float(text)) {
        return n;
    }
    Ok(Value::String(text.to_owned()))
}

/// Field-by-field differences between an entry's `frontmatter` and the one
/// read from its `SKILL.md`: every key both ways (absent is not `null`),
/// objects in any key order, arrays in order, numbers by value (`1000` and
/// `1000.0` agree), no other coercion. One line per differing field,
/// `metadata.version: the entry has "1", SKILL.md has 1`.
pub fn differences(entry: &JsonObject, parsed: &JsonObject) -> Vec<String> {
    let mut out = Vec::new();
    objects("", entry, parsed, &mut out);
    out
}

fn objects(path: &str, entry: &JsonObject, parsed: &JsonObject, out: &mut Vec<String>) {
    let mut keys: Vec<&String> = entry.keys().chain(parsed.keys()).collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        let field = if path.is_empty() {
            key.clone()
        } else {
            format!("{path}.{key}")
        };
        values(&field, entry.get(key), parsed.get(key), out);
    }
}

fn values(path: &str, entry: Option<&Value>, parsed: Option<&Value>, out: &mut Vec<String>) {
    match (entry, parsed) {
        (Some(Value::Object(a)), Some(Value::Object(b))) => objects(path, a, b, out),
        (Some(Value::Array(a)), Some(Value::Array(b))) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                values(&format!("{path}[{i}]"), Some(x), Some(y), out);
            }
        }
        (Some(Value::Number(a)), Some(Value::Number(b))) if same_number(a, b) => {}
        (a, b) if a == b => {}
        (a, b) => {
            let show = |v: Option<&Value>| {
                v.map_or_else(
                    || "nothing".to_owned(),
                    |v| crate::error::cut(&v.to_string(), 80).into_owned(),
                )
            };
            out.push(format!(
                "{}: the entry has {}, SKILL.md has {}",
                crate::error::cut(path, 80),
                show(a),
                show(b)
            ));
        }
    }
}

/// Numbers by value: exactly when both are integers, else as floats.
fn same_number(a: &Number, b: &Number) -> bool {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x == y;
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return x == y;
    }
    #[allow(clippy::float_cmp, reason = "JSON numbers are equal by value, exactly")]
    match (a.as_f64(), b.as_f64()) {
        (Some(x), Some(y)) => x == y,
        _ => false,
    }
}
