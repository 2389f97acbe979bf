//! A byte-level `text/event-stream` decoder (WHATWG HTML §9.2.6, "Parsing an
//! event stream"), the way a response stream arrives: in chunks cut anywhere,
//! also inside a multibyte character (a proxy such as nginx re-chunks).
//!
//! Bytes are kept as bytes until an event is complete; only then is its data
//! decoded as UTF-8, once. Each byte is looked at once (no rescanning of a
//! growing buffer), and an event larger than the limit is an error, not an
//! ever-growing buffer.

/// One dispatched event: its `data` lines joined with `\n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Event {
    pub(crate) data: String,
}

/// Why the stream cannot be read on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// The event being read grew past the limit (bytes).
    TooLarge(usize),
    /// A complete event's data is not UTF-8.
    NotUtf8(std::str::Utf8Error),
}

impl std::fmt::Display for SseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge(limit) => write!(f, "an SSE event is larger than {limit} bytes"),
            Self::NotUtf8(_) => f.write_str("an SSE event's data is not UTF-8"),
        }
    }
}

impl std::error::Error for SseError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::TooLarge(_) => None,
            Self::NotUtf8(e) => Some(e),
        }
    }
}

/// The decoder's state between chunks.
#[derive(Debug)]
pub(crate) struct Decoder {
    /// The line being read (without its end).
    line: Vec<u8>,
    /// The current event's data so far, lines joined with `\n`.
    data: Vec<u8>,
    /// The current event had a `data` field (an empty one counts).
    has_data: bool,
    /// Bytes of the current event read so far, line ends included.
    event_bytes: usize,
    /// The most bytes one event may take.
    max_event_bytes: usize,
    /// The last byte was a CR: an LF right after it ends nothing more.
    after_cr: bool,
    /// Still at the start of the stream, where a BOM is skipped.
    at_start: bool,
    /// The last `id` field seen (the last event ID buffer), for resuming
    /// with `Last-Event-ID`.
    pub(crate) last_event_id: Option<String>,
    /// The last valid `retry` field, in milliseconds.
    pub(crate) retry: Option<u64>,
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

impl Decoder {
    pub(crate) fn new(max_event_bytes: usize) -> Self {
        Self {
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event_bytes: 0,
            max_event_bytes,
            after_cr: false,
            at_start: true,
            last_event_id: None,
            retry: None,
        }
    }

