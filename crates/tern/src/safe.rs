//! What a server says, made safe to show: every server-provided string
//! tern prints (names, versions, titles, descriptions, question messages,
//! option labels, results, errors, a stdio server's standard error) passes
//! [`clean`] before it reaches a terminal or a pipe.
//!
//! A server is not trusted with the terminal. Left raw, its text could set
//! the window title (`ESC ] 0 ;`), write the clipboard (OSC 52), clear the
//! screen and redraw a fake "who asks" header, conceal tern's own `URL:` /
//! `Host:` lines (SGR 8), or reorder what is shown with bidi overrides.
//! So:
//!
//! - C0 controls, DEL and ESC are shown as `\x1b`-style escapes, C1 controls
//!   (U+0080–U+009F, including the one-character CSI U+009B) as `\u{9b}`;
//! - bidi embeddings, overrides and isolates (U+202A–U+202E, U+2066–U+2069),
//!   the marks U+200E, U+200F, U+061C, the zero-width characters U+200B,
//!   U+200C, U+2060, U+FEFF, the line and paragraph separators U+2028 /
//!   U+2029, the invisible operators U+2061–U+2064, the deprecated format
//!   characters U+206A–U+206F and the tag characters U+E0000–U+E007F are
//!   shown as `\u{202e}`-style escapes. The zero-width joiner U+200D is kept
//!   between two pictographs (it glues emoji sequences such as 👩‍💻), and tag
//!   characters right after U+1F3F4 (they spell a subdivision flag), escaped
//!   elsewhere;
//! - a newline and a tab are kept only in [`Layout::Text`] (a result, a
//!   question's message); in [`Layout::Line`] (a name, a title, an option
//!   label) they are shown as `\n` and `\t`. A carriage return is kept only
//!   before a newline (so `\r\n` text reads as it should), never alone, where
//!   it would move the cursor back over what is already on the line;
//! - everything else (letters of any script, emoji, punctuation, a
//!   backslash) is untouched, so the output of [`clean`] passes [`clean`]
//!   unchanged. (A server can therefore print a literal `\x1b`; it is only
//!   text, and shows as such.)
//!
//! `--json` output stays exact JSON: [`json`] writes the same characters
//! (emoji joiners and flag tags included: JSON is for programs) as JSON's
//! own `\u009b` escapes, which parse back to the same string.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Where a string is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A one-line field: newlines and tabs are escaped too.
    Line,
    /// Multi-line text: newlines and tabs are kept.
    Text,
}

/// The one sanitiser: `s` with every character a terminal would act on
/// (rather than show) replaced by a visible escape, as `layout` allows.
pub fn clean(s: &str, layout: Layout) -> Cow<'_, str> {
    let chars: Vec<char> = s.chars().collect();
    let first = (0..chars.len()).find(|&i| escaped(&chars, i, layout));
    let Some(first) = first else {
        return Cow::Borrowed(s);
    };
    let mut out: String = chars[..first].iter().collect();
    for i in first..chars.len() {
        let c = chars[i];
        if !escaped(&chars, i, layout) {
            out.push(c);
            continue;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// [`clean`] for a one-line field.
pub fn line(s: &str) -> Cow<'_, str> {
    clean(s, Layout::Line)
}

/// [`clean`] for multi-line text.
pub fn text(s: &str) -> Cow<'_, str> {
    clean(s, Layout::Text)
}

/// A character no terminal should be handed from a server, wherever it is
/// (the layout's newline and tab aside).
fn unsafe_char(c: char) -> bool {
    let u = u32::from(c);
    u < 0x20
        || (0x7f..=0x9f).contains(&u)
        || matches!(
            u,
            0x061c
                | 0x200b..=0x200f
                | 0x2028..=0x202e
                | 0x2060..=0x2064
                | 0x2066..=0x206f
                | 0xfeff
                | 0xe0000..=0xe007f
        )
}

/// Whether `chars[i]` is shown escaped in `layout`.
fn escaped(chars: &[char], i: usize, layout: Layout) -> bool {
    match chars[i] {
        '\n' | '\t' => layout == Layout::Line,
        '\r' => layout == Layout::Line || chars.get(i + 1) != Some(&'\n'),
        // The zero-width joiner inside an emoji sequence is kept.
        '\u{200d}' => !joins_pictographs(chars, i),
        // Tags spell a subdivision flag after U+1F3F4 (WAVING BLACK FLAG).
        '\u{e0020}'..='\u{e007f}' => !in_flag(chars, i),
        c => unsafe_char(c),
    }
}

/// Whether the joiner at `i` sits between two pictographs (the first
/// perhaps followed by the emoji presentation selector U+FE0F).
fn joins_pictographs(chars: &[char], i: usize) -> bool {
    i > 0
        && (pictograph(chars[i - 1]) || chars[i - 1] == '\u{fe0f}')
        && chars.get(i + 1).copied().is_some_and(pictograph)
}

/// Whether the tag character at `i` continues a run started by U+1F3F4.
fn in_flag(chars: &[char], i: usize) -> bool {
    let mut j = i;
    while j > 0 {
        j -= 1;
        match chars[j] {
            '\u{1f3f4}' => return true,
            '\u{e0020}'..='\u{e007f}' => {}
            _ => return false,
        }
    }
    false
}

