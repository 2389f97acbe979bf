//! Paging of the list methods: opaque cursors and one page of a list.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use tern_protocol::error::ErrorObject;

fn encode_cursor(offset: usize) -> String {
    URL_SAFE_NO_PAD.encode(format!("tern:{offset}"))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = URL_SAFE_NO_PAD.decode(cursor).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .strip_prefix("tern:")?
        .parse()
        .ok()
}

/// The page of `items` that `cursor` points at, `page_size` long, and the
/// cursor of the next page; an unreadable cursor is `-32602`.
pub(crate) fn page<T: Clone>(
    cursor: Option<&str>,
    items: &[T],
    page_size: usize,
) -> Result<(Vec<T>, Option<String>), ErrorObject> {
    let start = match cursor {
        None => 0,
        Some(c) => decode_cursor(c)
            .filter(|&o| o <= items.len())
            .ok_or_else(|| ErrorObject::invalid_params("Invalid cursor"))?,
    };
    let end = start.saturating_add(page_size).min(items.len());
    let next = (end < items.len()).then(|| encode_cursor(end));
    Ok((items[start..end].to_vec(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_walk_the_list_and_refuse_foreign_cursors() {
        let items: Vec<u32> = (0..5).collect();
        let (first, next) = page(None, &items, 2).unwrap();
        assert_eq!(first, [0, 1]);
        let (second, next) = page(next.as_deref(), &items, 2).unwrap();
        assert_eq!(second, [2, 3]);
        let (last, next) = page(next.as_deref(), &items, 2).unwrap();
        assert_eq!((last, next), (vec![4], None));
        for bad in [
            "",
            "!!",
            &URL_SAFE_NO_PAD.encode("tern:6"),
            &URL_SAFE_NO_PAD.encode("x:1"),
        ] {
            assert!(page(Some(bad), &items, 2).is_err(), "{bad}");
        }
    }
}