    /// Feeds one chunk; complete events are appended to `out`.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if self.at_start {
            // The BOM may itself be split across chunks: hold its prefix.
            let held = self.line.len();
            let want = BOM.len() - held;
            let take = want.min(chunk.len());
            if BOM[held..held + take] == chunk[..take] {
                self.line.extend_from_slice(&chunk[..take]);
                chunk = &chunk[take..];
                if self.line.len() < BOM.len() {
                    return Ok(()); // not decided yet
                }
                self.line.clear();
                self.at_start = false;
            } else {
                self.at_start = false; // the held bytes are ordinary text
            }
        }
        while !chunk.is_empty() {
            if self.after_cr && chunk[0] == b'\n' {
                chunk = &chunk[1..];
                self.after_cr = false;
                self.grow(1)?;
                continue;
            }
            self.after_cr = false;
            let Some(end) = chunk.iter().position(|&b| b == b'\n' || b == b'\r') else {
                self.grow(chunk.len())?;
                self.line.extend_from_slice(chunk);
                break;
            };
            self.grow(end + 1)?;
            self.line.extend_from_slice(&chunk[..end]);
            self.after_cr = chunk[end] == b'\r';
            chunk = &chunk[end + 1..];
            let line = std::mem::take(&mut self.line);
            self.line_ended(&line, out)?;
            self.line = line;
            self.line.clear();
        }
        Ok(())
    }

    fn grow(&mut self, by: usize) -> Result<(), SseError> {
        self.event_bytes = self.event_bytes.saturating_add(by);
        if self.event_bytes > self.max_event_bytes {
            return Err(SseError::TooLarge(self.max_event_bytes));
        }
        Ok(())
    }

    fn line_ended(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if line.is_empty() {
            return self.dispatch(out);
        }
        if line[0] == b':' {
            return Ok(()); // a comment (keep-alive)
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        // `event`, `id` and `retry` are for reconnection, which a response
        // stream of one request does not do; unknown fields are ignored.
        if field == b"id" && !value.contains(&0) {
            self.last_event_id = std::str::from_utf8(value).ok().map(str::to_owned);
        } else if field == b"retry" && !value.is_empty() && value.iter().all(u8::is_ascii_digit) {
            self.retry = std::str::from_utf8(value).ok().and_then(|v| v.parse().ok());
        }
        if field == b"data" {
            if self.has_data {
                self.data.push(b'\n');
            }
            self.data.extend_from_slice(value);
            self.has_data = true;
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) -> Result<(), SseError> {
        self.event_bytes = 0;
        if !std::mem::take(&mut self.has_data) {
            return Ok(()); // an event without data dispatches nothing
        }
        let data = std::mem::take(&mut self.data);
        let data = String::from_utf8(data).map_err(|e| SseError::NotUtf8(e.utf8_error()))?;
        out.push(Event { data });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode_in(chunks: &[&[u8]], limit: usize) -> Result<Vec<String>, SseError> {
        let mut decoder = Decoder::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            decoder.feed(chunk, &mut out)?;
        }
        Ok(out.into_iter().map(|e| e.data).collect())
    }

    fn decode(chunks: &[&[u8]]) -> Vec<String> {
        decode_in(chunks, 1 << 20).expect("a valid stream")
    }

    #[test]
    fn every_split_of_a_multibyte_event_decodes_the_same() {
        // Thai, Russian, an emoji (4 bytes) and a CRLF line end.
        let stream = "event: message\r\ndata: {\"t\":\"สวัสดี Привет 😀\"}\r\n\r\n".as_bytes();
        let whole = decode(&[stream]);
        assert_eq!(whole, ["{\"t\":\"สวัสดี Привет 😀\"}"]);
        for i in 0..=stream.len() {
            assert_eq!(decode(&[&stream[..i], &stream[i..]]), whole, "split at {i}");
            for j in i..=stream.len() {
                assert_eq!(
                    decode(&[&stream[..i], &stream[i..j], &stream[j..]]),
                    whole,
                    "split at {i} and {j}"
                );
            }
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(decode(&bytes), whole, "one byte at a time");
    }

    #[test]
    fn line_ends_comments_fields_and_multiline_data() {
        let stream = b": keep-alive\n\ndata:a\rdata: b\r\ndata\nid: 7\nretry: 10\nevent: x\n\n\n";
        assert_eq!(decode(&[stream]), ["a\nb\n"]);
        // An event without data dispatches nothing; nor does a trailing,
        // unterminated one.
        assert_eq!(decode(&[b"event: x\n\ndata: cut"]), Vec::<String>::new());
        // A colon-less line names a field with an empty value.
        assert_eq!(decode(&[b"data\n\n"]), [""]);
        // Only one space after the colon is stripped.
        assert_eq!(decode(&[b"data:  two\n\n"]), [" two"]);
    }

    #[test]
    fn a_leading_bom_is_skipped_even_when_split() {
        let stream = b"\xEF\xBB\xBFdata: x\n\n";
        for i in 0..=stream.len() {
            assert_eq!(decode(&[&stream[..i], &stream[i..]]), ["x"], "split at {i}");
        }
        // A BOM-like prefix that is not a BOM is kept as text.
        assert_eq!(decode(&[b"\xEF", b"data: y\n\n"]).len(), 0);
    }

    #[test]
    fn a_crlf_split_between_chunks_is_one_line_end() {
        assert_eq!(decode(&[b"data: a\r", b"\n\r", b"\n"]), ["a"]);
        assert_eq!(decode(&[b"data: a\r", b"\r"]), ["a"]);
    }

    #[test]
    fn an_event_over_the_limit_is_an_error_whole_or_in_pieces() {
        let event = format!("data: {}\n\n", "x".repeat(100));
        assert_eq!(
            decode_in(&[event.as_bytes()], event.len()).unwrap().len(),
            1
        );
        let err = decode_in(&[event.as_bytes()], event.len() - 1).unwrap_err();
        assert_eq!(err, SseError::TooLarge(event.len() - 1));
        // Without any line end: the held line counts too.
        let pieces: Vec<&[u8]> = [b"data: ".as_slice(); 20].to_vec();
        assert!(matches!(
            decode_in(&pieces, 100),
            Err(SseError::TooLarge(100))
        ));
        // Events under the limit one by one pass, however many there are.
        let many = "data: 0123456789\n\n".repeat(1000);
        assert_eq!(decode_in(&[many.as_bytes()], 20).unwrap().len(), 1000);
    }

    #[test]
    fn invalid_utf8_in_a_complete_event_is_an_error() {
        let err = decode_in(&[b"data: \xFF\xFE\n\n"], 100).unwrap_err();
        assert!(matches!(err, SseError::NotUtf8(_)), "{err}");
        // A character cut by the end of the stream never dispatches.
        assert_eq!(decode(&["data: ส".as_bytes()[..7].as_ref()]).len(), 0);
    }
}