/// Emoji and pictographs (the blocks emoji sequences are built from).
fn pictograph(c: char) -> bool {
    matches!(u32::from(c), 0x1f000..=0x1faff | 0x2600..=0x27bf | 0x2b00..=0x2bff)
}

/// `value` as pretty JSON, exact, with the characters [`clean`] escapes
/// written as JSON `\uXXXX` escapes (`serde_json` escapes C0 already; DEL,
/// C1, bidi and zero-width characters it writes raw). They can only occur
/// inside strings, where the escape means the same character.
pub fn json(value: &impl serde::Serialize) -> String {
    json_escaped(serde_json::to_string_pretty(value).unwrap_or_default())
}

/// [`json`] on one line (for JSON lines: one value a line, `tern listen
/// --json`), the same characters escaped.
pub fn json_line(value: &impl serde::Serialize) -> String {
    json_escaped(serde_json::to_string(value).unwrap_or_default())
}

/// JSON text with the characters [`json`] escapes written as `\uXXXX`.
fn json_escaped(text: String) -> String {
    if !text.chars().any(unsafe_char_in_json) {
        return text;
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char_in_json(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// What [`json`] escapes: the unsafe characters but the newline that
/// pretty JSON puts between its lines (inside strings serde escapes it).
fn unsafe_char_in_json(c: char) -> bool {
    unsafe_char(c) && c != '\n'
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_sequences_are_shown_not_run() {
        assert_eq!(line("\x1b]0;TITLE\x07ok"), "\\x1b]0;TITLE\\x07ok");
        assert_eq!(
            text("\x1b]52;c;Y3VybA==\x07\x1b[2J\x1b[H\x1b[1A\x1b[2K\x1b[31mred\x1b[8m"),
            "\\x1b]52;c;Y3VybA==\\x07\\x1b[2J\\x1b[H\\x1b[1A\\x1b[2K\\x1b[31mred\\x1b[8m"
        );
        assert_eq!(
            line("\x1b]8;;https://evil.example\x1b\\link\x1b]8;;\x1b\\"),
            "\\x1b]8;;https://evil.example\\x1b\\link\\x1b]8;;\\x1b\\"
        );
        assert_eq!(line("a\u{9b}2Jb\u{85}c\u{7f}"), "a\\u{9b}2Jb\\u{85}c\\x7f");
        assert_eq!(line("\0\x08"), "\\x00\\x08");
    }

    #[test]
    fn bidi_and_invisible_characters_are_neutralised() {
        assert_eq!(line("abc\u{202e}fdp.exe"), "abc\\u{202e}fdp.exe");
        for c in [
            '\u{202a}',
            '\u{202b}',
            '\u{202c}',
            '\u{202d}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200e}',
            '\u{200f}',
            '\u{061c}',
            '\u{200b}',
            '\u{200c}',
            '\u{200d}',
            '\u{2060}',
            '\u{feff}',
            '\u{2028}',
            '\u{2029}',
            '\u{e0041}',
        ] {
            let s = format!("a{c}b");
            let shown = line(&s);
            assert!(!shown.contains(c), "{c:?} in {shown:?}");
            assert_eq!(shown, format!("a\\u{{{:x}}}b", u32::from(c)));
        }
    }

    #[test]
    fn newlines_and_tabs_only_where_the_layout_allows() {
        assert_eq!(line("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(text("a\nb\tc"), "a\nb\tc");
        assert_eq!(text("a\r\nb"), "a\r\nb");
        assert_eq!(text("fake\rreal"), "fake\\rreal");
        assert_eq!(line("a\r\nb"), "a\\r\\nb");
    }

    #[test]
    fn printable_text_and_emoji_are_untouched() {
        for s in [
            "Ireland (eu-west-1)",
            "naïve café — 東京 مرحبا שלום",
            "👍🏽 🚀 ✅",
            "👩‍💻 👨‍👩‍👧",
            "❤️‍🔥",
            "🏴\u{e0067}\u{e0062}\u{e0073}\u{e0063}\u{e0074}\u{e007f}",
            "C:\\path \\x1b is text",
        ] {
            assert!(matches!(line(s), Cow::Borrowed(_)), "{s}");
        }
    }

    #[test]
    fn clean_is_idempotent() {
        let hostile = "\x1b]0;T\x07\u{9b}31m\u{202e}x\n\ty\r\u{200b}";
        for layout in [Layout::Line, Layout::Text] {
            let once = clean(hostile, layout).into_owned();
            assert_eq!(clean(&once, layout), once);
        }
    }

    #[test]
    fn json_stays_exact_with_c1_and_bidi_escaped() {
        let value = serde_json::json!({"t": "a\u{9b}b\u{202e}c\x1bd\u{7f}\n👍"});
        let shown = json(&value);
        assert!(
            !shown.contains(['\u{9b}', '\u{202e}', '\x1b', '\u{7f}']),
            "{shown}"
        );
        assert!(
            shown.contains("\\u009b") && shown.contains("\\u202e"),
            "{shown}"
        );
        let back: serde_json::Value = serde_json::from_str(&shown).unwrap();
        assert_eq!(back, value);
        // Astral tag characters as a surrogate pair.
        let tag = serde_json::json!("x\u{e0041}");
        let shown = json(&tag);
        assert!(shown.contains("\\udb40\\udc41"), "{shown}");
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&shown).unwrap(),
            tag
        );
    }
}
